"""The span reader's inputs: a question and its contexts cut into overlapping windows of word pieces, padded
into batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

JOINT_SEP = " || "  # between the passages of a joint context

# Characters of a question the reader looks at: its token budget is `max_question` (64) word pieces, and 64
# word pieces are never more than a few hundred characters of real text; without this cap a 100 kB question
# would be tokenised, and scanned by the either-or patterns, in full before the 64 are kept.
CHARS_PER_QUESTION_TOKEN = 16


@dataclass(frozen=True, slots=True)
class Window:
    """One model input: [CLS] question [SEP] context-piece [SEP]; `offsets` map context tokens to chars."""

    passage: int  # index into the passages read (-1 - j: the j-th joint context)
    ids: list[int]
    type_ids: list[int]
    ctx_start: int  # first context token position in `ids`
    offsets: list[tuple[int, int]]  # char offsets (in the context string) of ids[ctx_start:ctx_start+len]


def context_of(title: str, text: str) -> str:
    """The string a passage is read as (the title can hold the answer: HotpotQA's bridge entities)."""
    title = title.strip()
    return f"{title}: {text}" if title else text


class WindowMaker:
    """Question + context → overlapping windows of at most `max_len` tokens (`stride` tokens overlap)."""

    def __init__(self, tokenizer: Any, max_len: int = 256, stride: int = 96, max_question: int = 64) -> None:
        self.tok = tokenizer
        self.max_len = max_len
        self.stride = stride
        self.max_question = max_question
        self.cls = int(tokenizer.token_to_id("[CLS]"))
        self.sep = int(tokenizer.token_to_id("[SEP]"))

    def question_ids(self, question: str) -> list[int]:
        return list(self.tok.encode(question, add_special_tokens=False).ids[: self.max_question])

    def encode_contexts(self, contexts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        encs = self.tok.encode_batch(list(contexts), add_special_tokens=False)
        return [(list(e.ids), [tuple(o) for o in e.offsets]) for e in encs]

    def windows(self, q_ids: list[int], ctx_ids: list[int], offsets: list[tuple[int, int]], passage: int,
                max_len: int | None = None) -> list[Window]:
        max_len = max_len or self.max_len
        room = max(16, max_len - len(q_ids) - 3)
        step = max(16, room - self.stride)
        head = [self.cls, *q_ids, self.sep]
        out = []
        start = 0
        while True:
            piece = ctx_ids[start:start + room]
            ids = [*head, *piece, self.sep]
            types = [0] * len(head) + [1] * (len(piece) + 1)
            out.append(Window(passage, ids, types, len(head), offsets[start:start + room]))
            if start + room >= len(ctx_ids):
                break
            start += step
        return out

    def fits(self, q_ids: list[int], n_ctx_tokens: int, max_len: int) -> bool:
        return len(q_ids) + n_ctx_tokens + 3 <= max_len


def pad_batch(windows: Sequence[Window]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = max(len(w.ids) for w in windows)
    ids = np.zeros((len(windows), n), dtype=np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, w in enumerate(windows):
        ids[i, :len(w.ids)] = w.ids
        types[i, :len(w.ids)] = w.type_ids
        mask[i, :len(w.ids)] = 1
    return ids, types, mask
