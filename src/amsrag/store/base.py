"""What every passage index backend provides (the embedded one now; PostgreSQL later)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.progress import Progress
from amsrag.retrieve.base import Retriever
from amsrag.types import Passage


@runtime_checkable
class PassageIndex(Protocol):
    """Passages plus the derived indexes the retrievers search; changes are all-or-nothing."""

    backend: str
    config: AmsragConfig

    def __len__(self) -> int: ...

    def add(self, passages: Iterable[Passage], progress: Progress | None = None,
            vectors: np.ndarray | None = None) -> Any: ...

    def delete(self, ids: Sequence[str], progress: Progress | None = None) -> Any: ...

    def get(self, pid: str) -> Passage | None: ...

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]: ...

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]: ...

    def passages_by_rows(self, rows: Sequence[int]) -> list[Passage]: ...

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray: ...

    def retriever(self, name: str) -> Retriever: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
