"""PostgreSQL backend specifics: schema versions, transactions, shared databases, faults, HNSW."""

from __future__ import annotations

import time
from dataclasses import replace

import psycopg
import pytest

from amsrag.config import AmsragConfig
from amsrag.errors import IndexCorruptError, IndexMismatchError, IndexNotFoundError, InputError
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.store.open import create_index, open_index
from amsrag.types import Passage


@pytest.fixture()
def pg(pg_url):
    from amsrag.store.postgres.store import PostgresIndex

    idx = PostgresIndex.create(pg_url)
    yield idx
    idx.close()


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM amsrag.{table}").fetchone()[0]


def test_schema_version_and_opening_errors(pg_url, pg_server) -> None:
    from amsrag.store.postgres import schema
    from amsrag.store.postgres.connection import StoreUnavailableError
    from amsrag.store.postgres.store import PostgresIndex
    from pg_server import new_database

    with pytest.raises(IndexNotFoundError, match="no amsrag index"):
        open_index(pg_url)
    idx = create_index(pg_url)
    assert isinstance(idx, PostgresIndex) and idx.stats()["schema_version"] == schema.CURRENT_VERSION
    idx.close()
    with pytest.raises(InputError, match="already exists"):
        PostgresIndex.create(pg_url)
    other = new_database(pg_server)
    PostgresIndex.create(other).close()
    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("INSERT INTO amsrag.schema_version (version, amsrag_version) VALUES (99, 'future')")
    with pytest.raises(IndexMismatchError, match="schema version 99"):
        PostgresIndex.open(other)
    with pytest.raises(InputError, match="lucene"):
        PostgresIndex.create(new_database(pg_server), AmsragConfig.model_validate({"bm25": {"method": "bm25+"}}))

    from amsrag.store.postgres.server import free_port

    t = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="cannot connect to PostgreSQL"):
        PostgresIndex.open(f"postgresql://postgres:secret@127.0.0.1:{free_port()}/nowhere")
    assert time.monotonic() - t < 10


def test_open_index_dispatches_on_the_spec(built_index, pg_built_index) -> None:
    from amsrag.store.postgres.store import PostgresIndex

    with open_index(str(built_index.path)) as a:
        assert isinstance(a, EmbeddedIndex)
    with open_index(pg_built_index.dsn) as b:
        assert isinstance(b, PostgresIndex) and len(b) == len(built_index)


def test_failed_ingest_leaves_nothing_behind(pg, slice_passages, slice_vectors, monkeypatch) -> None:
    pg.add(slice_passages[:20], vectors=slice_vectors[:20])
    before = {t: _count(pg.dsn, t) for t in ("passages", "bm25_terms", "bm25_postings", "graph_ner",
                                             "entities", "mentions")}
    hits = [h.id for h in retriever_for(pg, "bm25").search("American film director", k=5)]

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(type(pg), "_rewrite_graph", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        pg.add(slice_passages[20:], vectors=slice_vectors[20:])
    monkeypatch.undo()
    assert len(pg) == 20 and pg.get(slice_passages[30].id) is None
    assert {t: _count(pg.dsn, t) for t in before} == before
    assert [h.id for h in retriever_for(pg, "bm25").search("American film director", k=5)] == hits


def test_two_processes_share_one_database(pg, slice_passages, slice_vectors) -> None:
    from amsrag.store.postgres.store import PostgresIndex

    other = PostgresIndex.open(pg.dsn)
    try:
        target = slice_passages[7]
        pg.add(slice_passages[:10], vectors=slice_vectors[:10])
        assert len(other) == 10
        assert retriever_for(other, "bm25").search(target.title, k=1)[0].id == target.id
        other.delete([target.id])
        assert pg.get(target.id) is None and len(pg) == 9
        assert target.id not in {h.id for h in retriever_for(pg, "dense").search(target.text[:200], k=9)}
    finally:
        other.close()


def test_hnsw_index_serves_dense_queries(pg_url, built_index, slice_passages, slice_vectors, slice_questions) -> None:
    from amsrag.store.postgres.store import PostgresIndex

    config = AmsragConfig.model_validate({"dense": {"hnsw_min_size": 0}})
    idx = PostgresIndex.create(pg_url, config)
    try:
        idx.add(slice_passages, vectors=slice_vectors)
        qvec = slice_vectors[0]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SET enable_seqscan = off")  # 90 rows: make the planner show it would use the index
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN SELECT prow FROM amsrag.passages ORDER BY embedding <=> %s::vector LIMIT 10",
                (str(qvec.tolist()),)).fetchall())
        assert "passages_embedding_hnsw" in plan
        from pgvector.psycopg import register_vector

        from amsrag.retrievers.postgres import DENSE_SQL

        def branches(exact: bool, min_size: int) -> list[str]:
            """The retriever's statement, run: which of its two branches executed (HNSW, exact scan)."""
            with psycopg.connect(pg_url, autocommit=True) as conn:
                register_vector(conn)
                conn.execute("SET search_path = amsrag, public")
                conn.execute("SET enable_seqscan = off")
                lines = [r[0] for r in conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + DENSE_SQL.format(want=10),
                                                    {"q": qvec, "exact": exact, "min_size": min_size}).fetchall()]
            hnsw = [line for line in lines if "Index Scan using passages_embedding_hnsw" in line]
            seq = [line for line in lines if "Seq Scan on passages" in line]
            assert len(hnsw) + len(seq) >= 1, lines  # a branch whose gate is false for any n: planned away
            return ["hnsw" if any("never executed" not in line for line in hnsw) else "",
                    "exact" if any("never executed" not in line for line in seq) else ""]

        assert branches(exact=False, min_size=0) == ["hnsw", ""]
        assert branches(exact=False, min_size=1000) == ["", "exact"]  # fewer passages than hnsw_min_size
        assert branches(exact=True, min_size=0) == ["", "exact"]
        for q in slice_questions[:8]:
            v = built_index.encoder.encode_query(q.question)
            got = [h.id for h in retriever_for(idx, "dense").search(q.question, 5, v)]
            assert got == [h.id for h in retriever_for(built_index, "dense").search(q.question, 5, v)]
    finally:
        idx.close()


@pytest.mark.slow
def test_server_down_and_dropped_connections(slice_passages, slice_vectors) -> None:
    """A dropped connection is retried transparently; a stopped server gives a clear error within the
    request timeout, never a hang; after a restart the same index object works again."""
    from amsrag.store.postgres.connection import StoreUnavailableError
    from amsrag.store.postgres.server import LocalPostgres, LocalPostgresError
    from amsrag.store.postgres.store import PostgresIndex

    server = LocalPostgres(name="amsrag-pg-fault-")
    try:
        server.start()
    except LocalPostgresError as exc:
        pytest.skip(f"no second local PostgreSQL: {exc}")
    try:
        PostgresIndex.create(server.dsn).close()
        idx = PostgresIndex.open(server.dsn, request_timeout=4.0)
        idx.add(slice_passages[:10], vectors=slice_vectors[:10])
        want = [h.id for h in retriever_for(idx, "bm25").search("film", k=3)]
        with psycopg.connect(server.dsn, autocommit=True) as admin:  # drop every pooled connection
            n = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE pid <> pg_backend_pid() AND datname = current_database()").fetchone()[0]
        assert n >= 1
        assert [h.id for h in retriever_for(idx, "bm25").search("film", k=3)] == want
        server.pg_ctl("stop")
        t = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="unavailable"):
            retriever_for(idx, "bm25").search("film", k=3)
        assert time.monotonic() - t < 4.0 + 2.0
        with pytest.raises(StoreUnavailableError):
            idx.add([Passage(id="x", text="written while down")])
        server.pg_ctl("start")
        assert [h.id for h in retriever_for(idx, "bm25").search("film", k=3)] == want
        assert idx.get("x") is None
        idx.close()
    finally:
        server.stop()


