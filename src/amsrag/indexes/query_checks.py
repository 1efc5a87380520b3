"""The checks of a query's arguments, shared by the indexes that rank (the entity graph) and the retrievers."""

from __future__ import annotations

from amsrag.errors import InputError
from amsrag.types import is_blank


def check_query(query: str) -> str:
    if not isinstance(query, str) or is_blank(query):
        raise InputError("query is empty: give a question or keywords to search for")
    return query.strip()


def check_k(k: int) -> int:
    if not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return k
