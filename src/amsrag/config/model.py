"""`AmsragConfig`: every section in one model, read from and written to TOML."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import Field

from amsrag.config.answer import CorrectiveConfig, DecomposeConfig, GeneratorConfig
from amsrag.config.base import Section
from amsrag.config.index import BM25Config, ChunkConfig, DenseConfig, EmbeddingConfig, GraphConfig, IngestConfig
from amsrag.config.routing import ClassifierConfig, FusionConfig, RouterConfig
from amsrag.config.service import AuditConfig, MonitorConfig, QueryLogConfig, ReviewConfig, ServeConfig, ShadowConfig
from amsrag.config.sources import ExternalConfig, TablesConfig, ThemeConfig
from amsrag.errors import InputError


class AmsragConfig(Section):
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