@pytest.mark.slow
def test_reads_from_a_streaming_replica(pg_server, slice_passages, slice_vectors) -> None:
    """Writes go to the primary, reads to a hot-standby replica, which serves them once it has replayed."""
    from amsrag.store.postgres.server import LocalPostgres
    from amsrag.store.postgres.store import PostgresIndex
    from pg_server import new_database

    url = new_database(pg_server)
    PostgresIndex.create(url).close()
    replica = LocalPostgres(name="amsrag-pg-replica-")
    replica.start_replica_of(pg_server)
    try:
        replica_url = replica.dsn.rsplit("/", 1)[0] + "/" + url.rsplit("/", 1)[1]
        idx = PostgresIndex.open(url, read_dsn=replica_url)
        idx.add(slice_passages[:12], vectors=slice_vectors[:12])
        deadline = time.monotonic() + 30
        while len(idx) < 12 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(idx) == 12
        target = slice_passages[5]
        assert retriever_for(idx, "bm25").search(target.title, k=1)[0].id == target.id
        with psycopg.connect(replica_url) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
            served = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                  "AND application_name <> 'psql' AND pid <> pg_backend_pid()").fetchone()[0]
        assert served >= 1  # the index's read pool is connected to the replica

        def scans(u: str) -> int:  # index scans of the retrieval tables on one server (its own statistics)
            with psycopg.connect(u) as conn:
                return int(conn.execute(
                    "SELECT coalesce(sum(idx_scan), 0) + coalesce(sum(seq_scan), 0) FROM pg_stat_user_tables "
                    "WHERE schemaname = 'amsrag' AND relname IN ('bm25_postings', 'bm25_terms', 'passages', "
                    "'mentions', 'entities', 'entity_surfaces', 'graph_ner')").fetchone()[0])

        time.sleep(1.5)  # backends flush their statistics within a second of going idle
        on_primary, on_replica = scans(url), scans(replica_url)
        vec = slice_vectors[5]
        for name in ("bm25", "dense", "graph"):
            assert retriever_for(idx, name).search(target.title, k=3, query_vector=vec)[0].id == target.id, name
        time.sleep(1.5)
        assert scans(url) == on_primary  # retrieval never read the primary
        assert scans(replica_url) > on_replica  # it read the replica
        # what a writer must see at once is read where it wrote (the replica is read-only, maybe behind)
        hashes = [p.content_hash for p in slice_passages[12:14]]
        idx.stage_vectors(hashes, slice_vectors[12:14])
        assert idx.count_staged(hashes) == 2 and idx.unembedded(hashes) == []
        from amsrag.store.documents import Document

        idx.put_documents([Document.of("doc", slice_passages[12:14], "fp", "src/doc")])
        assert idx.documents("src/")["doc"].content_hash == "fp" and idx.check().ok
        idx.close()
    finally:
        replica.stop()


def _library(vectors, source: str):
    from amsrag.store.query_library import QueryLibrary

    lib = QueryLibrary.empty()
    lib.add([f"Query {source} {i}?" for i in range(len(vectors))], ["one_hop"] * len(vectors), vectors, source)
    return lib


def test_query_library_saves_are_one_transaction(pg, slice_passages, slice_vectors, monkeypatch) -> None:
    from amsrag.store.postgres import attached as pg_store

    pg.add(slice_passages[:5], vectors=slice_vectors[:5])
    first = _library(slice_vectors[:4], "first")
    pg.save_query_library(first)
    before = {t: _count(pg.dsn, t) for t in ("passages", "bm25_postings", "mentions")}

    def boom(*args, **kwargs):  # the last statement of the save: rows already deleted and inserted
        raise RuntimeError("connection lost")

    monkeypatch.setattr(pg_store, "_scalar", boom)
    with pytest.raises(RuntimeError, match="connection lost"):
        pg.save_query_library(_library(slice_vectors[4:10], "second"))
    monkeypatch.undo()
    assert _count(pg.dsn, "query_library") == 4 and pg.query_library() == first
    with psycopg.connect(pg.dsn) as conn:
        assert [r[0] for r in conn.execute("SELECT source FROM amsrag.query_library ORDER BY pos")] == ["first"] * 4
    assert {t: _count(pg.dsn, t) for t in before} == before


def _back_to_v5(conn) -> None:
    """Undo schema version 6 (the documents' title, modification time, size and tags), as amsrag made v5
    databases."""
    conn.execute("ALTER TABLE amsrag.documents DROP COLUMN title, DROP COLUMN modified, DROP COLUMN size, "
                 "DROP COLUMN tags")  # their indexes go with them
    conn.execute("DELETE FROM amsrag.meta WHERE key = 'documents_generation'")
    conn.execute("DELETE FROM amsrag.schema_version WHERE version > 5")


def _back_to_v4(conn) -> None:
    """Undo schema versions 6 and 5 (the in-process BM25 index's pieces), as amsrag made v4 databases."""
    _back_to_v5(conn)
    conn.execute("DROP TABLE amsrag.bm25_blobs")
    conn.execute("DELETE FROM amsrag.meta WHERE key = 'bm25_generation'")
    conn.execute("DELETE FROM amsrag.schema_version WHERE version > 4")


def _back_to_v3(conn) -> None:
    """Undo schema versions 5 and 4 (posting impacts, their index, bm25_top), as amsrag made v3 databases."""
    _back_to_v4(conn)
    conn.execute("DROP FUNCTION amsrag.bm25_top")
    conn.execute("ALTER TABLE amsrag.bm25_postings DROP COLUMN imp")  # its index goes with it
    conn.execute("DELETE FROM amsrag.meta WHERE key = 'bm25_impact'")
    conn.execute("DELETE FROM amsrag.schema_version WHERE version > 3")


def test_an_index_from_before_the_query_library_gets_its_table_on_open(pg, slice_vectors) -> None:
    from amsrag.store.postgres import schema
    from amsrag.store.postgres.store import PostgresIndex

    with psycopg.connect(pg.dsn, autocommit=True) as conn:  # back to schema version 1
        _back_to_v3(conn)
        conn.execute("DROP TABLE amsrag.documents, amsrag.staged_vectors")
        conn.execute("DROP TABLE amsrag.query_library")
        conn.execute("DELETE FROM amsrag.meta WHERE key = 'query_library_generation'")
        conn.execute("DELETE FROM amsrag.schema_version WHERE version > 1")
    with PostgresIndex.open(pg.dsn) as old:
        assert old.stats()["schema_version"] == schema.CURRENT_VERSION == 6
        assert len(old.query_library()) == 0
        old.save_query_library(_library(slice_vectors[:2], "after-upgrade"))
    assert len(pg.query_library()) == 2


