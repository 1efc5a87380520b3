"""Errors with messages meant for users: each names the problem and, where possible, the fix."""

from __future__ import annotations


class AmsragError(Exception):
    """Base class of every error amsrag raises on purpose."""


class InputError(AmsragError):
    """Bad user input: a file, a line, a query, an id."""


class IndexNotFoundError(AmsragError):
    pass


class IndexMismatchError(AmsragError):
    """The index on disk was built with another model, tokenizer or format version."""


class IndexCorruptError(AmsragError):
    pass


class IndexBusyError(AmsragError):
    """Another process held the index's write lock longer than this one would wait."""


class StorageError(AmsragError):
    """Writing the index failed for want of space or a failing disk; the index keeps its last committed state."""
