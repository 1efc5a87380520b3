"""The embedded index: persistence, incremental add/delete across all indexes, bad input, crashes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from amsrag.errors import IndexMismatchError, IndexNotFoundError, InputError
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.store.embedded import publish as publish_module

RETRIEVERS = ("bm25", "dense", "graph")


def _results(index: EmbeddedIndex, questions, k: int = 10) -> dict:
    out = {}
    for q in questions:
        vec = index.encoder.encode_query(q.question)
        for name in RETRIEVERS:
            hits = retriever_for(index, name).search(q.question, k, vec)
            out[(q.id, name)] = [(h.id, round(h.score, 4)) for h in hits]
    return out


class CountingEncoder:
    """Wraps the real encoder and counts the texts it embeds (no re-embedding of stored passages)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.model_id = inner.model_id
        self.encoded = 0

    def encode(self, texts, progress=None):
        self.encoded += len(texts)
        return self.inner.encode(texts, progress)

    def encode_query(self, text):
        return self.inner.encode_query(text)


def test_incremental_add_and_delete_match_full_builds(tmp_path, built_index, slice_passages, slice_vectors,
                                                      slice_questions) -> None:
    half = len(slice_passages) // 2
    inc = EmbeddedIndex.create(tmp_path / "inc")
    inc.add(slice_passages[:half], vectors=slice_vectors[:half])
    counting = CountingEncoder(inc.encoder)
    inc._encoder = counting
    report = inc.add(slice_passages)  # the first half is already stored: skipped, not re-embedded
    assert (report.added, report.skipped_existing) == (len(slice_passages) - half, half)
    assert counting.encoded == len(slice_passages) - half
    assert _results(inc, slice_questions) == _results(built_index, slice_questions)

    gone = [p.id for p in slice_passages[10:30]]
    inc.delete(gone)
    assert all(inc.get(g) is None for g in gone)
    fresh = EmbeddedIndex.create(tmp_path / "fresh")
    keep = [i for i, p in enumerate(slice_passages) if p.id not in set(gone)]
    fresh.add([slice_passages[i] for i in keep], vectors=slice_vectors[keep])
    assert _results(inc, slice_questions) == _results(fresh, slice_questions)
    for name in RETRIEVERS:
        for q in slice_questions:
            assert not {h.id for h in retriever_for(inc, name).search(q.question, k=20)} & set(gone)
    # and the state survives a reopen
    assert _results(EmbeddedIndex.open(inc.path), slice_questions) == _results(fresh, slice_questions)


def test_missing_and_foreign_indexes(tmp_path, built_index) -> None:
    with pytest.raises(IndexNotFoundError, match="no index directory"):
        EmbeddedIndex.open(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexNotFoundError, match="not an amsrag index"):
        EmbeddedIndex.open(tmp_path / "empty")
    with pytest.raises(InputError, match="already exists"):
        EmbeddedIndex.create(built_index.path)

    copy = tmp_path / "copy"
    shutil.copytree(built_index.path, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["components"]["dense"]["params"]["model_id"] = "some-other-model|max_length=512"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="some-other-model"):
        EmbeddedIndex.open(copy)
    manifest["format_version"] = 999
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="format version 999"):
        EmbeddedIndex.open(copy)


def test_failure_before_commit_loses_nothing(tmp_path, slice_passages, slice_vectors, slice_questions,
                                             monkeypatch) -> None:
    idx = EmbeddedIndex.create(tmp_path / "i")
    idx.add(slice_passages[:40], vectors=slice_vectors[:40])
    before = _results(idx, slice_questions[:3])

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(idx, "_write_component", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        idx.add(slice_passages[40:], vectors=slice_vectors[40:])
    monkeypatch.undo()
    assert len(idx) == 40 and idx.table.count() == 40
    reopened = EmbeddedIndex.open(idx.path)
    assert len(reopened) == 40 and _results(reopened, slice_questions[:3]) == before
    assert sorted(d.name for d in idx.path.iterdir() if d.is_dir()) == sorted(
        c["dir"] for c in reopened.manifest["components"].values())


def test_crash_between_commit_and_manifest_is_repaired(tmp_path, slice_passages, slice_vectors, monkeypatch) -> None:
    idx = EmbeddedIndex.create(tmp_path / "i")
    idx.add(slice_passages[:40], vectors=slice_vectors[:40])
    monkeypatch.setattr(publish_module, "write_json_atomic", lambda *a, **k: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError, match="crash"):
        idx.add(slice_passages[40:50], vectors=slice_vectors[40:50])
    monkeypatch.undo()
    assert idx.table.count() == 50  # committed, but the derived indexes were never published
    repaired = EmbeddedIndex.open(idx.path)  # detects the generation gap and re-indexes the 10 passages
    assert len(repaired) == 50
    target = slice_passages[45]
    hits = retriever_for(repaired, "bm25").search(target.title + " " + target.text[:80], k=3)
    assert hits and hits[0].id == target.id
    np.testing.assert_allclose(repaired.vectors_for_rows([repaired.rows_for_ids([target.id])[target.id]])[0],
                               slice_vectors[45], atol=1e-4)


def _library(vectors: np.ndarray, source: str):
    from amsrag.store.query_library import QueryLibrary

    lib = QueryLibrary.empty()
    lib.add([f"Query {source} {i}?" for i in range(len(vectors))], ["multi_hop"] * len(vectors), vectors, source)
    return lib


def test_a_crash_mid_save_keeps_the_previous_query_library(tmp_path, slice_passages, slice_vectors,
                                                            monkeypatch) -> None:
    idx = EmbeddedIndex.create(tmp_path / "i")
    idx.add(slice_passages[:5], vectors=slice_vectors[:5])
    first = _library(slice_vectors[:3], "first")
    idx.save_query_library(first)
    manifest = (idx.path / "manifest.json").read_text()

    def torn(fh, **arrays):  # half a file written, then the process dies
        fh.write(b"PK\x03\x04 half an npz")
        raise OSError("killed")

    monkeypatch.setattr(np, "savez", torn)
    with pytest.raises(OSError, match="killed"):
        idx.save_query_library(_library(slice_vectors[3:9], "second"))
    monkeypatch.undo()
    assert idx.query_library() == first and EmbeddedIndex.open(idx.path).query_library() == first
    assert not list(idx.path.glob(".query_library*"))  # the temporary file is gone too
    assert (idx.path / "manifest.json").read_text() == manifest and len(idx) == 5

    (idx.path / ".query_library.npz.x.tmp").write_bytes(b"left by a killed process")
    idx.save_query_library(_library(slice_vectors[3:9], "second"))
    assert not list(idx.path.glob(".query_library*")) and len(EmbeddedIndex.open(idx.path).query_library()) == 6

    (idx.path / "query_library.npz").write_bytes(b"not an npz")
    from amsrag.errors import IndexCorruptError

    with pytest.raises(IndexCorruptError, match=r"query_library\.npz: the query library cannot be read"):
        EmbeddedIndex.open(idx.path).query_library()
