"""Keeping an index's corpus themes in step with its passages (after every build, add, sync or delete).

The stored themes know which passages they hold; the difference to the index's passages is applied
incrementally (`update_themes`: new passages join the nearest theme, removed ones leave), and the themes
are rebuilt from every passage vector when there are none yet or the update says a rebuild is due
(growth, shrinkage or drift past `themes.rebuild_growth` / `themes.drift_tolerance`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.progress import Progress
from amsrag.store.base import Store
from amsrag.themes import build_themes, update_themes
from amsrag.themes.build import PassageBatch
from amsrag.types import Passage

log = logging.getLogger("amsrag.indexing")


@dataclass(frozen=True, slots=True)
class ThemesReport:
    action: str  # built | updated | unchanged | off
    themes: int
    passages: int
    added: int = 0
    removed: int = 0
    seconds: float = 0.0
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"action": self.action, "themes": self.themes, "passages": self.passages, "added": self.added,
                "removed": self.removed, "seconds": round(self.seconds, 3), "reasons": list(self.reasons)}


def _passage_ids(index: Store) -> dict[str, int]:
    rows = index.stored_rows()
    return {pid: row for (pid, _), row in zip(index.describe_rows(rows), rows, strict=True)}


READ_BATCH = 1000


def label_text(passage: Passage) -> str:
    """The text a passage's label terms come from: its title, then its text."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


def index_batch(index: Store, ids: Sequence[str] | None = None) -> PassageBatch:
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
            if len(batch) == READ_BATCH:
                take(batch)
                batch = []
        if batch:
            take(batch)
    else:
        found = index.rows_for_ids(list(ids))
        rows = [found[pid] for pid in ids if pid in found]
        for start in range(0, len(rows), READ_BATCH):
            take(index.passages_by_rows(rows[start : start + READ_BATCH]))
    return out_ids, texts, np.vstack(vecs) if vecs else np.zeros((0, index.encoder.dim), np.float32)


def refresh_themes(index: Store, notice: Callable[[str], None] | None = None,
                   rebuild: bool = False, progress: Progress | None = None) -> ThemesReport:
    """Apply the difference between the stored themes and the passages (or rebuild); `progress` shows a
    rebuild's stages (choosing k, the final fit)."""
    cfg = index.config.themes
    t0 = time.perf_counter()
    if not cfg.enabled:
        return ThemesReport("off", 0, len(index))
    say = notice or (lambda message: log.info(message))
    stored = _passage_ids(index)
    current = None if rebuild else index.themes()
    reasons: tuple[str, ...] = ()
    if current is not None:
        known = set(current.passage_ids)
        added = [pid for pid in stored if pid not in known]
        removed = [pid for pid in current.passage_ids if pid not in stored]
        if not added and not removed:
            return ThemesReport("unchanged", current.k, len(stored), seconds=time.perf_counter() - t0)
        updated = update_themes(current, added=index_batch(index, added) if added else None, removed_ids=removed)
        if not updated.rebuild_due:
            index.save_themes(updated)
            return ThemesReport("updated", updated.k, len(stored), len(added), len(removed),
                                time.perf_counter() - t0)
        reasons = tuple(updated.state.rebuild_reasons)
        say("themes: rebuilding (" + "; ".join(reasons) + ")")
    ids, texts, vectors = index_batch(index)
    themes = build_themes(ids, texts, vectors, cfg, progress)
    index.save_themes(themes)
    return ThemesReport("built", themes.k, len(ids), seconds=time.perf_counter() - t0, reasons=reasons)