# ---------------------------------------------------------------- documents, staged vectors, check, repair
def test_an_index_at_schema_v2_is_migrated_on_open_and_keeps_its_passages(pg, slice_passages,
                                                                           slice_vectors) -> None:
    from amsrag.store.documents import Document
    from amsrag.store.postgres import schema
    from amsrag.store.postgres.store import PostgresIndex

    pg.add(slice_passages[:12], vectors=slice_vectors[:12])
    hits = [h.id for h in retriever_for(pg, "bm25").search("American film director", k=5)]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:  # back to schema version 2, as amsrag made it before
        _back_to_v3(conn)
        conn.execute("DROP TABLE amsrag.documents, amsrag.staged_vectors")
        conn.execute("DELETE FROM amsrag.schema_version WHERE version > 2")
    with PostgresIndex.open(pg.dsn) as idx:
        assert idx.stats()["schema_version"] == schema.CURRENT_VERSION == 6
        stored = idx.get(slice_passages[3].id)
        assert len(idx) == 12 and stored is not None
        assert stored == replace(slice_passages[3], metadata={**slice_passages[3].metadata, "lang": "en"})
        assert [h.id for h in retriever_for(idx, "bm25").search("American film director", k=5)] == hits
        docs = idx.documents()  # every passage is a document of its own, its fingerprint unknown
        assert len(docs) == 12 and all(d.content_hash == "" and d.passages == 1 for d in docs.values())
        assert idx.check().ok
        hashes = [p.content_hash for p in slice_passages[12:14]]
        assert idx.unembedded(hashes) == hashes
        idx.stage_vectors(hashes, slice_vectors[12:14])
        r = idx.put_documents([Document.of("new", slice_passages[12:14], "fp", "src/new")])
        assert (r.created, r.added, r.embedded) == (1, 2, 0) and len(idx) == 14
        assert list(idx.documents("src/")) == ["new"] and idx.documents("src/")["new"].content_hash == "fp"
    with psycopg.connect(pg.dsn) as conn:
        versions = conn.execute("SELECT version FROM amsrag.schema_version ORDER BY version").fetchall()
        assert [r[0] for r in versions] == [1, 2, 3, 4, 5, 6]


