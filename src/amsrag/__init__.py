"""amsrag: adaptive multi-source retrieval-augmented generation."""

from amsrag.types import Hit, Passage, QAExample, QASet

__version__ = "0.1.0"
INDEX_FORMAT_VERSION = 1

__all__ = ["INDEX_FORMAT_VERSION", "Hit", "Passage", "QAExample", "QASet", "__version__"]
