"""Reading an embedded index: passages, rows and vectors by id, every passage in row order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from amsrag.store.embedded.publish import EmbeddedPublish
from amsrag.types import Passage


class EmbeddedReads(EmbeddedPublish):
    """The read side (`PassageIndex`, `PassageScan`; `stored_rows` is in `core`, `stats` in `index`)."""

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        return [self._info[int(r)] for r in rows]

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """Internal rows of the given passage ids (unknown ids are left out)."""
        return {pid: self._row_of[pid] for pid in ids if pid in self._row_of}

    def passages_by_rows(self, rows: Sequence[int]) -> list[Passage]:
        found = self.table.passages_by_rows(rows)
        return [found[int(r)] for r in rows]

    def get(self, pid: str) -> Passage | None:
        return self.table.get(pid)

    def iter_passages(self) -> Iterator[Passage]:
        rows = self.stored_rows()
        for start in range(0, len(rows), 1000):
            yield from self.passages_by_rows(rows[start : start + 1000])

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray:
        return self.vector_index.vectors_for_rows(rows)

