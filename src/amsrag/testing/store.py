"""The store conformance suite: the same inputs give the same results on every backend, one suite per capability
of `amsrag.store.base` — `ReadConformance` (`PassageIndex`, `PassageScan`), `WriteConformance` (`PassageWriter`,
in `store_writes`), `HealthConformance` (`IndexHealth`), `TableConformance`, `ThemeConformance` and
`LibraryConformance` — and `StoreConformance`, all of them.

Subclass `StoreConformance` (or the capability suites a backend has) in a backend's test module (its name
starting with `Test`) and implement the hooks of `StoreHooks`: `create_index` (a new empty index of the
backend), `tamper_model_id`, `reopen` and `drop_graph_params`. The tests also use these fixtures, which the test
suite's conftest provides: `slice_passages` (a list of Passage), `slice_vectors` (their embeddings, aligned),
`slice_questions` (QAExample over them) and `built_index` (an embedded index of `slice_passages`, the reference
the results are compared with). Retriever results are compared with ties broken by passage id and BM25 scores
within `TOL`.

This module imports pytest; nothing else in amsrag imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from amsrag.errors import IndexMismatchError, InputError
from amsrag.retrievers import retriever_for
from amsrag.store import Store
from amsrag.store.base import (
    IndexHealth,
    LibraryStorage,
    PassageIndex,
    PassageScan,
    PassageWriter,
    TableStorage,
    ThemeStorage,
)
from amsrag.store.query_library import QueryLibrary
from amsrag.tables.table import Table
from amsrag.testing.store_base import (
    OTHER_MODEL_ID,
    TOL,
    IndexFactory,
    StoreHooks,
    all_results,
    assert_same_ranking,
    assert_same_results,
)
from amsrag.testing.store_writes import WriteConformance
from amsrag.types import RETRIEVERS, Passage

if TYPE_CHECKING:
    from amsrag.store.embedded import EmbeddedIndex
    from amsrag.store.postgres.store import PostgresIndex

__all__ = ["TOL", "HealthConformance", "LibraryConformance", "PassageIndexConformance", "ReadConformance",
           "StoreConformance", "StoreHooks", "TableConformance", "ThemeConformance", "WriteConformance",
           "all_results", "assert_same_ranking", "assert_same_results"]


class ReadConformance(StoreHooks):
    """The read side (`PassageIndex`, `PassageScan`) and the retrievers built over it."""

    def test_reads_by_id_row_and_vector_survive_a_reopen(self, make_index: IndexFactory,
                                                          slice_passages: list[Passage],
                                                          slice_vectors: np.ndarray) -> None:
        idx = make_index()
        stored = slice_passages[:12]
        idx.add(stored, vectors=slice_vectors[:12])
        for _ in range(2):  # as written, then as stored
            ids = [p.id for p in stored[::3]]
            rows = idx.rows_for_ids([*ids, "no-such-id"])
            assert list(rows) == ids and len(idx) == 12
            order = [rows[i] for i in reversed(ids)]
            assert [pid for pid, _ in idx.describe_rows(order)] == list(reversed(ids))
            assert [(p.id, p.text) for p in idx.passages_by_rows(order)] == [
                (p.id, p.text) for p in reversed(stored[::3])]
            np.testing.assert_allclose(idx.vectors_for_rows(order), slice_vectors[[9, 6, 3, 0]], atol=1e-6)
            found = idx.get(stored[4].id)
            assert found is not None and found.text == stored[4].text and idx.get("no-such-id") is None
            assert idx.stored_rows() == sorted(idx.rows_for_ids([p.id for p in stored]).values())
            assert sorted(p.id for p in idx.iter_passages()) == sorted(p.id for p in stored)
            idx = self.reopen_closed(idx)
        idx.close()

    def test_bad_queries(self, make_index: IndexFactory, slice_passages: list[Passage],
                         slice_vectors: np.ndarray) -> None:
        idx = make_index()
        idx.add(slice_passages[:5], vectors=slice_vectors[:5])
        for name in RETRIEVERS:
            with pytest.raises(InputError, match="query is empty"):
                retriever_for(idx, name).search(" \n\t", k=5)
            with pytest.raises(InputError, match="k must be a positive integer"):
                retriever_for(idx, name).search("film", k=0)
        with pytest.raises(InputError, match="unknown retriever"):
            retriever_for(idx, "colbert")
        assert retriever_for(idx, "bm25").search("the of and", k=5) == []  # stop words only: no BM25 terms


class HealthConformance(StoreHooks):
    """Health (`IndexHealth`): opening checks, `check` and `repair`, following another handle's writes."""

    def test_another_handles_writes_are_seen_after_a_refresh(self, make_index: IndexFactory,
                                                              slice_passages: list[Passage],
                                                              slice_vectors: np.ndarray) -> None:
        idx = make_index()
        idx.add(slice_passages[:4], vectors=slice_vectors[:4])
        idx.close()
        writer, reader = self.reopen(idx), self.reopen(idx)
        try:
            assert not reader.stale() and not reader.refresh()
            writer.add(slice_passages[4:6], vectors=slice_vectors[4:6])
            reader.refresh()
            assert not reader.stale() and len(reader) == 6 and reader.get(slice_passages[5].id) is not None
            assert reader.check().ok and reader.stats()["passages"] == 6
            assert reader.repair(["bm25"]).rebuilt == ["bm25"] and reader.check().ok
            hits = retriever_for(reader, "bm25").search(slice_passages[5].title + " " + slice_passages[5].text[:80],
                                                        k=3)
            assert slice_passages[5].id in {h.id for h in hits}
        finally:
            writer.close()
            reader.close()

    def test_another_embedding_model_is_refused(self, make_index: IndexFactory, slice_passages: list[Passage],
                                                slice_vectors: np.ndarray) -> None:
        idx = make_index()
        idx.add(slice_passages[:3], vectors=slice_vectors[:3])
        idx.close()
        self.tamper_model_id(idx, OTHER_MODEL_ID)
        with pytest.raises(IndexMismatchError, match="some-other-model"):
            self.reopen(idx)

    @pytest.mark.parametrize("chinese", [True, False])
    def test_graph_from_before_the_chinese_settings(self, make_index: IndexFactory, chinese: bool) -> None:
        """A graph recorded without its Chinese entity settings opens and answers as before; `check` reports it
        (only when the index holds Chinese text) and `repair --component graph` brings it up to date."""
        from amsrag.indexes.entity_graph import ZH_PARAMS

        passages = self.ZH_PASSAGES if chinese else {("en", "Ada Lovelace"): self.ZH_PASSAGES[("en", "Ada Lovelace")],
                                                     ("en2", "Charles Babbage"): "Charles Babbage designed engines."}
        idx = make_index()
        self._add_chinese(idx, passages)
        question = "江苏路街道在哪里？Ada Lovelace" if chinese else "Who was Ada Lovelace?"
        before = [h.id for h in retriever_for(idx, "graph").search(question, 3)]
        assert idx.check().ok
        idx.close()
        self.drop_graph_params(idx, ZH_PARAMS)
        old = self.reopen(idx)
        try:
            assert [h.id for h in retriever_for(old, "graph").search(question, 3)] == before
            report = old.check()
            if not chinese:
                assert report.ok, report.problems  # English-only: nothing to rebuild
                return
            assert report.repairable == ["graph"] and "--component graph" in report.problems[0], report.problems
            assert old.repair(["graph"]).rebuilt == ["graph"]
            assert old.check().ok
            assert [h.id for h in retriever_for(old, "graph").search(question, 3)] == before
        finally:
            old.close()
        again = self.reopen(idx)
        try:
            assert again.check().ok  # the rebuilt graph's settings are recorded
        finally:
            again.close()


