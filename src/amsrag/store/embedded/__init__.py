"""The embedded store: an index directory holding passages in SQLite and derived indexes beside it
(`index.EmbeddedIndex`), its passage table (`sqlite`) and its manifest (`manifest`). The names below are
imported on first use (`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
    from amsrag.store.embedded.core import COMPONENTS
    from amsrag.store.embedded.index import EmbeddedIndex
    from amsrag.store.writes import DeleteReport, IngestReport, expected_params

__all__ = ["COMPONENTS", "DeleteReport", "EmbeddedIndex", "IngestReport", "expected_params"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "COMPONENTS": "amsrag.store.embedded.core", "EmbeddedIndex": "amsrag.store.embedded.index",
    "DeleteReport": "amsrag.store.writes", "IngestReport": "amsrag.store.writes",
    "expected_params": "amsrag.store.writes"})