def test_an_index_at_schema_v3_gets_posting_impacts_on_open(pg, slice_passages, slice_vectors,
                                                             slice_questions) -> None:
    from amsrag.store.postgres import schema
    from amsrag.store.postgres.store import PostgresIndex

    pg.add(slice_passages[:60], vectors=slice_vectors[:60])
    queries = [q.question for q in slice_questions[:10]] + ["the film", "American American director"]
    before = [[(h.id, h.score) for h in retriever_for(pg, "bm25").search(q, k=10, exhaustive=True)] for q in queries]
    counts = {t: _count(pg.dsn, t) for t in ("passages", "bm25_terms", "bm25_postings", "mentions", "entities")}
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        _back_to_v3(conn)
        with pytest.raises(psycopg.errors.UndefinedFunction):
            conn.execute("SELECT * FROM amsrag.bm25_top('{film}', '{1}', 1.5, 0.75, 3)")
    with PostgresIndex.open(pg.dsn) as idx:
        assert idx.stats()["schema_version"] == schema.CURRENT_VERSION == 6
        assert {t: _count(pg.dsn, t) for t in counts} == counts  # nothing lost
        r = retriever_for(idx, "bm25")
        for q, want in zip(queries, before, strict=True):
            for depth in (1, None):
                got = [(h.id, h.score) for h in r.search(q, k=10, depth=depth, exhaustive=False)]
                assert [i for i, _ in got] == [i for i, _ in want]
                assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
        assert idx.check().ok
        idx.add(slice_passages[60:], vectors=slice_vectors[60:])  # new postings at the migrated reference
        assert [h.id for h in r.search("the film director", k=10, exhaustive=False)] == \
            [h.id for h in r.search("the film director", k=10, exhaustive=True)]
    with psycopg.connect(pg.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM amsrag.bm25_postings WHERE imp IS NULL").fetchone()[0] == 0
        assert conn.execute("SELECT value->>'ref' FROM amsrag.meta WHERE key = 'bm25_impact'").fetchone()[0]


def test_fingerprints_are_recorded_and_forgotten(pg, slice_passages, slice_vectors) -> None:
    from amsrag.store.documents import Document

    a = [Passage(f"a#{i}", p.text, p.title, "a") for i, p in enumerate(slice_passages[:3])]
    b = [Passage(f"b#{i}", p.text, p.title, "b") for i, p in enumerate(slice_passages[3:5])]
    r = pg.add([*a, *b], vectors=slice_vectors[:5], doc_hashes={"a": ("fa", "kb/a.md")})
    assert (r.added, r.embedded) == (5, 0)
    docs = pg.documents()
    assert {d: (i.passages, i.content_hash, i.source) for d, i in docs.items()} == {
        "a": (3, "fa", "kb/a.md"), "b": (2, "", "")}
    assert list(pg.documents("kb/")) == ["a"] and list(pg.documents("b")) == ["b"]  # source or doc_id prefix
    generation = pg.stats()["generation"]
    assert pg.add(b, doc_hashes={"b": ("fb", "kb/b.md")}).added == 0  # nothing new: fingerprint only
    assert pg.documents()["b"].content_hash == "fb" and pg.stats()["generation"] == generation
    pg.delete(["a#1"])  # changed passage by passage: the fingerprint no longer describes it (the row, its
    assert pg.documents()["a"] == pg.documents()["a"].__class__("a", 2, "", "kb/a.md")  # source and tags, stays)
    pg.add([Passage("b#9", slice_passages[9].text, "B", "b")], vectors=slice_vectors[9:10])
    assert pg.documents()["b"].content_hash == ""
    r = pg.put_documents([Document.of("a", a, "fa2", "kb/a.md")])
    assert (r.added, r.kept, r.embedded, r.reused_vectors) == (1, 2, 1, 0)
    assert pg.documents()["a"].content_hash == "fa2"
    assert pg.delete_documents(["a", "b"]).documents == 2 and pg.documents() == {} and len(pg) == 0
    assert _count(pg.dsn, "documents") == 0 and pg.check().ok


def test_a_failed_put_changes_nothing(pg, slice_passages, slice_vectors, monkeypatch) -> None:
    from amsrag.store.documents import Document

    doc = Document.of("d", [Passage(f"d#{i}", p.text, p.title) for i, p in enumerate(slice_passages[:4])], "f1")
    pg.put_documents([doc])
    tables = ("passages", "bm25_terms", "bm25_postings", "graph_ner", "entities", "mentions", "documents",
              "staged_vectors")
    new = [p.content_hash for p in slice_passages[4:6]]
    pg.stage_vectors(new, slice_vectors[4:6])
    before = {t: _count(pg.dsn, t) for t in tables}
    changed = Document.of("d", [Passage(f"d#{i}", p.text, p.title) for i, p in enumerate(slice_passages[4:6])], "f2")

    def boom(*args, **kwargs):
        raise RuntimeError("connection lost")

    monkeypatch.setattr(type(pg), "_rewrite_graph", boom)
    with pytest.raises(RuntimeError, match="connection lost"):
        pg.put_documents([changed], delete=[])
    with pytest.raises(RuntimeError, match="connection lost"):
        pg.delete_documents(["d"])
    monkeypatch.undo()
    assert {t: _count(pg.dsn, t) for t in tables} == before
    assert pg.documents()["d"].content_hash == "f1" and pg.count_staged(new) == 2
    r = pg.put_documents([changed])
    assert (r.removed, r.added, r.embedded) == (4, 2, 0)  # the staged vectors, then dropped as stored
    assert _count(pg.dsn, "staged_vectors") == 0 and pg.count_staged(new) == 0 and pg.unembedded(new) == []


def test_staging_does_not_wait_for_the_write_lock(pg, slice_passages, slice_vectors) -> None:
    from amsrag.store.postgres import schema

    pg.add(slice_passages[:3], vectors=slice_vectors[:3])
    generation = pg.stats()["generation"]
    hashes = [p.content_hash for p in slice_passages[3:8]]
    with psycopg.connect(pg.dsn, autocommit=True) as writer:
        writer.execute("SELECT pg_advisory_lock(%s)", (schema.WRITE_LOCK_KEY,))  # a long write elsewhere
        t = time.monotonic()
        pg.stage_vectors(hashes, slice_vectors[3:8])
        pg.stage_vectors(hashes[:2], slice_vectors[3:5])  # again: replaced, not duplicated
        pg.stage_vectors([slice_passages[0].content_hash], slice_vectors[:1])  # stored content: not staged
        assert time.monotonic() - t < 5
        writer.execute("SELECT pg_advisory_unlock(%s)", (schema.WRITE_LOCK_KEY,))
    assert pg.count_staged(hashes) == 5 and pg.stats()["staged_vectors"] == 5
    assert pg.stats()["generation"] == generation and len(pg) == 3
    assert pg.unembedded([*hashes, "f" * 64, hashes[0]]) == ["f" * 64]
    with pytest.raises(InputError, match="finite"):
        pg.stage_vectors(hashes[:1], slice_vectors[:1] * float("nan"))


def _search_all(idx, questions) -> dict:
    return {(q.id, name): [h.id for h in retriever_for(idx, name).search(q.question, k=8)]
            for q in questions for name in ("bm25", "dense", "graph")}


def test_check_finds_damage_and_repair_rebuilds_it(pg, slice_passages, slice_vectors, slice_questions) -> None:
    import numpy as np
    from pgvector.psycopg import register_vector

    pg.add(slice_passages[:40], vectors=slice_vectors[:40])
    healthy = pg.check()
    assert healthy.ok and healthy.repairable == [] and {"bm25", "dense", "graph"} <= set(healthy.checked)
    assert pg.repair().rebuilt == []  # nothing to repair
    want = _search_all(pg, slice_questions[:6])
    rows = sorted(pg.rows_for_ids([p.id for p in slice_passages[:40]]).values())
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET search_path = amsrag, public")
        conn.execute("DELETE FROM bm25_postings WHERE prow = %s", (rows[0],))
        conn.execute("UPDATE bm25_postings SET imp = imp / 2 WHERE prow = %s", (rows[3],))  # pruning would miss it
        conn.execute("UPDATE bm25_terms SET df = df + 1 WHERE tid = (SELECT min(tid) FROM bm25_terms)")
        conn.execute("UPDATE meta SET value = jsonb_set(value, '{total_len}', '7') WHERE key = 'bm25_stats'")
        vec = np.asarray(conn.execute("SELECT embedding FROM passages WHERE prow = %s", (rows[1],)).fetchone()[0])
        conn.execute("UPDATE passages SET embedding = %s WHERE prow = %s", (vec * 3, rows[1]))
        conn.execute("DROP INDEX passages_embedding_hnsw")
        conn.execute("DELETE FROM graph_ner WHERE prow = %s", (rows[2],))
        conn.execute("UPDATE entities SET degree = degree + 1 WHERE eid = 0")
    found = pg.check()
    assert not found.ok and sorted(found.repairable) == ["bm25", "dense", "graph"]
    text = "\n".join(found.problems)
    for expected in ("collection statistics", "1 passage(s) have no postings", "document frequency", "an impact",
                     "1 stored vector(s) are not unit-norm", "HNSW index passages_embedding_hnsw is missing",
                     "1 passage(s) have no stored NER", "degree"):
        assert expected in text, (expected, text)
    report = pg.repair()
    assert report.rebuilt == ["bm25", "dense", "graph"] and report.reembedded == 1
    assert pg.check().ok, pg.check().problems
    assert _search_all(pg, slice_questions[:6]) == want
    np.testing.assert_allclose(pg.vectors_for_rows([rows[1]])[0], vec, atol=1e-4)  # embedded again
    assert pg.repair(["bm25"]).rebuilt == ["bm25"] and pg.check().ok  # on request, even when healthy
    with pytest.raises(InputError, match="unknown component"):
        pg.repair(["colbert"])


# ---------------------------------------------------------------- BM25 pruning, graph round trips
def _bm25_queries(passages, questions) -> list[str]:
    """Questions, titles, passage openings, very common and repeated terms, words not in the vocabulary."""
    common = "the of and in a is was film American"
    return ([q.question for q in questions[:25]] + [p.title for p in passages[:10]]
            + [" ".join(p.text.split()[:12]) for p in passages[10:20]]
            + [common, "film film film film director", "American American born", "the the the",
               "zzqxv unknownword film", "zzqxv qqqwwweee", "of", "born in the United States",
               "album released by the band in 1999 " * 3])


def test_pruned_bm25_equals_the_exhaustive_scores_and_the_embedded_store(
        pg_built_index, built_index, slice_passages, slice_questions) -> None:
    pg, embedded = retriever_for(pg_built_index, "bm25"), retriever_for(built_index, "bm25")
    nonempty = 0
    for q in _bm25_queries(slice_passages, slice_questions):
        for k in (1, 3, 10, 40):
            want = pg.search(q, k=k, exhaustive=True)
            for depth in (1, 3, None):  # small depths: most queries need the second pass
                got = pg.search(q, k=k, depth=depth, exhaustive=False)
                assert [h.id for h in got] == [h.id for h in want], (q, k, depth)
                assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9, abs=1e-12)
            ref = embedded.search(q, k=k)
            assert [h.id for h in got] == [h.id for h in ref], (q, k)
            assert [h.score for h in got] == pytest.approx([h.score for h in ref], rel=1e-5)
            nonempty += bool(got)
    assert nonempty > 150
    assert pg.search("zzqxv qqqwwweee", k=5) == []


