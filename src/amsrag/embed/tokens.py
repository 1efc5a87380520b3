"""Counting embedding-tokenizer tokens: chunk budgets and evidence trimming."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amsrag.text.sentences import Span


class TokenCounter:
    """Counts embedding-tokenizer tokens (no special tokens), past the tokenizer's truncation length."""

    def __init__(self, tokenizer: Any = None) -> None:
        if tokenizer is None:
            from amsrag.embed import load_tokenizer

            tokenizer = load_tokenizer(512)
        self._tokenizer = tokenizer

    def counts(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) + sum(len(o.ids) for o in e.overflowing) for e in encodings]

    def count(self, text: str) -> int:
        return self.counts([text])[0]

    def token_offsets(self, text: str) -> list[Span]:
        enc = self._tokenizer.encode(text, add_special_tokens=False)
        offsets = list(enc.offsets)
        for overflow in enc.overflowing:
            offsets.extend(overflow.offsets)
        return offsets
