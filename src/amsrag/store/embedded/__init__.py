"""The embedded store: an index directory holding passages in SQLite and derived indexes beside it
(`index.EmbeddedIndex`), its passage table (`sqlite`) and its manifest (`manifest`)."""

from amsrag.store.embedded.index import COMPONENTS, EmbeddedIndex
from amsrag.store.writes import DeleteReport, IngestReport, expected_params

__all__ = ["COMPONENTS", "DeleteReport", "EmbeddedIndex", "IngestReport", "expected_params"]