def test_pruned_bm25_stays_exact_as_the_collection_changes(pg, slice_passages, slice_vectors) -> None:
    """Impacts are stored at the first batch's average length; later adds and deletes move the average
    (and the document frequencies) and the pruned search must still equal the exhaustive one."""
    # the first batch is tiny passages: the reference length is ~3 tokens, the later average ~100, so
    # a stored impact understates today's tf part many times (the bound must scale it up)
    short = [Passage(id=f"tiny-{i}", title=p.title.split()[0], text=" ".join(p.text.split()[:2]))
             for i, p in enumerate(slice_passages[:15])]
    rest = list(slice_passages)
    vec = {p.id: v for p, v in zip(slice_passages, slice_vectors, strict=True)}
    vec.update({t.id: vec[p.id] for t, p in zip(short, slice_passages, strict=False)})
    pg.add(short, vectors=[vec[p.id] for p in short])
    first = pg.read(lambda c: pg.meta(c, "bm25_impact"))
    pg.add(rest, vectors=[vec[p.id] for p in rest])
    assert pg.read(lambda c: pg.meta(c, "bm25_impact")) == first  # the reference stays
    pg.delete([p.id for p in rest[:20]])
    r = retriever_for(pg, "bm25")
    queries = ["film director", "the American film", "born", "album band music", "river city county"]
    for q in queries + [p.title for p in slice_passages[20:40]] + [" ".join(p.text.split()[:6]) for p in rest[30:50]]:
        for k, depth in ((1, 1), (3, 1), (5, 2), (5, None), (20, 4)):
            assert [(h.id, round(h.score, 9)) for h in r.search(q, k=k, depth=depth, exhaustive=False)] == \
                [(h.id, round(h.score, 9)) for h in r.search(q, k=k, exhaustive=True)], (q, k)


def _ranked(retriever, q: str, k: int, **kw) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in retriever.search(q, k=k, **kw)]


def test_in_process_bm25_equals_the_sql_plans_and_the_embedded_store(
        pg_built_index, built_index, slice_passages, slice_questions) -> None:
    import numpy as np

    pg, embedded = retriever_for(pg_built_index, "bm25"), retriever_for(built_index, "bm25")
    assert pg.plan == "memory"  # the default
    nonempty = 0
    for q in _bm25_queries(slice_passages, slice_questions):
        for k in (1, 3, 10, 40):
            got = pg.search(q, k=k)
            assert [(h.id, h.score) for h in got] == _ranked(embedded, q, k), (q, k)  # the same index: exact
            sql = pg.search(q, k=k, plan="exhaustive")
            assert [h.id for h in got] == [h.id for h in sql], (q, k)
            assert [h.score for h in got] == pytest.approx([h.score for h in sql], rel=1e-5)
            assert [h.title for h in got] == [h.title for h in sql]
            assert [h.row for h in got] == [h.row for h in sql]
            nonempty += bool(got)
        rows = [h.row for h in pg.search(q, k=40, plan="exhaustive")] + [0, 10**9]
        np.testing.assert_allclose(pg.score_rows(q, rows), pg.score_rows(q, rows, plan="exhaustive"), rtol=1e-5)
    assert nonempty > 150
    assert pg.search("zzqxv qqqwwweee", k=5) == [] and pg.search("the of", k=5) == []
    with pytest.raises(InputError, match="unknown BM25 plan"):
        pg.search("film", plan="bm42")


def test_in_process_bm25_follows_adds_deletes_and_other_processes(pg, slice_passages, slice_vectors) -> None:
    """Every write updates the stored index in its transaction; another PostgresIndex object (another
    process) sees it on its next search (the generation changed) and reads only the new pieces."""
    from amsrag.indexes.bm25 import BM25Index
    from amsrag.retrieve.bm25 import BM25Retriever
    from amsrag.store.postgres import bm25_blobs
    from amsrag.store.postgres.store import PostgresIndex
    from amsrag.types import PassageRow

    vec = dict(zip([p.id for p in slice_passages], slice_vectors, strict=True))
    queries = ["film director", "the American film", "born", "album band music", "river city county",
               *[p.title for p in slice_passages[:30:3]]]

    def agree(idx) -> None:
        """In-process == SQL, and == the embedded store's BM25 built afresh from the passages now stored."""
        stored = idx.read(lambda c: c.execute("SELECT prow, id, title, text FROM passages ORDER BY prow").fetchall())
        fresh = BM25Retriever(BM25Index.build([PassageRow(int(r), i, t, x) for r, i, t, x in stored],
                                              idx.config.bm25), idx)
        r = retriever_for(idx, "bm25")
        for q in queries:
            mem = r.search(q, k=10)
            sql = r.search(q, k=10, plan="exhaustive")
            assert [h.id for h in mem] == [h.id for h in sql], q
            assert [h.score for h in mem] == pytest.approx([h.score for h in sql], rel=1e-5)
            assert [(h.id, h.score) for h in mem] == _ranked(fresh, q, 10), q

    other = PostgresIndex.open(pg.dsn)
    try:
        assert retriever_for(other, "bm25").search("film", k=3) == []  # empty index
        gen0 = other._bm25.generation
        batches = [slice_passages[i : i + 25] for i in range(0, len(slice_passages), 25)]
        for batch in batches:
            pg.add(batch, vectors=[vec[p.id] for p in batch])
            agree(other)
            assert other._bm25.generation > gen0
            gen0 = other._bm25.generation
        before = other._bm25.index
        pg.delete([p.id for p in slice_passages[5:40]])
        pg.delete_documents([slice_passages[60].doc_id or slice_passages[60].id])
        agree(other)
        agree(pg)
        after = other._bm25.index
        kept = {s.name for s in before.segments} & {s.name for s in after.segments}
        assert kept and all(next(s for s in before.segments if s.name == n).rows is
                            next(s for s in after.segments if s.name == n).rows for n in kept)  # not read again
        gone = {p.id for p in slice_passages[5:40]}
        assert not gone & {h.id for q in queries for h in retriever_for(other, "bm25").search(q, k=40)}
        # the stored index equals one built afresh from the remaining passages, and check agrees
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("SET search_path = amsrag, public")
            stored = bm25_blobs.load(conn, pg.config.bm25, None).index
            names = {n for (n,) in conn.execute("SELECT name FROM bm25_blobs")}
        assert names == bm25_blobs.piece_names(stored) | {"df", "index"}  # pieces merged away were deleted
        rows = sorted(pg.rows_for_ids([p.id for p in slice_passages]).values())
        assert stored.rows.tolist() == rows and stored.stats.n_docs == len(pg)
        assert pg.check().ok
        # a write the other object made is seen by the first one too
        other.add(slice_passages[5:10], vectors=[vec[p.id] for p in slice_passages[5:10]])
        assert slice_passages[5].id in {h.id for h in retriever_for(pg, "bm25").search(slice_passages[5].title, k=20)}
        agree(pg)
    finally:
        other.close()


def test_damaged_bm25_pieces_are_found_and_repaired(pg, slice_passages, slice_vectors, slice_questions) -> None:
    pg.add(slice_passages[:50], vectors=slice_vectors[:50])
    want = [_ranked(retriever_for(pg, "bm25"), q.question, 10) for q in slice_questions[:8]]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM amsrag.bm25_blobs WHERE name LIKE 'seg-%'")
    found = pg.check()
    assert not found.ok and "bm25" in found.repairable and "bm25_blobs" in "\n".join(found.problems)
    assert pg.repair(["bm25"]).rebuilt == ["bm25"] and pg.check().ok
    assert [_ranked(retriever_for(pg, "bm25"), q.question, 10) for q in slice_questions[:8]] == want


