"""Passage stores and their derived indexes: the capability Protocols (`base`: `PassageIndex` the read side a
query needs, `Store` every capability), what both backends share about writing (`writes`), the embedded store
(`embedded`), PostgreSQL (`postgres`, optional extra) and one entry point for either (`open`). The names below
are imported on first use (`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
    from amsrag.store.base import PassageIndex, QueryIndex, Store
    from amsrag.store.embedded import EmbeddedIndex
    from amsrag.store.writes import DeleteReport, IngestReport

__all__ = ["DeleteReport", "EmbeddedIndex", "IngestReport", "PassageIndex", "QueryIndex", "Store"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "DeleteReport": "amsrag.store.writes", "EmbeddedIndex": "amsrag.store.embedded.index",
    "IngestReport": "amsrag.store.writes", "PassageIndex": "amsrag.store.base",
    "QueryIndex": "amsrag.store.base", "Store": "amsrag.store.base"})