TABLES = (Table("kb/medals", ("country", "gold"), (("Italy", "0"), ("Norway", "3")), "Medal table", "kb/medals.csv"),
          Table("kb/films", ("film", "studio"), (("Cleopatra", "Fox"), ("Help!", "United Artists")), "Films"))


class TableConformance(StoreHooks):
    """Tables (`TableStorage`): stored all or nothing beside the passages, searched and queried read-only."""

    def test_tables_are_stored_replaced_and_deleted(self, make_index: IndexFactory) -> None:
        idx = make_index()
        assert idx.tables() is None
        report = idx.put_tables(list(TABLES))
        assert (report.added, report.rows, report.table_ids) == (2, 4, ("kb/medals", "kb/films"))
        again = idx.put_tables([TABLES[0]])
        assert (again.added, again.skipped) == (0, 1)
        changed = Table("kb/medals", ("country", "gold"), (("Italy", "1"),), "Medal table")
        with pytest.raises(InputError, match="kb/medals"):
            idx.put_tables([changed])
        assert idx.put_tables([changed], replace=True).replaced == 1
        idx = self.reopen_closed(idx)
        try:
            source = idx.tables()
            assert source is not None and len(source) == 2 and sorted(source.table_ids()) == ["kb/films", "kb/medals"]
            assert source.search("medal table gold", k=1)[0].table_id == "kb/medals"
            assert idx.delete_tables(["kb/films"]).table_ids == ("kb/films",)
            source = idx.tables()
            assert source is not None and source.table_ids() == ["kb/medals"]
        finally:
            idx.close()