def test_an_index_at_schema_v4_gets_its_bm25_index_built_on_open(pg, slice_passages, slice_vectors,
                                                                 slice_questions) -> None:
    from amsrag.store.postgres import schema
    from amsrag.store.postgres.store import PostgresIndex

    pg.add(slice_passages[:70], vectors=slice_vectors[:70])
    pg.delete([p.id for p in slice_passages[:7]])
    queries = [q.question for q in slice_questions[:12]] + ["the film", "American American director"]
    before = [_ranked(retriever_for(pg, "bm25"), q, 10, plan="exhaustive") for q in queries]
    counts = {t: _count(pg.dsn, t) for t in ("passages", "bm25_terms", "bm25_postings", "mentions", "entities")}
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        _back_to_v4(conn)
    with PostgresIndex.open(pg.dsn) as idx:
        assert idx.stats()["schema_version"] == schema.CURRENT_VERSION == 6
        assert {t: _count(pg.dsn, t) for t in counts} == counts  # nothing lost
        assert _count(pg.dsn, "bm25_blobs") >= 4
        r = retriever_for(idx, "bm25")
        for q, want in zip(queries, before, strict=True):
            got = _ranked(r, q, 10, plan="memory")
            assert [i for i, _ in got] == [i for i, _ in want], q
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)
        assert idx.check().ok
        idx.add(slice_passages[70:], vectors=slice_vectors[70:])
        assert [h.id for h in r.search("the film director", k=10)] == \
            [h.id for h in r.search("the film director", k=10, plan="exhaustive")]


class _CountingConnection:
    """A real pooled connection that counts the statements sent through it."""

    def __init__(self, conn, counter: list[str]) -> None:
        self._conn, self._counter = conn, counter

    def execute(self, sql, *args, **kwargs):
        self._counter.append(str(sql))
        return self._conn.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_graph_ranks_in_process_as_the_embedded_graph_in_one_statement(
        pg_built_index, built_index, slice_questions) -> None:
    """The first ranking reads the graph into the process; each ranking after it is one statement (the
    top rows' names and the generation), and its ids and scores equal the embedded graph's."""
    from amsrag.retrievers.postgres import PgEntityGraph

    sent: list[str] = []

    class Counting:  # the index, with every read's connection counting its statements
        config = pg_built_index.config
        tokenizer = pg_built_index.tokenizer
        row_names = pg_built_index.row_names
        graph_cache = pg_built_index.graph_cache
        encoder = property(lambda self: pg_built_index.encoder)
        meta = staticmethod(pg_built_index.meta)

        @staticmethod
        def read(fn):
            return pg_built_index.read(lambda c: fn(_CountingConnection(c, sent)))

    graph = PgEntityGraph(Counting(), pg_built_index.config.graph)
    emb_graph = retriever_for(built_index, "graph").graph
    graph.rank("warm up", [], 5)
    for q in slice_questions[:12]:
        qv = built_index.encoder.encode_query(q.question)
        seeds = [h for h in retriever_for(built_index, "dense").search(q.question, 10, qv)]
        rows_e = [(h.row, 1.0 / (n + 1)) for n, h in enumerate(seeds)]
        pg_rows = pg_built_index.rows_for_ids([h.id for h in seeds])
        rows_p = [(pg_rows[h.id], 1.0 / (n + 1)) for n, h in enumerate(seeds)]
        sent.clear()
        got = graph.rank(q.question, rows_p, 10)
        assert len(sent) == 1, sent
        want = emb_graph.rank(q.question, rows_e, 10)
        assert [pid for _, _, pid in got] == [pid for _, _, pid in want], q.question
        assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in want], rel=1e-5)
        assert graph.query_entities(q.question) == [
            pg_built_index.graph_cache.latest().key_index[emb_graph.entity_key_of(e)]
            for e in emb_graph.query_entities(q.question)]
    sent.clear()
    assert graph.rank("zzqxv nothing here", [], 5) == [] and len(sent) == 1


def test_in_process_graph_follows_writes_of_other_processes(pg, slice_passages, slice_vectors) -> None:
    """Every rewrite of the graph bumps its generation in the same transaction; another PostgresIndex
    object (another process) ranks on its old copy, sees the new generation in the same statement and
    ranks again on the graph read afresh."""
    from amsrag.store.postgres.store import PostgresIndex

    vec = dict(zip([p.id for p in slice_passages], slice_vectors, strict=True))
    pg.add(slice_passages[:60], vectors=[vec[p.id] for p in slice_passages[:60]])
    other = PostgresIndex.open(pg.dsn)
    try:
        graph = retriever_for(other, "graph").graph
        titles = [p.title for p in slice_passages[:60:6]]
        before = {t: graph.rank(t, [], 10) for t in titles}
        gen0 = other.graph_cache.latest().generation
        assert any(before.values())
        gone = {p.id for p in slice_passages[:30]}
        pg.delete(sorted(gone))
        pg.add(slice_passages[60:90], vectors=[vec[p.id] for p in slice_passages[60:90]])
        for t in titles:
            got = graph.rank(t, [], 10)
            assert not gone & {pid for _, _, pid in got}, t
            fresh = PostgresIndex.open(pg.dsn)  # a process that reads the graph for the first time
            try:
                assert got == retriever_for(fresh, "graph").graph.rank(t, [], 10), t
            finally:
                fresh.close()
        assert other.graph_cache.latest().generation == gen0 + 2
        assert other.graph_cache.latest().n_passages == len(pg) == 60
    finally:
        other.close()


def test_binary_copy_reader_refuses_nulls_and_reads_what_it_is_given(pg) -> None:
    from amsrag.store.postgres.graph_state import copy_columns

    def run(c):
        got = copy_columns(c, "SELECT i::bigint, (i * 2)::int FROM generate_series(1, 5) i",
                           [("a", ">i8"), ("b", ">i4")])
        assert got["a"].tolist() == [1, 2, 3, 4, 5] and got["b"].tolist() == [2, 4, 6, 8, 10]
        assert len(copy_columns(c, "SELECT 1::bigint WHERE false", [("a", ">i8")])) == 0
        with pytest.raises(IndexCorruptError, match="NULL"):
            copy_columns(c, "SELECT NULL::bigint, 1::int", [("a", ">i8"), ("b", ">i4")])

    pg.read(run)


def test_a_graph_search_is_three_reads_and_describes_its_hits_from_the_ranking(
        pg_built_index, built_index, slice_questions, monkeypatch) -> None:
    """bm25 seeding (the id lookup), dense seeding (its ef and its search pipelined: one round trip) and
    the ranking's one statement; the hits' ids and titles come with it, no read describes them."""
    reads: list[list[str]] = []
    real = pg_built_index.read

    def counting(fn):
        sent: list[str] = []
        reads.append(sent)
        return real(lambda c: fn(_CountingConnection(c, sent)))

    graph, emb = retriever_for(pg_built_index, "graph"), retriever_for(built_index, "graph")
    monkeypatch.setattr(pg_built_index, "read", counting)
    for q in slice_questions[:8]:
        qv = built_index.encoder.encode_query(q.question)
        graph.search(q.question, 10, qv)  # warm: the BM25 index cached, the pool's connections open
        reads.clear()
        got = graph.search(q.question, 10, qv)
        # the two seeders run at once (either may read first), the ranking after both
        assert sorted(len(sent) for sent in reads[:2]) == [1, 2] and len(reads) == 3 and len(reads[2]) == 1, reads
        dense = next(sent for sent in reads if len(sent) == 2)
        assert "hnsw.ef_search" in dense[0] and "embedding <=>" in dense[1]
        want = emb.search(q.question, 10, qv)
        assert [(h.id, h.title, h.rank) for h in got] == [(h.id, h.title, h.rank) for h in want], q.question
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-5)
    assert pg_built_index.describe_rows([h.row for h in got]) == [(h.id, h.title) for h in got]
    assert not reads[-1] or len(reads) == 3  # described from what the ranking's statement brought


