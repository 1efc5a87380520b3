"""What the store conformance suites share: the hooks a backend's test class implements (`StoreHooks`) and the
comparison of retriever results across backends (ties broken by passage id, BM25 scores within `TOL`).

This module imports pytest; nothing else in amsrag imports it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from amsrag.config import AmsragConfig
from amsrag.retrievers import retriever_for
from amsrag.store import Store
from amsrag.types import RETRIEVERS, Hit, Passage, QAExample

TOL = 1e-4  # BM25: bm25s sums in float32, PostgreSQL in float8
OTHER_MODEL_ID = "some-other-model|max_length=512"

IndexFactory = Callable[..., Store]
Results = dict[tuple[str, str], list[Hit]]


def assert_same_ranking(a: list[Hit], b: list[Hit], where: str = "") -> None:
    """Same length, same scores (within TOL), same ids in order; runs of scores equal within TOL may
    be permuted only if their scores differ in the last bits (they are compared as sets)."""
    assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} hits"
    for x, y in zip(a, b, strict=True):
        assert abs(x.score - y.score) <= TOL * max(1.0, abs(x.score)), f"{where}: {x} vs {y}"
    i = 0
    while i < len(a):
        j = i + 1
        while j < len(a) and abs(a[j].score - a[j - 1].score) <= TOL * max(1.0, abs(a[j].score)):
            j += 1
        exact_tie = all(a[n].score == a[i].score for n in range(i, j)) and all(
            b[n].score == b[i].score for n in range(i, j))
        got, want = [h.id for h in b[i:j]], [h.id for h in a[i:j]]
        if exact_tie or j - i == 1:
            assert got == want, f"{where}: ranks {i + 1}-{j}: {got} != {want}"
        else:
            assert set(got) == set(want) or j == len(a), f"{where}: ranks {i + 1}-{j}: {got} != {want}"
        i = j


def all_results(index: Store, questions: Sequence[QAExample], k: int = 10) -> Results:
    """Every retriever's hits for every question, keyed by (question id, retriever name)."""
    out: Results = {}
    for q in questions:
        vec = index.encoder.encode_query(q.question)
        for name in RETRIEVERS:
            out[(q.id, name)] = retriever_for(index, name).search(q.question, k, vec)
    return out


def assert_same_results(got: Results, want: Results) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert_same_ranking(want[key], got[key], str(key))


class StoreHooks(ABC):
    """What a backend's test class supplies (a new empty index, reopening, tampering with stored parameters),
    and the helpers the capability suites share."""

    backend: ClassVar[str] = ""

    @abstractmethod
    def create_index(self, request: pytest.FixtureRequest, directory: Path,
                     config: AmsragConfig | None) -> Store:
        """A new empty index of the backend; `directory` is a fresh path it may use."""

    @abstractmethod
    def tamper_model_id(self, index: Any, model_id: str) -> None:
        """Record `model_id` as the embedding model in the closed `index`'s stored parameters."""

    @abstractmethod
    def reopen(self, index: Any) -> Store:
        """Open the closed `index` again from where it is stored."""

    @abstractmethod
    def drop_graph_params(self, index: Any, keys: Sequence[str]) -> None:
        """Remove `keys` from the graph parameters recorded for the closed `index` (as an older amsrag left them)."""

    @pytest.fixture
    def make_index(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexFactory]:
        """A factory of new empty indexes of the backend, closed after the test."""
        made: list[Store] = []

        def make(config: AmsragConfig | None = None) -> Store:
            idx = self.create_index(request, tmp_path / f"index{len(made)}", config)
            made.append(idx)
            return idx

        yield make
        for idx in made:
            idx.close()

    def reopen_closed(self, index: Store) -> Store:
        index.close()
        return self.reopen(index)

    ZH_PASSAGES: ClassVar[dict[tuple[str, str], str]] = {
        ("zh-game", "战国无双3"): "《战国无双3》是由光荣和ω-force合作开发的动作游戏，于2010年发售。",
        ("zh-street", "长宁区"): "长宁区是上海市的一个市辖区。鲁迅曾住在江苏路街道附近。",
        ("en", "Ada Lovelace"): "Ada Lovelace wrote the first published algorithm for Charles Babbage's engine.",
    }

    def _add_chinese(self, idx: Store, passages: dict[tuple[str, str], str]) -> None:
        """Add (id, title) -> text passages with random unit vectors (no encoder needed)."""
        rng = np.random.default_rng(5)
        vectors = rng.normal(size=(len(passages), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        idx.add([Passage(id=i, title=t, text=x) for (i, t), x in passages.items()], vectors=vectors)

    @staticmethod
    def _query_keys(idx: Store, query: str) -> set[str]:
        graph: Any = getattr(retriever_for(idx, "graph"), "graph")  # noqa: B009  (Store types it as Retriever)
        return {graph.entity_key_of(e) for e in graph.query_entities(query)}
