"""Reading the theme inputs from an index: passage ids, label texts and the stored vectors (no re-embedding)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amsrag.store.base import PassageIndex
from amsrag.themes.build import PassageBatch
from amsrag.types import Passage

BATCH = 1000


def label_text(passage: Passage) -> str:
    """The text a passage's label terms come from: its title, then its text."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


def index_batch(index: PassageIndex, ids: Sequence[str] | None = None) -> PassageBatch:
    """(ids, label texts, vectors) of the index's passages (every live one, in row order, or the given ids that
    are stored, in the given order), the vectors read from the dense index. Call it before a delete to hand the
    removed passages' content to `update_themes`."""
    out_ids: list[str] = []
    texts: list[str] = []
    vecs: list[np.ndarray] = []

    def take(passages: list[Passage]) -> None:
        rows = index.rows_for_ids([p.id for p in passages])
        out_ids.extend(p.id for p in passages)
        texts.extend(label_text(p) for p in passages)
        vecs.append(np.asarray(index.vectors_for_rows([rows[p.id] for p in passages]), dtype=np.float32))

    if ids is None:
        batch: list[Passage] = []
        for p in index.iter_passages():
            batch.append(p)
            if len(batch) == BATCH:
                take(batch)
                batch = []
        if batch:
            take(batch)
    else:
        found = index.rows_for_ids(list(ids))
        rows = [found[pid] for pid in ids if pid in found]
        for start in range(0, len(rows), BATCH):
            take(index.passages_by_rows(rows[start : start + BATCH]))
    return out_ids, texts, np.vstack(vecs) if vecs else np.zeros((0, index.encoder.dim), np.float32)