def test_read_pool_size_is_configurable(pg, monkeypatch) -> None:
    from amsrag.store.postgres.connection import POOL_MAX, POOL_MIN, pool_limits
    from amsrag.store.postgres.store import PostgresIndex

    assert (pg.pool.min_size, pg.pool.max_size) == (POOL_MIN, POOL_MAX) == (2, 10)
    assert pool_limits(env={"AMSRAG_PG_POOL_MIN": "4", "AMSRAG_PG_POOL_MAX": "20"}) == (4, 20)
    assert pool_limits(None, 1, env={}) == (1, 1)  # the fewest never exceed the most
    for bad in ({"AMSRAG_PG_POOL_MAX": "many"}, {"AMSRAG_PG_POOL_MAX": "0"}):
        with pytest.raises(InputError, match=r"AMSRAG_PG_POOL_MAX|max >= 1"):
            pool_limits(env=bad)
    monkeypatch.setenv("AMSRAG_PG_POOL_MIN", "3")
    monkeypatch.setenv("AMSRAG_PG_POOL_MAX", "5")
    with PostgresIndex.open(pg.dsn) as idx:
        assert (idx.pool.min_size, idx.pool.max_size) == (3, 5)
        idx.pool.wait(timeout=10)  # the fewest are opened at start
        with psycopg.connect(pg.dsn) as conn:
            open_ = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                 "AND pid <> pg_backend_pid()").fetchone()[0]
        assert open_ >= 3 + pg.pool.get_stats().get("pool_size", 0)
    with PostgresIndex.open(pg.dsn, pool_min=1, pool_size=2) as idx:  # arguments beat the environment
        assert (idx.pool.min_size, idx.pool.max_size) == (1, 2)


def test_the_structured_route_answers_from_postgres_tables(pg, slice_passages, slice_vectors) -> None:
    """The index's tables live in real PostgreSQL tables, read-only to the route's SQL, and answer the structured
    route in another process's index (storing, replacing and deleting tables: the conformance suite)."""
    from amsrag.cli.demo import demo_tables
    from amsrag.pipeline import Engine
    from amsrag.store.postgres.store import PostgresIndex
    from amsrag.tables.base import SqlRefused

    pg.add(slice_passages, vectors=slice_vectors)
    pg.put_tables(demo_tables())
    other = PostgresIndex.open(pg.dsn)
    try:
        store = other.tables()
        name = store.profiles()[0].sql_name
        with pytest.raises(SqlRefused):
            store.runner().run(f"DELETE FROM {name}")
        a = Engine(other).ask("How many films were made by 20th Century Fox studios?")
        assert a.trace["strategy"] == "table" and a.answer == "5", a.trace.to_dict().get("structured")
        assert a.citations and all("#row=" in c for c in a.citations)
    finally:
        other.close()


def test_export_leaves_chinese_ner_of_other_settings_behind(tmp_path, pg_url) -> None:
    """An embedded graph built with other Chinese entity settings than its config now names: the copy in
    PostgreSQL records the config's, so the NER of its Chinese passages runs again there."""
    import numpy as np

    from amsrag.store.open import export_index
    from amsrag.store.postgres.store import PostgresIndex

    path = tmp_path / "idx"
    texts = {"zh": "长宁区是上海市的一个市辖区。鲁迅曾住在江苏路街道附近。", "en": "Ada Lovelace wrote notes."}
    vectors = np.eye(2, 384, dtype=np.float32)
    with EmbeddedIndex.create(path, AmsragConfig.model_validate({"graph": {"ner_zh": False}})) as idx:
        idx.add([Passage(id=k, text=v) for k, v in texts.items()], vectors=vectors)
    AmsragConfig.model_validate({}).save(path / "config.toml")  # ner_zh back on, as a user's edit would
    with EmbeddedIndex.open(path) as source:
        assert source.check().repairable == ["graph"]
        export_index(source, pg_url)
    with PostgresIndex.open(pg_url) as pg:
        graph = retriever_for(pg, "graph").graph
        assert "江苏路街道" in {graph.entity_key_of(e) for e in graph.query_entities("江苏路街道在哪个区？")}
        assert pg.check().ok


def test_dense_search_settings_stay_in_its_transaction(pg_built_index, built_index, slice_questions) -> None:
    """The search's hnsw.ef_search and its cap of no parallel workers are local to its transaction: the pooled
    connection that served it keeps the server's settings for whatever it reads next."""
    from amsrag.store.postgres.store import PostgresIndex

    one = PostgresIndex.open(pg_built_index.read_dsn, pool_size=1, pool_min=1)  # every read on one connection
    try:
        def show(c) -> tuple[str | None, str]:  # ef_search is unknown until pgvector is loaded in the session
            return c.execute("SELECT current_setting('hnsw.ef_search', true), "
                             "current_setting('max_parallel_workers_per_gather')").fetchone()

        before = one.read(show)
        q = slice_questions[0].question
        hits = retriever_for(one, "dense").search(q, k=5, query_vector=built_index.encoder.encode_query(q))
        assert len(hits) == 5 and one.config.dense.hnsw_ef_search == 128
        assert one.read(show) == ("40", before[1]) and before[1] != "0"  # pgvector's default ef, the server's cap
        assert [h.id for h in hits] == [h.id for h in retriever_for(pg_built_index, "dense").search(
            q, k=5, query_vector=built_index.encoder.encode_query(q))]
    finally:
        one.close()


