"""The store conformance suite: the same inputs give the same results on every `PassageIndex` backend.

Subclass `PassageIndexConformance` in a backend's test module (its name starting with `Test`) and
implement `create_index` (a new empty index of the backend), `tamper_model_id`, `reopen` and
`drop_graph_params`. The
tests also use these fixtures, which the test suite's conftest provides: `slice_passages` (a list of
Passage), `slice_vectors` (their embeddings, aligned), `slice_questions` (QAExample over them) and
`built_index` (an embedded index of `slice_passages`, the reference the results are compared with).
Retriever results are compared with ties broken by passage id and BM25 scores within `TOL`.

This module imports pytest; nothing else in amsrag imports it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pytest

from amsrag.config import AmsragConfig
from amsrag.errors import IndexMismatchError, InputError
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex, Store
from amsrag.store.documents import Document
from amsrag.store.query_library import QueryLibrary
from amsrag.types import RETRIEVERS, Hit, Passage, QAExample

if TYPE_CHECKING:
    from amsrag.store.postgres.store import PostgresIndex

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


class PassageIndexConformance(ABC):
    """The backend-independent store tests; a subclass per backend supplies the hooks below."""

    backend: ClassVar[str] = ""

    # ---- hooks -------------------------------------------------------------------------
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

    # ---- tests -------------------------------------------------------------------------
    def test_add_dedupe_and_conflicts(self, make_index: IndexFactory, slice_passages: list[Passage],
                                      slice_vectors: np.ndarray) -> None:
        idx: Any = make_index()  # Any: an assertion below reads `.text` of `get`'s Optional result
        idx.add(slice_passages[:5], vectors=slice_vectors[:5])
        p = slice_passages[0]
        copy = Passage(id="another-id", title=p.title, text="  " + p.text + " ")
        report = idx.add([copy, Passage(id="new", title="New", text="Fresh text about nothing in particular.")])
        assert (report.added, report.skipped_duplicate_content) == (1, 1)
        again = idx.add(slice_passages[:5], vectors=slice_vectors[:5])
        assert (again.added, again.skipped_existing) == (0, 5)
        with pytest.raises(InputError, match="already in the index with different content"):
            idx.add([Passage(id=p.id, title="x", text="different"), Passage(id="n2", text="more text")])
        assert idx.get("n2") is None and idx.get(p.id).text == p.text and len(idx) == 6
        with pytest.raises(InputError, match="duplicate passage id 'dup'"):
            idx.add([Passage(id="dup", text="a b c"), Passage(id="dup", text="d e f")])
        with pytest.raises(InputError, match="empty text"):
            idx.add([Passage(id="blank", text="   ")])
        with pytest.raises(InputError, match="2 passages but 1 vectors"):
            idx.add([Passage(id="v1", text="one"), Passage(id="v2", text="two")], vectors=slice_vectors[:1])
        assert len(idx) == 6

    def test_delete_is_all_or_nothing(self, make_index: IndexFactory, slice_passages: list[Passage],
                                      slice_vectors: np.ndarray) -> None:
        idx = make_index()
        idx.add(slice_passages[:10], vectors=slice_vectors[:10])
        p = slice_passages[0]
        with pytest.raises(InputError, match="not in the index"):
            idx.delete([p.id, "no-such-id"])
        assert idx.get(p.id) is not None and len(idx) == 10
        with pytest.raises(InputError, match="no passage ids"):
            idx.delete([])
        assert idx.delete([p.id, slice_passages[1].id, p.id]).deleted == 2
        assert idx.get(p.id) is None and len(idx) == 8
        for name in RETRIEVERS:
            hits = retriever_for(idx, name).search(p.title + " " + p.text[:100], k=10)
            assert p.id not in {h.id for h in hits}

    def test_documents_are_the_unit_of_change(self, make_index: IndexFactory, slice_passages: list[Passage],
                                              slice_vectors: np.ndarray) -> None:
        idx: Any = make_index()  # Any: assertions read `.text` of `get`'s Optional result
        idx.add(slice_passages[:4], vectors=slice_vectors[:4])
        base = len(idx)
        texts = [p.text for p in slice_passages[4:10]]
        a1 = Document.of("kb/a.md", [Passage(f"kb/a.md#{i}", t, "A") for i, t in enumerate(texts[:3])],
                         "fp1", "kb/a.md")
        b1 = Document.of("kb/b.md", [Passage("kb/b.md#0", texts[3], "B")], "fpb", "kb/b.md")
        r = idx.put_documents([a1, b1])
        assert (r.created, r.added, r.removed, r.embedded) == (2, 4, 0, 4)
        docs = idx.documents(prefix="kb/")
        assert {d: (i.passages, i.content_hash, i.source) for d, i in docs.items()} == {
            "kb/a.md": (3, "fp1", "kb/a.md"), "kb/b.md": (1, "fpb", "kb/b.md")}
        assert idx.put_documents([a1]).unchanged == 1 and len(idx) == base + 4
        # an edit: chunk 1 changes, a chunk is inserted before the old last one (its id shifts)
        a2 = Document.of("kb/a.md", [Passage("kb/a.md#0", texts[0], "A"), Passage("kb/a.md#1", texts[4], "A"),
                                     Passage("kb/a.md#2", texts[5], "A"), Passage("kb/a.md#3", texts[2], "A")],
                         "fp2", "kb/a.md")
        r = idx.put_documents([a2])
        assert (r.kept, r.removed, r.added, r.created) == (1, 2, 3, 0)
        assert (r.reused_vectors, r.embedded) == (1, 2)  # the shifted chunk keeps its vector
        assert idx.documents(prefix="kb/")["kb/a.md"].content_hash == "fp2"
        assert [idx.get(f"kb/a.md#{i}").text for i in range(4)] == [texts[0], texts[4], texts[5], texts[2]]
        assert idx.get("kb/a.md#1").doc_id == "kb/a.md"
        hits = retriever_for(idx, "bm25").search(texts[1][:200], k=20)
        assert texts[1] not in {idx.get(h.id).text for h in hits}  # the replaced chunk is gone from BM25
        # another document may not take a passage id of this one
        with pytest.raises(InputError, match="already belong to another document"):
            idx.put_documents([Document.of("kb/c.md", [Passage("kb/a.md#0", "stolen id text", "C")])])
        with pytest.raises(InputError, match="not in the index"):
            idx.delete_documents(["kb/b.md", "kb/nope.md"])
        assert len(idx) == base + 5
        # put and delete in one transaction: b's content moves to a new document without re-embedding
        moved = Document.of("kb/moved.md", [Passage("kb/moved.md#0", texts[3], "B")], "fpm", "kb/moved.md")
        r = idx.put_documents([moved], delete=["kb/b.md"])
        assert (r.deleted_documents, r.added, r.removed, r.embedded) == (1, 1, 1, 0)
        assert set(idx.documents(prefix="kb/")) == {"kb/a.md", "kb/moved.md"}
        d = idx.delete_documents(["kb/a.md"])
        assert (d.deleted, d.documents) == (4, 1) and len(idx) == base + 1
        assert idx.check().ok

    def test_staged_vectors_survive_and_are_reused(self, make_index: IndexFactory, slice_passages: list[Passage],
                                                   slice_vectors: np.ndarray) -> None:
        idx = make_index()
        ps = slice_passages[:6]
        hashes = [p.content_hash for p in ps]
        assert idx.unembedded(hashes) == hashes and idx.count_staged(hashes) == 0
        idx.stage_vectors(hashes[:4], slice_vectors[:4])
        assert len(idx) == 0  # staging writes no passage
        assert idx.unembedded(hashes) == hashes[4:] and idx.count_staged(hashes) == 4
        idx = self.reopen_closed(idx)
        report = idx.add(ps)
        assert (report.added, report.embedded) == (6, 2)
        assert idx.count_staged(hashes) == 0 and idx.unembedded(hashes) == []
        rows = idx.rows_for_ids([p.id for p in ps])
        got = idx.vectors_for_rows([rows[p.id] for p in ps[:4]])
        assert np.allclose(got, slice_vectors[:4], atol=1e-6)
        with pytest.raises(InputError, match=r"need a \(2, 384\) array"):
            idx.stage_vectors(hashes[:2], slice_vectors[:1])

    def reopen_closed(self, index: Store) -> Store:
        index.close()
        return self.reopen(index)

    @pytest.mark.slow
    def test_incremental_add_and_delete_match_the_embedded_full_build(
            self, make_index: IndexFactory, built_index: EmbeddedIndex, slice_passages: list[Passage],
            slice_vectors: np.ndarray, slice_questions: list[QAExample]) -> None:
        half = len(slice_passages) // 2
        inc = make_index()
        inc.add(slice_passages[:half], vectors=slice_vectors[:half])
        report = inc.add(slice_passages, vectors=slice_vectors)
        assert (report.added, report.skipped_existing) == (len(slice_passages) - half, half)
        assert_same_results(all_results(inc, slice_questions[:8]), all_results(built_index, slice_questions[:8]))

        gone = {p.id for p in slice_passages[10:30]}
        inc.delete(sorted(gone))
        keep = [i for i, p in enumerate(slice_passages) if p.id not in gone]
        fresh = EmbeddedIndex.create(built_index.path.parent.parent / f"fresh-{self.backend}-{id(inc)}")
        fresh.add([slice_passages[i] for i in keep], vectors=slice_vectors[keep])
        assert_same_results(all_results(inc, slice_questions), all_results(fresh, slice_questions))
        fresh.close()

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

    def test_another_embedding_model_is_refused(self, make_index: IndexFactory, slice_passages: list[Passage],
                                                slice_vectors: np.ndarray) -> None:
        idx = make_index()
        idx.add(slice_passages[:3], vectors=slice_vectors[:3])
        idx.close()
        self.tamper_model_id(idx, OTHER_MODEL_ID)
        with pytest.raises(IndexMismatchError, match="some-other-model"):
            self.reopen(idx)

    def test_chinese_passages_are_found_and_labelled(self, make_index: IndexFactory) -> None:
        idx: Any = make_index()  # Any: the assertion reads `.metadata` of `get`'s Optional result
        texts = {"zh-targ": "TARG 使用模型自身的置信度信号来决定是否需要检索。",
                 "zh-rrf": "混合检索把 BM25 和向量检索的结果用倒数排名融合合并。",
                 "en": "The router picks one of three strategies from the classifier's confidence."}
        rng = np.random.default_rng(3)
        vectors = rng.normal(size=(len(texts), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        idx.add([Passage(id=k, text=v) for k, v in texts.items()], vectors=vectors)
        assert {k: idx.get(k).metadata["lang"] for k in texts} == {"zh-targ": "zh", "zh-rrf": "zh", "en": "en"}
        hits = retriever_for(idx, "bm25").search("什么信号决定是否检索？", 3)
        assert [h.id for h in hits][:1] == ["zh-targ"]
        assert [h.id for h in retriever_for(idx, "bm25").search("倒数排名融合", 3)][:1] == ["zh-rrf"]

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

    ZH_PASSAGES: ClassVar[dict[tuple[str, str], str]] = {
        ("zh-game", "战国无双3"): "《战国无双3》是由光荣和ω-force合作开发的动作游戏，于2010年发售。",
        ("zh-street", "长宁区"): "长宁区是上海市的一个市辖区。鲁迅曾住在江苏路街道附近。",
        ("en", "Ada Lovelace"): "Ada Lovelace wrote the first published algorithm for Charles Babbage's engine.",
    }

    @pytest.mark.parametrize("ner_zh", [True, False])
    def test_chinese_ner_follows_the_setting(self, make_index: IndexFactory, ner_zh: bool) -> None:
        """graph.ner_zh decides whether Chinese passages and questions get the Chinese NER (else spaCy's)."""
        config = AmsragConfig.model_validate({"graph": {"ner_zh": ner_zh}})
        idx = make_index(config)
        self._add_chinese(idx, self.ZH_PASSAGES)
        # "江苏路街道" is no title: only the Chinese NER of the passage makes it an entity, found in the question
        assert ("江苏路街道" in self._query_keys(idx, "江苏路街道在哪个区？")) is ner_zh
        assert "战国无双3" in self._query_keys(idx, "《战国无双3》是谁开发的？")  # a title inside Chinese text
        # a full-width digit: the surface form is not in the question, its key is (the question's NER finds it)
        assert "战国无双3" not in self._query_keys(idx, "《战国无双３》是谁开发的？")
        idx.update_config(config.model_copy(update={"graph": config.graph.model_copy(update={"query_ner": True})}))
        assert ("战国无双3" in self._query_keys(idx, "《战国无双３》是谁开发的？")) is ner_zh
        assert "ada lovelace" in self._query_keys(idx, "Who was Ada Lovelace?")

    @pytest.mark.parametrize("chinese", [True, False])
    def test_graph_from_before_the_chinese_settings(self, make_index: IndexFactory, chinese: bool) -> None:
        """A graph recorded without its Chinese entity settings opens and answers as before; `check` reports it
        (only when the index holds Chinese text) and `repair --component graph` brings it up to date."""
        from amsrag.retrieve.graph import ZH_PARAMS

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


if TYPE_CHECKING:
    def _both_backends_are_passage_indexes(e: EmbeddedIndex, p: PostgresIndex) -> tuple[Store, Store]:
        return e, p  # mypy checks that both classes satisfy the Protocol
