"""One serialisable configuration model (TOML on disk)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field

from amsrag.errors import InputError


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


class AmsragConfig(_Section):
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    chunking: ChunkConfig = Field(default_factory=ChunkConfig)
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig)

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