def test_dense_within_a_large_filter_scans_hnsw_iteratively_and_keeps_the_exact_top_k(
        pg_url, slice_passages, slice_vectors, monkeypatch) -> None:
    """A filter allowing at least HNSW_WITHIN_SHARE of the passages whose vectors are not gathered (a gather budget
    of 0 here): pgvector's iterative HNSW scan with the allowed rows as a bitmap in SQL (issue 38), only allowed rows,
    the exact scan's top-k on this small index; the plan is the HNSW index, not a sort of every passage; a small
    share still scans exactly; the settings stay local."""
    import numpy as np

    from amsrag.retrievers import postgres
    from amsrag.retrievers.pg_gather import KeptGathers
    from amsrag.retrievers.postgres import DENSE_ITERATIVE_SQL, HNSW_WITHIN_SHARE, ITERATIVE_SETTINGS_SQL
    from amsrag.store.postgres.store import PostgresIndex

    monkeypatch.setattr(postgres, "KEPT", KeptGathers(0, 0))
    config = AmsragConfig.model_validate({"dense": {"hnsw_min_size": 0}})
    idx = PostgresIndex.create(pg_url, config)
    try:
        idx.add(slice_passages, vectors=slice_vectors)
        dense = retriever_for(idx, "dense")
        total = len(idx)
        rows = np.asarray(sorted(h.row for h in dense.search("x", k=total, query_vector=slice_vectors[0], exact=True)),
                          dtype=np.int64)
        assert len(rows) == total
        for share, offset in ((0.5, 1), (HNSW_WITHIN_SHARE, 0), (HNSW_WITHIN_SHARE, 1)):
            allowed = rows[offset:: round(1 / share)]
            assert len(allowed) >= HNSW_WITHIN_SHARE * total
            kept = set(allowed.tolist())
            for qvec in slice_vectors[:20]:
                graph = dense.search_within("q", 5, allowed, qvec, total=total)
                exact = dense.search_within("q", 5, allowed, qvec)
                assert {h.row for h in graph} <= kept and len(graph) == 5
                assert [h.id for h in graph] == [h.id for h in exact]
        bits = np.packbits(np.isin(np.arange(rows[-1] + 1), rows[::2]), bitorder="little").tobytes()

        def plan(c) -> str:
            with c.transaction():
                c.execute(ITERATIVE_SETTINGS_SQL, ("400",))
                found = c.execute(f"EXPLAIN {DENSE_ITERATIVE_SQL} LIMIT 20",
                                  {"q": slice_vectors[0], "bits": bits, "last": int(rows[-1])}).fetchall()
            return "\n".join(r[0] for r in found)

        explained = idx.read(plan)
        assert "hnsw" in explained and "Seq Scan" not in explained and "Sort" not in explained, explained
        few = rows[:3]
        assert [h.row for h in dense.search_within("q", 5, few, slice_vectors[0], total=total)] == [
            h.row for h in dense.search_within("q", 5, few, slice_vectors[0])]
        one = PostgresIndex.open(pg_url, pool_size=1, pool_min=1)  # every read on one connection
        try:
            settings = ("SELECT current_setting('hnsw.ef_search', true), current_setting('hnsw.iterative_scan', true), "
                        "current_setting('enable_seqscan'), current_setting('max_parallel_workers_per_gather')")
            before = one.read(lambda c: c.execute(settings).fetchone())
            assert len(retriever_for(one, "dense").search_within("q", 5, rows[::2], slice_vectors[0], total=total)) == 5
            after = one.read(lambda c: c.execute(settings).fetchone())
            assert after[2:] == before[2:] == ("on", after[3]) and after[:2] == ("40", "off")  # pgvector's defaults
        finally:
            one.close()
    finally:
        idx.close()


def test_dense_within_a_filter_ranks_its_gathered_vectors_exactly_and_follows_writes(pg_url, slice_passages,
                                                                                     slice_vectors) -> None:
    """A filter's dense search (the total given) reads the allowed rows' vectors into the process once and ranks
    them there (issue 38): k hits, the exact scan's ids, order and scores, only allowed rows, one gather kept per
    allowed-row array; after a delete and an add (a new generation) the kept gather is found out of date and the
    results are the exact scan's of what is stored, never a deleted passage."""
    import numpy as np

    from amsrag.retrievers.pg_gather import KEPT
    from amsrag.store.postgres.store import PostgresIndex

    config = AmsragConfig.model_validate({"dense": {"hnsw_min_size": 0}})
    idx = PostgresIndex.create(pg_url, config)
    try:
        passages, vectors = slice_passages[:-5], slice_vectors[:-5]
        idx.add(passages, vectors=vectors)
        dense = retriever_for(idx, "dense")
        total = len(idx)
        rows = np.asarray(sorted(h.row for h in dense.search("x", k=total, query_vector=vectors[0], exact=True)),
                          dtype=np.int64)
        allowed = rows[1::2]
        kept = set(allowed.tolist())
        KEPT.clear()
        for qvec in slice_vectors[:20]:
            gathered = dense.search_within("q", 5, allowed, qvec, total=total)
            exact = dense.search_within("q", 5, allowed, qvec)
            assert len(gathered) == 5 and {h.row for h in gathered} <= kept
            assert [(h.id, h.row, h.title) for h in gathered] == [(h.id, h.row, h.title) for h in exact]
            assert np.allclose([h.score for h in gathered], [h.score for h in exact], atol=1e-6)
        gather = KEPT.get(dense, allowed)
        assert gather is not None and len(KEPT) == 1 and gather.rows.tolist() == allowed.tolist()
        stored = idx.read(lambda c: c.execute("SELECT embedding FROM passages WHERE prow = ANY(%s) ORDER BY prow",
                                              (allowed.tolist(),)).fetchall())
        assert np.array_equal(gather.vectors, np.stack([np.asarray(v, dtype=np.float32) for (v,) in stored]))
        assert len(dense.search_within("q", len(allowed) + 3, allowed, vectors[0], total=total)) == len(allowed)

        top = dense.search_within("q", 1, allowed, vectors[1], total=total)[0]
        idx.delete([top.id])
        idx.add(slice_passages[-5:], vectors=slice_vectors[-5:])
        after = dense.search_within("q", 5, allowed, vectors[1], total=total)
        assert top.id not in {h.id for h in after} and len(after) == 5
        assert [h.id for h in after] == [h.id for h in dense.search_within("q", 5, allowed, vectors[1])]
        fresh = KEPT.get(dense, allowed)
        assert fresh is None or fresh.generation != gather.generation  # the old gather is not used again
        again = dense.search_within("q", 5, allowed, vectors[1], total=total)  # gathered again, current
        assert [h.id for h in again] == [h.id for h in after]
        regathered = KEPT.get(dense, allowed)
        assert regathered is not None and top.row not in regathered.rows.tolist()
    finally:
        KEPT.clear()
        idx.close()


def test_kept_gathers_stay_within_their_budget() -> None:
    """Gathers are kept by (owner, rows) identity, the least recently used dropped past the budget, none larger
    than the largest kept, and one whose rows are gone is forgotten."""
    import numpy as np

    from amsrag.retrievers.pg_gather import Gather, KeptGathers

    def gather(n: int) -> Gather:
        return Gather(1, np.arange(n, dtype=np.int64), np.zeros((n, 4), dtype=np.float32))

    class Owner:  # a retriever, as far as the cache cares
        pass

    one = gather(10)  # 10 * (16 + 8) = 240 bytes
    kept = KeptGathers(budget=600, largest=300)
    owner, a, b, c = Owner(), np.arange(3), np.arange(3), np.arange(3)
    kept.put(owner, a, one)
    kept.put(owner, b, gather(10))
    assert kept.get(owner, a) is one and kept.get(Owner(), a) is None and kept.used == 480
    kept.put(owner, c, gather(10))  # over the budget: b, the least recently used, goes
    assert kept.get(owner, b) is None and kept.get(owner, a) is one and kept.used == 480
    kept.put(owner, b, gather(20))  # larger than the largest: not kept
    assert kept.get(owner, b) is None and not kept.fits(20, 4) and kept.fits(12, 4)
    kept.drop(owner, a)
    assert kept.get(owner, a) is None and len(kept) == 1
    del c
    kept.put(owner, a, one)
    assert len(kept) == 1 and kept.used == 240
