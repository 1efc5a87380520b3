"""One conformance suite for every store backend: the same inputs give the same results.

`index_backend` makes empty indexes of each backend (embedded directory, PostgreSQL database);
retriever results are compared with the embedded store's, ties broken by passage id.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from amsrag.errors import IndexMismatchError, InputError
from amsrag.retrieve import Retriever
from amsrag.store import EmbeddedIndex, PassageIndex
from amsrag.types import Hit, Passage

RETRIEVERS = ("bm25", "dense", "graph")
TOL = 1e-4  # BM25: bm25s sums in float32, PostgreSQL in float8


@pytest.fixture(params=["embedded", "postgres"])
def index_backend(request, tmp_path):
    """A factory of new empty indexes of one backend."""
    made: list = []
    server = request.getfixturevalue("pg_server") if request.param == "postgres" else None

    def make(config=None):
        if server is None:
            idx = EmbeddedIndex.create(tmp_path / f"index{len(made)}", config)
        else:
            from amsrag.store.postgres.store import PostgresIndex
            from pg_server import new_database

            idx = PostgresIndex.create(new_database(server), config)
        made.append(idx)
        return idx

    make.backend = request.param
    yield make
    for idx in made:
        idx.close()


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


def _all_results(index, questions, k: int = 10) -> dict:
    out = {}
    for q in questions:
        vec = index.encoder.encode_query(q.question)
        for name in RETRIEVERS:
            out[(q.id, name)] = index.retriever(name).search(q.question, k, vec)
    return out


def _assert_same_results(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert_same_ranking(want[key], got[key], str(key))


def test_postgres_index_satisfies_the_protocol(pg_built_index) -> None:
    assert isinstance(pg_built_index, PassageIndex)
    for name in RETRIEVERS:
        assert isinstance(pg_built_index.retriever(name), Retriever)


def test_retrievers_agree_across_backends(built_index, pg_built_index, slice_questions) -> None:
    want = _all_results(built_index, slice_questions)
    got = _all_results(pg_built_index, slice_questions)
    _assert_same_results(got, want)
    assert sum(len(h) for h in got.values()) > 16 * 3 * 5  # real result lists, not empty ones


def test_seeded_graph_and_batches_agree(built_index, pg_built_index, slice_questions) -> None:
    qs = [q.question for q in slice_questions[:6]]
    for index_pair in ((built_index, pg_built_index),):
        (emb, pg) = index_pair
        for q in qs:
            seeds_e = [emb.retriever(n).search(q, 20) for n in ("bm25", "dense")]
            seeds_p = [pg.retriever(n).search(q, 20) for n in ("bm25", "dense")]
            assert_same_ranking(emb.retriever("graph").search_seeded(q, 20, seeds_e),
                                pg.retriever("graph").search_seeded(q, 20, seeds_p), q)
        for name in RETRIEVERS:
            for a, b in zip(emb.retriever(name).batch_search(qs, 7), pg.retriever(name).batch_search(qs, 7),
                            strict=True):
                assert_same_ranking(a, b, name)


def test_reads_agree_across_backends(built_index, pg_built_index, slice_passages) -> None:
    ids = [p.id for p in slice_passages[::7]] + ["no-such-id"]
    rows_e, rows_p = built_index.rows_for_ids(ids), pg_built_index.rows_for_ids(ids)
    assert list(rows_e) == list(rows_p) == ids[:-1]
    assert len(pg_built_index) == len(built_index) == len(slice_passages)
    order = [rows_p[i] for i in reversed(ids[:-1])]
    assert [pid for pid, _ in pg_built_index.describe_rows(order)] == list(reversed(ids[:-1]))
    got = pg_built_index.passages_by_rows(order)
    want = built_index.passages_by_rows([rows_e[i] for i in reversed(ids[:-1])])
    assert got == want
    np.testing.assert_allclose(pg_built_index.vectors_for_rows(order),
                               built_index.vectors_for_rows([rows_e[i] for i in reversed(ids[:-1])]), atol=1e-6)
    p = slice_passages[3]
    assert pg_built_index.get(p.id) == built_index.get(p.id) and pg_built_index.get("nope") is None
    se, sp_ = built_index.stats(), pg_built_index.stats()
    for key in ("passages", "documents", "embedding_model"):
        assert se[key] == sp_[key]
    assert se["bm25"]["vocabulary"] == sp_["bm25"]["vocabulary"] and se["bm25"]["tokens"] == sp_["bm25"]["tokens"]
    assert se["graph"] == sp_["graph"]


def test_add_dedupe_and_conflicts(index_backend, slice_passages, slice_vectors) -> None:
    idx = index_backend()
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


def test_delete_is_all_or_nothing(index_backend, slice_passages, slice_vectors) -> None:
    idx = index_backend()
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
        hits = idx.retriever(name).search(p.title + " " + p.text[:100], k=10)
        assert p.id not in {h.id for h in hits}


@pytest.mark.slow
def test_incremental_add_and_delete_match_the_embedded_full_build(index_backend, built_index, slice_passages,
                                                                  slice_vectors, slice_questions) -> None:
    half = len(slice_passages) // 2
    inc = index_backend()
    inc.add(slice_passages[:half], vectors=slice_vectors[:half])
    report = inc.add(slice_passages, vectors=slice_vectors)
    assert (report.added, report.skipped_existing) == (len(slice_passages) - half, half)
    _assert_same_results(_all_results(inc, slice_questions[:8]), _all_results(built_index, slice_questions[:8]))

    gone = {p.id for p in slice_passages[10:30]}
    inc.delete(sorted(gone))
    keep = [i for i, p in enumerate(slice_passages) if p.id not in gone]
    fresh = EmbeddedIndex.create(built_index.path.parent.parent / f"fresh-{index_backend.backend}-{id(inc)}")
    fresh.add([slice_passages[i] for i in keep], vectors=slice_vectors[keep])
    _assert_same_results(_all_results(inc, slice_questions), _all_results(fresh, slice_questions))
    fresh.close()


def test_bad_queries(index_backend, slice_passages, slice_vectors) -> None:
    idx = index_backend()
    idx.add(slice_passages[:5], vectors=slice_vectors[:5])
    for name in RETRIEVERS:
        with pytest.raises(InputError, match="query is empty"):
            idx.retriever(name).search(" \n\t", k=5)
        with pytest.raises(InputError, match="k must be a positive integer"):
            idx.retriever(name).search("film", k=0)
    with pytest.raises(InputError, match="unknown retriever"):
        idx.retriever("colbert")
    assert idx.retriever("bm25").search("the of and", k=5) == []  # stop words only: no BM25 terms


def test_another_embedding_model_is_refused(index_backend, slice_passages, slice_vectors) -> None:
    idx = index_backend()
    idx.add(slice_passages[:3], vectors=slice_vectors[:3])
    idx.close()
    if index_backend.backend == "embedded":
        manifest = json.loads((idx.path / "manifest.json").read_text())
        manifest["components"]["dense"]["params"]["model_id"] = "some-other-model|max_length=512"
        (idx.path / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(IndexMismatchError, match="some-other-model"):
            EmbeddedIndex.open(idx.path)
    else:
        import psycopg

        from amsrag.store.postgres.store import PostgresIndex

        with psycopg.connect(idx.dsn, autocommit=True) as conn:
            conn.execute("UPDATE amsrag.meta SET value = jsonb_set(value, '{dense,model_id}', "
                         "'\"some-other-model|max_length=512\"') WHERE key = 'params'")
        with pytest.raises(IndexMismatchError, match="some-other-model"):
            PostgresIndex.open(idx.dsn)
