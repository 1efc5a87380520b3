"""One serialisable configuration model (TOML on disk)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from amsrag.errors import InputError
from amsrag.types import Complexity


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddingConfig(_Section):
    model: Literal["all-MiniLM-L6-v2-int8"] = "all-MiniLM-L6-v2-int8"
    max_length: int = Field(256, ge=16, le=512)
    batch_size: int = Field(32, ge=1, le=1024)
    threads: int = Field(1, ge=1, le=64, description="onnxruntime intra-op threads")


class BM25Config(_Section):
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    delta: float = Field(0.5, ge=0, description="bm25l / bm25+ only")
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["en", "none"] = "en"
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


class ClassifierConfig(_Section):
    artifact: str = Field("", description="classifier artifact directory; empty = the one shipped in amsrag")
    embedding_cache: str = Field(
        "", description="training-embedding cache directory; empty = <repo>/bench-cache or $AMSRAG_HOME/cache"
    )


def _per_class(value: float) -> dict[str, float]:
    return {"bm25": value, "dense": value, "graph": value}


class FusionConfig(_Section):
    """Fusion (DESIGN §5): RRF, CA-RRF (eqs. 8-10), MMR (eq. 11), adaptive k.

    k_by_class: the per-retriever RRF constant k_r(c). A small k sharpens the rank discount (the
    top few hits dominate), which suits zero/one-hop questions whose answer sits in one top passage;
    a large k flattens it so deeper candidates of every retriever survive, which multi-hop questions
    need (the bridge passage is often ranked low by each retriever). Defaults 30 / 40 / 80 bracket
    the usual k = 60. A retriever missing from its class's map falls back to `rrf_k`.
    beta_by_class: the priors beta_r^(c), uniform until `amsrag route tune` fits them (with uniform
    priors CA-RRF's weights are uniform for every alpha). Missing retrievers count as 0 before
    renormalising over the activated ones; all zero means uniform.
    """

    rrf_k: float = Field(60.0, ge=0, description="RRF constant k (ranks count from 1)")
    kappa: float = Field(2.0, ge=0, description="CA-RRF: rho(alpha) = sigmoid(kappa * (alpha - alpha0))")
    alpha0: float = Field(0.5, ge=0, le=1, description="CA-RRF: confidence at which rho = 0.5")
    k_by_class: dict[Complexity, dict[str, float]] = Field(
        default_factory=lambda: {"zero_hop": _per_class(30.0), "one_hop": _per_class(40.0),
                                 "multi_hop": _per_class(80.0)},
        description="CA-RRF: k_r(c) per complexity class and retriever",
    )
    beta_by_class: dict[Complexity, dict[str, float]] = Field(
        default_factory=lambda: {c: _per_class(1.0 / 3.0) for c in ("zero_hop", "one_hop", "multi_hop")},
        description="CA-RRF: prior beta_r^(c) per complexity class and retriever (renormalised when used)",
    )
    mmr_lambda: float = Field(0.5, ge=0, le=1, description="MMR: redundancy penalty lambda")
    mmr_pool: int = Field(2, ge=1, le=20, description="MMR picks k among the top mmr_pool * k fused passages")
    adaptive_k_drop: float = Field(
        0.5, ge=0, le=1, description="adaptive k: cut where the min-max normalised score falls this far below the top"
    )
    adaptive_k_min: int = Field(3, ge=0, description="adaptive k: floor (or all candidates if fewer)")
    adaptive_k_max: int = Field(10, ge=1, description="adaptive k: ceiling")

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


def _default_costs() -> dict[str, dict[str, float]]:
    # rows: the true class; columns: the route taken. In the proportions of seed 003's Table 1: the
    # right route costs 1.0, one step wider 1.6 (two steps 2.2), a multi_hop (or one_hop) question
    # sent down a cheaper path 12.0 — it loses its evidence and fails silently.
    return {
        "zero_hop": {"none": 1.0, "A": 1.2, "B": 1.6, "C": 2.2},
        "one_hop": {"none": 12.0, "A": 1.0, "B": 1.6, "C": 2.2},
        "multi_hop": {"none": 12.0, "A": 12.0, "B": 12.0, "C": 1.0},
    }


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
    cost_matrix: dict[str, dict[str, float]] = Field(default_factory=_default_costs)


class AmsragConfig(_Section):
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    chunking: ChunkConfig = Field(default_factory=ChunkConfig)
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)

    def to_toml(self) -> str:
        return tomli_w.dumps(self.model_dump(mode="json"))

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
