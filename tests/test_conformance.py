"""One conformance suite for every store backend: the same inputs give the same results.

The backend-independent tests are `amsrag.testing.store.StoreConformance` (its capability suites: read, write,
health, tables, themes, query library), run here once for the embedded store and once for PostgreSQL; the tests
below compare the two backends directly (retriever results against the embedded store's, ties broken by passage
id).
"""

from __future__ import annotations

import json

import numpy as np

from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.testing.store import StoreConformance, assert_same_ranking
from amsrag.testing.store import all_results as _all_results
from amsrag.testing.store import assert_same_results as _assert_same_results

RETRIEVERS = ("bm25", "dense", "graph")


class TestEmbeddedConformance(StoreConformance):
    backend = "embedded"

    def create_index(self, request, directory, config):
        return EmbeddedIndex.create(directory, config)

    def tamper_model_id(self, index, model_id):
        manifest = json.loads((index.path / "manifest.json").read_text())
        manifest["components"]["dense"]["params"]["model_id"] = model_id
        (index.path / "manifest.json").write_text(json.dumps(manifest))

    def reopen(self, index):
        return EmbeddedIndex.open(index.path)

    def drop_graph_params(self, index, keys):
        manifest = json.loads((index.path / "manifest.json").read_text())
        for key in keys:
            manifest["components"]["graph"]["params"].pop(key, None)
        (index.path / "manifest.json").write_text(json.dumps(manifest))


class TestPostgresConformance(StoreConformance):
    backend = "postgres"

    def create_index(self, request, directory, config):
        from amsrag.store.postgres.store import PostgresIndex
        from pg_server import new_database

        return PostgresIndex.create(new_database(request.getfixturevalue("pg_server")), config)

    def tamper_model_id(self, index, model_id):
        import psycopg

        with psycopg.connect(index.dsn, autocommit=True) as conn:
            conn.execute("UPDATE amsrag.meta SET value = jsonb_set(value, '{dense,model_id}', %s::jsonb) "
                         "WHERE key = 'params'", (json.dumps(model_id),))

    def reopen(self, index):
        from amsrag.store.postgres.store import PostgresIndex

        return PostgresIndex.open(index.dsn)

    def drop_graph_params(self, index, keys):
        import psycopg

        with psycopg.connect(index.dsn, autocommit=True) as conn:
            conn.execute("UPDATE amsrag.meta SET value = jsonb_set(value, '{graph}', (value->'graph') - %s::text[]) "
                         "WHERE key = 'params'", (list(keys),))


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
            seeds_e = [retriever_for(emb, n).search(q, 20) for n in ("bm25", "dense")]
            seeds_p = [retriever_for(pg, n).search(q, 20) for n in ("bm25", "dense")]
            assert_same_ranking(retriever_for(emb, "graph").search_seeded(q, 20, seeds_e),
                                retriever_for(pg, "graph").search_seeded(q, 20, seeds_p), q)
        for name in RETRIEVERS:
            for a, b in zip(retriever_for(emb, name).batch_search(qs, 7), retriever_for(pg, name).batch_search(qs, 7),
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


def test_learned_fuser_signals_and_bridges_agree_across_backends(built_index, pg_built_index, slice_questions,
                                                                  slice_passages) -> None:
    """What the learned fuser and the second hop read from an index: the same on both backends."""
    from amsrag.pipeline.signals import IndexSignals

    emb, pg = IndexSignals(built_index), IndexSignals(pg_built_index)
    ids = [p.id for p in slice_passages[::5]]
    rows_e, rows_p = built_index.rows_for_ids(ids), pg_built_index.rows_for_ids(ids)
    ge, gp = emb.graph, pg.graph
    for q in (q.question for q in slice_questions[:8]):
        re_, rp = [rows_e[i] for i in ids], [rows_p[i] for i in ids]
        np.testing.assert_allclose(emb.bm25_scores(q, re_), pg.bm25_scores(q, rp), rtol=1e-4, atol=1e-5)
        share_e, n_e = emb.entity_share(q, re_)
        share_p, n_p = pg.entity_share(q, rp)
        assert n_e == n_p and np.allclose(share_e, share_p), q
        assert sorted(ge.entity_key_of(e) for e in ge.query_entities(q)) == sorted(
            gp.entity_key_of(e) for e in gp.query_entities(q))
        hits_e = retriever_for(built_index, "dense").search(q, 5)
        hits_p = retriever_for(pg_built_index, "dense").search(q, 5)
        bridges_e = [(ge.entity_key_of(e), built_index.describe_rows([r])[0][0])
                     for e, r in ge.bridge_entities([h.row for h in hits_e], ge.query_entities(q), 9)]
        bridges_p = [(gp.entity_key_of(e), pg_built_index.describe_rows([r])[0][0])
                     for e, r in gp.bridge_entities([h.row for h in hits_p], gp.query_entities(q), 9)]
        assert bridges_e == bridges_p, q
        for (key, _), (e_e, _), (e_p, _) in zip(bridges_e, ge.bridge_entities([h.row for h in hits_e], [], 9),
                                                gp.bridge_entities([h.row for h in hits_p], [], 9), strict=False):
            assert [pid for pid, _ in built_index.describe_rows(ge.title_rows(e_e))] == [
                pid for pid, _ in pg_built_index.describe_rows(gp.title_rows(e_p))], key


def test_full_runs_the_second_hop_on_postgres(pg_built_index, slice_questions) -> None:
    from amsrag.pipeline import Engine

    engine = Engine(pg_built_index)
    expanded = 0
    for q in [q for q in slice_questions if q.complexity == "multi_hop"][:4]:
        result = engine.retrieve(q.question, system="learned", k=5)
        trace = result.trace.to_dict()
        assert result.passages and trace["fusion"]["method"] == "learned"
        expanded += bool((trace.get("second_hop") or {}).get("rounds"))
    assert expanded >= 1