class ThemeConformance(StoreHooks):
    """Themes (`ThemeStorage`): saved with the index and read back by another handle."""

    def test_themes_are_saved_and_read_by_another_handle(self, make_index: IndexFactory,
                                                         slice_passages: list[Passage],
                                                         slice_vectors: np.ndarray) -> None:
        from amsrag.indexing.themes import refresh_themes

        idx = make_index()
        idx.add(slice_passages, vectors=slice_vectors)
        assert idx.themes() is None
        assert refresh_themes(idx).action == "built"
        saved = idx.themes()
        assert saved is not None and saved.n_passages == len(slice_passages)
        idx.close()
        other = self.reopen(idx)
        try:
            got = other.themes()
            assert got is not None and got.n_passages == saved.n_passages
            assert [t.label_terms for t in got.themes] == [t.label_terms for t in saved.themes]
        finally:
            other.close()


class LibraryConformance(StoreHooks):
    """The query library (`LibraryStorage`): saved all or nothing apart from the passages."""

    def test_query_library_is_saved_apart_from_passages(self, make_index: IndexFactory,
                                                          slice_passages: list[Passage],
                                                          slice_vectors: np.ndarray) -> None:
        idx = make_index()
        idx.add(slice_passages[:6], vectors=slice_vectors[:6])
        assert idx.query_library() == QueryLibrary.empty() and len(idx.query_library()) == 0
        passages, stats = list(idx.iter_passages()), idx.stats()
        hits = retriever_for(idx, "dense").search("film director", 5)

        library = QueryLibrary.empty()
        questions = [f"Which film did director number {i} make?" for i in range(4)]
        library.add(questions, ["one_hop", "multi_hop", "one_hop", "multi_hop"], slice_vectors[10:14], "conformance")
        idx.save_query_library(library)
        assert idx.query_library() == library and idx.query_library().counts() == {
            "one_hop": 2, "multi_hop": 2, "source:conformance": 4}
        library.add([questions[0].upper(), "A question added later?"], ["multi_hop", "one_hop"],
                    slice_vectors[20:22], "second")  # a relabel (the latest wins) and a new query
        assert idx.query_library() != library  # what the index hands out is its own saved copy
        idx.save_query_library(library)
        with pytest.raises(InputError, match="dimensions"):
            idx.save_query_library(QueryLibrary.empty(dim=3))
        assert idx.query_library() == library
        assert idx.stats()["query_library"] == len(library)

        assert list(idx.iter_passages()) == passages and len(idx) == 6
        after = idx.stats()
        assert (after["passages"], after["generation"]) == (stats["passages"], stats["generation"])
        assert not idx.stale()
        assert retriever_for(idx, "dense").search("film director", 5) == hits

        idx.close()
        first, second = self.reopen(idx), self.reopen(idx)
        try:
            got = first.query_library()
            assert got == library and got.hops[0] == "multi_hop" and got.questions[0] == questions[0].upper()
            assert second.query_library() == library  # cached by the second handle...
            got = got.copy()
            got.add(["One more from another process?"], ["multi_hop"], slice_vectors[30:31], "other")
            first.save_query_library(got)
            assert second.query_library() == got  # ...and read again once another handle saved
            first.save_query_library(QueryLibrary.empty())
            assert len(second.query_library()) == 0 and len(second) == 6
        finally:
            first.close()
            second.close()


class StoreConformance(ReadConformance, WriteConformance, HealthConformance, TableConformance, ThemeConformance,
                       LibraryConformance):
    """Every capability: what a shipped backend passes."""

    def test_the_backend_has_every_capability(self, make_index: IndexFactory) -> None:
        idx = make_index()
        for capability in (PassageIndex, PassageScan, PassageWriter, IndexHealth, TableStorage, ThemeStorage,
                           LibraryStorage, Store):
            assert isinstance(idx, capability), capability.__name__


PassageIndexConformance = StoreConformance  # the suite's name before the capabilities (issue 41)


if TYPE_CHECKING:
    def _both_backends_are_stores(e: EmbeddedIndex, p: PostgresIndex) -> tuple[Store, Store]:
        return e, p  # mypy checks that both classes have every capability
