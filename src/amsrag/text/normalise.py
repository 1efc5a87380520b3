"""The question key: one normal form for deduplication, the query library and the review queue."""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s]")


def normalise_question(text: str) -> str:
    """The dedup key: NFKC, lower case, punctuation dropped, white space collapsed."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(_PUNCT.sub(" ", text).split())
