"""One serialisable configuration model (TOML on disk).

`AmsragConfig` (`model`) holds one section per concern, each a pydantic model in the module of its group:

- `index`: what an index is built with (embedding, bm25, dense, graph, chunking, ingest);
- `routing`: the classifier, fusion and the router (second hop, taxonomy);
- `sources`: tables, themes and external sources;
- `answer`: the generator, the decomposer and the corrective step;
- `service`: serve, the query log, the audit, monitoring, review and shadow probes;
- `paths`: where the home directory and the rebuildable caches are.

Every name is importable from `amsrag.config` itself.
"""

from __future__ import annotations

from amsrag.config.answer import CorrectiveConfig, DecomposeConfig, GeneratorConfig
from amsrag.config.index import BM25Config, ChunkConfig, DenseConfig, EmbeddingConfig, GraphConfig, IngestConfig
from amsrag.config.model import AmsragConfig
from amsrag.config.paths import amsrag_home, cache_root
from amsrag.config.routing import (
    EVIDENCE_PATHS,
    STRATEGIES,
    ClassifierConfig,
    FusionConfig,
    RouterConfig,
    SecondHopConfig,
    Strategy,
    TaxonomyConfig,
)
from amsrag.config.service import AuditConfig, MonitorConfig, QueryLogConfig, ReviewConfig, ServeConfig, ShadowConfig
from amsrag.config.sources import ExternalConfig, ExternalSourceConfig, TablesConfig, ThemeConfig

__all__ = [
    "EVIDENCE_PATHS",
    "STRATEGIES",
    "AmsragConfig",
    "AuditConfig",
    "BM25Config",
    "ChunkConfig",
    "ClassifierConfig",
    "CorrectiveConfig",
    "DecomposeConfig",
    "DenseConfig",
    "EmbeddingConfig",
    "ExternalConfig",
    "ExternalSourceConfig",
    "FusionConfig",
    "GeneratorConfig",
    "GraphConfig",
    "IngestConfig",
    "MonitorConfig",
    "QueryLogConfig",
    "ReviewConfig",
    "RouterConfig",
    "SecondHopConfig",
    "ServeConfig",
    "ShadowConfig",
    "Strategy",
    "TablesConfig",
    "TaxonomyConfig",
    "ThemeConfig",
    "amsrag_home",
    "cache_root",
]
