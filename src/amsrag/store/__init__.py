"""Passage stores and their derived indexes."""

from amsrag.store.embedded import DeleteReport, EmbeddedIndex, IngestReport

__all__ = ["DeleteReport", "EmbeddedIndex", "IngestReport"]
