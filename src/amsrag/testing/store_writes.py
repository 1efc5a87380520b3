"""The write capability's conformance suite (`PassageWriter`): adds, deletes, documents, staged vectors and the
query-time settings, the same on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.store.documents import Document
from amsrag.testing.store_base import IndexFactory, StoreHooks, all_results, assert_same_results
from amsrag.types import RETRIEVERS, Passage, QAExample


class WriteConformance(StoreHooks):
    """Writing (`PassageWriter`): every change all or nothing, its results the same as the embedded store's."""

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
