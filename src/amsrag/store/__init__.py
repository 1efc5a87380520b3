"""Passage stores and their derived indexes: the `PassageIndex` Protocol (`base`), what both backends
share about writing (`writes`), the embedded store (`embedded`), PostgreSQL (`postgres`, optional
extra) and one entry point for either (`open`)."""

from amsrag.store.base import PassageIndex
from amsrag.store.embedded import EmbeddedIndex
from amsrag.store.writes import DeleteReport, IngestReport

__all__ = ["DeleteReport", "EmbeddedIndex", "IngestReport", "PassageIndex"]
