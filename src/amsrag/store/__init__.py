"""Passage stores and their derived indexes."""

from amsrag.store.base import PassageIndex
from amsrag.store.embedded import DeleteReport, EmbeddedIndex, IngestReport

__all__ = ["DeleteReport", "EmbeddedIndex", "IngestReport", "PassageIndex"]
