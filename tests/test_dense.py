"""Dense retrieval: encoder recipe, exact vs HNSW, incremental updates."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from amsrag.config import DenseConfig, EmbeddingConfig
from amsrag.embed import MiniLMEncoder
from amsrag.errors import IndexCorruptError, InputError
from amsrag.indexes.vectors import VectorIndex, mapping_of
from amsrag.retrieve.dense import DenseRetriever
from amsrag.retrievers import retriever_for


class _Lookup:
    def __init__(self, ids):
        self.ids = ids

    def describe_rows(self, rows):
        return [(self.ids[int(r)], "") for r in rows]


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder(EmbeddingConfig())


def test_encoder_is_normalised_and_batch_independent(encoder) -> None:
    texts = ["Paris is the capital of France.", "a", "The band Tinted Windows first performed in Tulsa, Oklahoma."]
    batch = encoder.encode(texts)
    assert batch.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    for i, t in enumerate(texts):  # padding in a batch must not change a text's vector
        np.testing.assert_allclose(encoder.encode_query(t), batch[i], atol=1e-4)
    sims = batch @ encoder.encode_query("What is the capital city of France?")
    assert int(np.argmax(sims)) == 0


def test_dense_retrieves_gold_for_nq_questions(built_index, slice_questions) -> None:
    dense = retriever_for(built_index, "dense")
    nq = [q for q in slice_questions if q.dataset == "nq"]
    found = sum(any(h.id in q.gold_passage_ids for h in dense.search(q.question, k=5)) for q in nq)
    assert found >= 8, f"dense found the gold passage in the top 5 for only {found}/{len(nq)} NQ questions"


def test_query_vector_is_used_and_checked(built_index, slice_questions) -> None:
    dense = retriever_for(built_index, "dense")
    q = slice_questions[0].question
    vec = built_index.encoder.encode_query(q)
    assert [h.id for h in dense.search(q, k=5, query_vector=vec)] == [h.id for h in dense.search(q, k=5)]
    # the vector, not the text, decides: another question's vector gives that question's hits
    other = slice_questions[7].question
    assert [h.id for h in dense.search(q, k=3, query_vector=built_index.encoder.encode_query(other))] == \
        [h.id for h in dense.search(other, k=3)]
    with pytest.raises(InputError, match="query_vector"):
        dense.search(q, k=5, query_vector=np.zeros(10))


def test_hnsw_agrees_with_exact_and_handles_updates(slice_vectors, slice_passages) -> None:
    n = len(slice_passages)
    rows = np.arange(1, n + 1)
    ids = {int(r): p.id for r, p in zip(rows, slice_passages, strict=True)}
    config = DenseConfig(hnsw_min_size=10)
    index = VectorIndex.empty(config, 384).updated(rows[:60], slice_vectors[:60], [])
    assert index.kind == "hnsw"
    index = index.updated(rows[60:], slice_vectors[60:], [int(r) for r in rows[:5]])
    assert index.kind == "hnsw" and len(index.rows) == n - 5
    retriever = DenseRetriever(index, encoder=None, lookup=_Lookup(ids))  # type: ignore[arg-type]
    overlap = []
    for v in slice_vectors[::7]:
        approx = [h.row for h in retriever.search("q", k=10, query_vector=v)]
        exact = [h.row for h in retriever.search("q", k=10, query_vector=v, exact=True)]
        assert not set(approx) & set(rows[:5].tolist()), "deleted rows must not be returned"
        overlap.append(len(set(approx) & set(exact)) / 10)
    assert np.mean(overlap) >= 0.95


def test_vector_index_round_trip(tmp_path, slice_vectors) -> None:
    for min_size in (0, 10_000):
        config = DenseConfig(hnsw_min_size=min_size)
        rows = np.arange(1, len(slice_vectors) + 1)
        index = VectorIndex.empty(config, 384).updated(rows, slice_vectors, [])
        d = tmp_path / f"v{min_size}"
        d.mkdir()
        index.save(d)
        loaded = VectorIndex.load(d, config, 384)
        assert loaded.kind == index.kind
        np.testing.assert_array_equal(loaded.rows, index.rows)
        np.testing.assert_array_equal(loaded.vectors_for_rows([3, 1]), index.vectors_for_rows([3, 1]))


def test_small_changes_keep_the_hnsw_base_and_search_the_delta(tmp_path, slice_vectors, slice_passages,
                                                               monkeypatch) -> None:
    """Adds below the delta limit leave the HNSW base untouched (its files hard-linked into the next
    generation) and are found by exact search beside it; past the limit they are inserted into the
    graph and a new base is written. Results match exact search throughout, deleted rows never return."""
    from amsrag.indexes import vectors as dense

    monkeypatch.setattr(dense, "_delta_limit", lambda base: 15)
    n = len(slice_passages)
    rows = np.arange(1, n + 1)
    ids = {int(r): p.id for r, p in zip(rows, slice_passages, strict=True)}
    config = DenseConfig(hnsw_min_size=10)
    index = VectorIndex.empty(config, 384).updated(rows[:50], slice_vectors[:50], [])
    first = tmp_path / "g1"
    first.mkdir()
    index.save(first)
    base = index.base_name
    index = VectorIndex.load(first, config, 384).updated(rows[50:60], slice_vectors[50:60], [2])
    index = index.updated([], np.zeros((0, 384), np.float32), [55])  # from the delta
    second = tmp_path / "g2"
    second.mkdir()
    index.save(second, previous=first)
    assert index.base_name == base and (second / f"{base}.hnsw.bin").stat().st_nlink == 2
    loaded = VectorIndex.load(second, config, 384)
    assert len(loaded.delta_rows) == 9 and loaded.dead.tolist() == [2]
    np.testing.assert_array_equal(loaded.rows, [r for r in rows[:60] if r not in (2, 55)])
    grown = loaded.updated(rows[60:], slice_vectors[60:], [])
    assert grown.base_name is None and not len(grown.delta_rows)  # past the limit: a new base
    for index in (loaded, grown):
        retriever = DenseRetriever(index, encoder=None, lookup=_Lookup(ids))  # type: ignore[arg-type]
        for v in slice_vectors[::9]:
            approx = [h.row for h in retriever.search("q", k=5, query_vector=v)]
            exact = [h.row for h in retriever.search("q", k=5, query_vector=v, exact=True)]
            assert 2 not in approx and 55 not in approx
            assert len(set(approx) & set(exact)) >= 4
    np.testing.assert_allclose(grown.vectors_for_rows([61, 3]), slice_vectors[[60, 2]], rtol=1e-6)
    third = tmp_path / "g3"
    third.mkdir()
    grown.save(third, previous=second)
    grown.map_base(third)  # the rebuilt base now read from its file
    assert isinstance(mapping_of(grown.base_vectors), mmap.mmap)
    np.testing.assert_allclose(grown.vectors_for_rows([61, 3]), slice_vectors[[60, 2]], rtol=1e-6)


def test_a_mapped_base_reads_as_np_load_and_its_released_pages_read_again(tmp_path, monkeypatch) -> None:
    """`map_npy` gives the array `np.load` gives; a large gather releases the pages it has copied
    (block by block) and the values read afterwards are still the file's."""
    import amsrag.indexes.vectors as dense

    rng = np.random.default_rng(3)
    data = rng.standard_normal((5000, 384)).astype(np.float32)
    np.save(tmp_path / "v.npy", data)
    mapped = dense.map_npy(tmp_path / "v.npy")
    np.testing.assert_array_equal(mapped, np.load(tmp_path / "v.npy"))
    assert not mapped.flags.writeable
    np.save(tmp_path / "empty.npy", np.zeros((0, 384), np.float32))
    assert dense.map_npy(tmp_path / "empty.npy").shape == (0, 384)
    (tmp_path / "short.npy").write_bytes((tmp_path / "v.npy").read_bytes()[:4096])
    with pytest.raises(IndexCorruptError, match="shorter"):
        dense.map_npy(tmp_path / "short.npy")
    released: list[tuple[int, int]] = []
    real = dense.release_pages
    monkeypatch.setattr(dense, "_RELEASE_ROWS", 700)
    monkeypatch.setattr(dense, "release_pages", lambda a, lo, hi: (released.append((lo, hi)), real(a, lo, hi)))
    config = DenseConfig(hnsw_min_size=10**9)
    rows = np.arange(0, 10000, 2, dtype=np.int64)
    index = VectorIndex(config, 384, rows, mapped)
    want = rows[rows != 4]
    np.testing.assert_array_equal(index.vectors_for_rows(want), data[rows != 4])
    assert released[0] == (0, 700) and len(released) == 8  # 4,999 rows in blocks of 700, file order
    np.testing.assert_array_equal(mapped[:10], data[:10])  # released pages read back from the file


def test_a_graph_this_hnswlib_cannot_read_is_rebuilt_from_the_stored_vectors(tmp_path, slice_vectors, slice_passages,
                                                                              caplog) -> None:
    """A base graph file hnswlib refuses (one written by another build of it: hnswlib's and chroma-hnswlib's files
    differ) is rebuilt from the base's stored vectors with the same settings: the same hits as the saved graph, the
    deleted rows still deleted, and the next save writes the base afresh, readable again."""
    n = len(slice_passages)
    rows = np.arange(1, n + 1)
    ids = {int(r): p.id for r, p in zip(rows, slice_passages, strict=True)}
    config = DenseConfig(hnsw_min_size=10)
    index = VectorIndex.empty(config, 384).updated(rows, slice_vectors, [])
    first = tmp_path / "g1"
    first.mkdir()
    index.save(first)
    saved = VectorIndex.load(first, config, 384).updated([], np.zeros((0, 384), np.float32), [4])
    (tmp_path / "g2").mkdir()
    saved.save(tmp_path / "g2", previous=first)
    graph = tmp_path / "g2" / f"{index.base_name}.hnsw.bin"
    graph.unlink()  # the hard link to g1's graph: write another file in its place
    graph.write_bytes(b"\0" * 64)
    with caplog.at_level("WARNING", logger="amsrag.indexes.vectors"):
        rebuilt = VectorIndex.load(tmp_path / "g2", config, 384)
    assert rebuilt.kind == "hnsw" and "rebuilt from the" in caplog.text and rebuilt.base_name is None
    reference = VectorIndex.load(tmp_path / "g1", config, 384).updated([], np.zeros((0, 384), np.float32), [4])
    ra = DenseRetriever(rebuilt, encoder=None, lookup=_Lookup(ids))  # type: ignore[arg-type]
    rb = DenseRetriever(reference, encoder=None, lookup=_Lookup(ids))  # type: ignore[arg-type]
    for v in slice_vectors[::7]:
        hits = [h.row for h in ra.search("q", k=5, query_vector=v)]
        assert 4 not in hits
        assert hits == [h.row for h in rb.search("q", k=5, query_vector=v)]
    third = tmp_path / "g3"
    third.mkdir()
    rebuilt.save(third, previous=tmp_path / "g2")
    assert (third / f"{rebuilt.base_name}.hnsw.bin").stat().st_nlink == 1  # written, not linked to the bad file
    assert VectorIndex.load(third, config, 384).kind == "hnsw"
