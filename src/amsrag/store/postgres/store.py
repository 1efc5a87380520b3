"""The PostgreSQL + pgvector index: the same PassageIndex as the embedded store, in a database.

Passages, their vectors (pgvector, HNSW with cosine), BM25 term and posting tables, the entity
graph (entities, mentions) and the query library live in the `amsrag` schema. Every add, delete or
library save is one transaction, serialised across processes by an advisory lock, so several amsrag
processes can share one database and see each other's writes as soon as they commit. Reads go through a psycopg pool; a
failed read (server down, connection dropped) is retried once within the request timeout and then
reported as `StoreUnavailableError`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import scipy.sparse as sp
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from amsrag import INDEX_FORMAT_VERSION, __version__
from amsrag.config import AmsragConfig
from amsrag.embed.encoder import DIMENSION, Encoder, MiniLMEncoder, passage_text_for_embedding
from amsrag.errors import AmsragError, IndexMismatchError, IndexNotFoundError, InputError
from amsrag.progress import NullProgress, Progress
from amsrag.retrieve.base import Retriever
from amsrag.retrieve.bm25 import BM25Tokenizer, passage_text_for_bm25
from amsrag.retrieve.graph import EntityGraph, GraphRetriever, NerCache, text_checksum
from amsrag.store.postgres import schema
from amsrag.store.postgres.retrievers import PgBM25Retriever, PgDenseRetriever, PgEntityGraph
from amsrag.store.query_library import QueryLibrary
from amsrag.store.writes import (
    DeleteReport,
    IngestReport,
    expected_params,
    param_differences,
    plan_insert,
    validate_passages,
)
from amsrag.types import RETRIEVERS, Passage, PassageRow

T = TypeVar("T")
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0  # a read (with its one retry) gives up after this
LOCK_TIMEOUT_S = 60.0
BULK_REBUILD_SHARE = 0.5  # an add at least this large (vs. stored passages) rebuilds HNSW after loading


class StoreUnavailableError(AmsragError):
    """The database cannot be reached or dropped the connection (after one retry)."""


def redact(dsn: str) -> str:
    """The URL without its password, for messages and stats."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)


class _Existing:
    """What `plan_insert` asks the passage table, answered by PostgreSQL."""

    @staticmethod
    def existing(conn: psycopg.Connection, ids: Sequence[str], hashes: Sequence[str]
                 ) -> tuple[dict[str, str], dict[str, str]]:
        by_id: dict[str, str] = dict(conn.execute("SELECT id, content_hash FROM passages WHERE id = ANY(%s)",
                                                  (list(ids),)).fetchall())
        by_hash: dict[str, str] = dict(conn.execute(
            "SELECT content_hash, id FROM passages WHERE content_hash = ANY(%s)", (list(hashes),)).fetchall())
        return by_id, by_hash


class PostgresIndex:
    """Passages + BM25 + vectors + entity graph in PostgreSQL. Use `create` or `open`."""

    backend = "postgres"

    def __init__(self, dsn: str, config: AmsragConfig, pool_size: int = 8,
                 request_timeout: float = REQUEST_TIMEOUT_S, read_dsn: str | None = None) -> None:
        """`read_dsn`: a streaming read replica of `dsn` that serves every read (writes go to `dsn`;
        a replica shows a write once it has replayed it)."""
        self.dsn = dsn
        self.read_dsn = read_dsn or dsn
        self.path = redact(dsn)  # what reports print where the embedded store prints its directory
        self.config = config
        self.request_timeout = request_timeout
        self._encoder: Encoder | None = None
        self._retrievers: dict[str, Retriever] = {}
        self._library: tuple[int, QueryLibrary] | None = None  # (query_library_generation, library)
        self.tokenizer = BM25Tokenizer(config.bm25)  # BM25's, shared with its retriever
        kwargs = {"connect_timeout": int(CONNECT_TIMEOUT_S), "autocommit": True,
                  "options": f"-c search_path={schema.SEARCH_PATH.replace(' ', '')} "
                             f"-c statement_timeout={int(request_timeout * 1000)}"}
        self.pool = ConnectionPool(self.read_dsn, min_size=1, max_size=pool_size, kwargs=kwargs, configure=_configure,
                                   check=ConnectionPool.check_connection, timeout=request_timeout,
                                   open=False, name="amsrag")
        self.pool.open(wait=False)

    # ---------------------------------------------------------------- opening
    @classmethod
    def create(cls, dsn: str, config: AmsragConfig | None = None, **kwargs: Any) -> PostgresIndex:
        config = config or AmsragConfig()
        if config.bm25.method != "lucene":
            raise InputError(f"the postgres backend scores BM25 with the lucene method only, not "
                             f"{config.bm25.method!r}")
        with _connect(dsn) as conn, conn.transaction():
            _lock(conn)
            if schema.installed_version(conn) is not None:
                raise InputError(f"an amsrag index already exists in {redact(dsn)}: add passages with "
                                 f"`amsrag index add`, or use another database")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            d = config.dense
            schema.migrate(conn, {"dim": DIMENSION, "m": d.hnsw_m, "ef_construction": d.hnsw_ef_construction},
                           __version__)
            now = datetime.now(UTC).isoformat(timespec="seconds")
            meta = {"format_version": INDEX_FORMAT_VERSION, "amsrag_version": __version__, "backend": "postgres",
                    "params": expected_params(config), "config": config.to_toml(), "created": now,
                    "updated": now, "generation": 0, "n_passages": 0,
                    "bm25_stats": {"n_docs": 0, "total_len": 0}, "graph_max_surface": 0}
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO meta (key, value) VALUES (%s, %s)",
                                [(k, json.dumps(v)) for k, v in meta.items()])
        return cls(dsn, config, **kwargs)

    @classmethod
    def open(cls, dsn: str, **kwargs: Any) -> PostgresIndex:
        """The index in the database at `dsn`; keyword arguments go to the constructor (`read_dsn`...)."""
        with _connect(dsn) as conn:
            version = schema.installed_version(conn)
            if version is None:
                raise IndexNotFoundError(f"no amsrag index in {redact(dsn)}: build one with `amsrag index build "
                                         f"INPUT... --index URL` or copy one with `amsrag index export`")
            if version < schema.CURRENT_VERSION:
                with conn.transaction():
                    _lock(conn)
                    schema.migrate(conn, {"dim": DIMENSION}, __version__)
            elif version > schema.CURRENT_VERSION:
                schema.migrate(conn, {}, __version__)  # raises: newer than this amsrag
            conn.execute(f"SET search_path = {schema.SEARCH_PATH}")
            meta: dict[str, Any] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format_version") != INDEX_FORMAT_VERSION:
            raise IndexMismatchError(
                f"index in {redact(dsn)} has format version {meta.get('format_version')!r}; this amsrag "
                f"({__version__}) reads version {INDEX_FORMAT_VERSION}. Rebuild it.")
        config = AmsragConfig.from_toml(meta["config"], source=f"{redact(dsn)} meta.config")
        for name, params in expected_params(config).items():
            diffs = param_differences(meta["params"].get(name, {}), params)
            if diffs:
                raise IndexMismatchError(
                    f"index in {redact(dsn)} was built with different {name} settings than this installation "
                    f"provides ({'; '.join(diffs)}). It cannot be used as is: rebuild it.")
        return cls(dsn, config, **kwargs)

    def close(self) -> None:
        self.pool.close()

    @property
    def location(self) -> str:
        return self.path

    def stale(self) -> bool:
        """Never: every read sees the shared store's committed state."""
        return False

    def refresh(self) -> bool:
        """Nothing to load (reads are live); False."""
        return False

    def __enter__(self) -> PostgresIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- plumbing
    def read(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run `fn` on a pooled connection; one retry on a connection failure, within the request timeout."""
        deadline = time.monotonic() + self.request_timeout
        for attempt in (1, 2):
            remaining = deadline - time.monotonic()
            try:
                with self.pool.connection(timeout=max(remaining, 0.1)) as conn:
                    return fn(conn)
            except (psycopg.OperationalError, PoolTimeout) as exc:
                remaining = deadline - time.monotonic()
                if attempt == 2 or remaining <= 0.05:
                    raise StoreUnavailableError(
                        f"PostgreSQL at {self.path} is unavailable ({type(exc).__name__}: "
                        f"{str(exc).strip() or 'no detail'}); tried {attempt} time(s) within "
                        f"{self.request_timeout:.0f} s") from exc
                time.sleep(min(0.2, remaining / 2))
        raise AssertionError("unreachable")

    def meta(self, conn: psycopg.Connection, key: str) -> Any:
        """The value stored under `key` in the meta table (None when absent)."""
        row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else row[0]

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection]:
        """One transaction holding the cross-process write lock; no statement timeout (bulk work)."""
        conn = _connect(self.dsn)
        try:
            with conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 0")
                _lock(conn)
                conn.execute(f"SET LOCAL search_path = {schema.SEARCH_PATH}")
                register_vector(conn)
                yield conn
        finally:
            conn.close()

    # ---------------------------------------------------------------- components
    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = MiniLMEncoder(self.config.embedding)
        return self._encoder

    def retriever(self, name: str) -> Retriever:
        if name not in self._retrievers:
            self._retrievers[name] = self._make_retriever(name)
        return self._retrievers[name]

    def _make_retriever(self, name: str) -> Retriever:
        if name == "bm25":
            return PgBM25Retriever(self)
        if name == "dense":
            return PgDenseRetriever(self)
        if name == "graph":
            return GraphRetriever(PgEntityGraph(self, self.config.graph), self,
                                  [PgBM25Retriever(self), PgDenseRetriever(self)], self.config.graph)
        raise InputError(f"unknown retriever {name!r}; choose one of {', '.join(RETRIEVERS)}")

    def update_config(self, config: AmsragConfig) -> None:
        """Replace query-time settings; settings the stored tables depend on need a rebuild."""
        old, new = expected_params(self.config), expected_params(config)
        changed = [f"{n}: {'; '.join(d)}" for n in old if (d := param_differences(old[n], new[n]))]
        if changed:
            raise InputError(f"these settings need a rebuild, not a config update: {' | '.join(changed)}")
        with self._write() as conn:
            conn.execute("UPDATE meta SET value = %s WHERE key = 'config'", (json.dumps(config.to_toml()),))
        self.config = config
        self._retrievers = {}

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int(self.read(lambda c: self.meta(c, "n_passages")))

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        rows = [int(r) for r in rows]
        if not rows:
            return []
        found = dict(self.read(lambda c: [(r, (i, t)) for r, i, t in c.execute(
            "SELECT prow, id, title FROM passages WHERE prow = ANY(%s)", (rows,)).fetchall()]))
        return [found[r] for r in rows]

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]:
        got: dict[str, int] = dict(self.read(lambda c: c.execute("SELECT id, prow FROM passages WHERE id = ANY(%s)",
                                                                 (list(ids),)).fetchall()))
        return {pid: int(got[pid]) for pid in ids if pid in got}

    def passages_by_rows(self, rows: Sequence[int]) -> list[Passage]:
        rows = [int(r) for r in rows]
        if not rows:
            return []
        got = {r[0]: Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=r[5]) for r in self.read(
            lambda c: c.execute("SELECT prow, id, doc_id, title, text, metadata FROM passages WHERE prow = ANY(%s)",
                                (rows,)).fetchall())}
        return [got[r] for r in rows]

    def get(self, pid: str) -> Passage | None:
        r = self.read(lambda c: c.execute("SELECT id, doc_id, title, text, metadata FROM passages WHERE id = %s",
                                          (pid,)).fetchone())
        return None if r is None else Passage(id=r[0], doc_id=r[1], title=r[2], text=r[3], metadata=r[4])

    def iter_passages(self, batch: int = 1000) -> Iterator[Passage]:
        last = 0
        while True:
            def page(c: psycopg.Connection, last: int = last) -> list[tuple[Any, ...]]:
                return c.execute("SELECT prow, id, doc_id, title, text, metadata FROM passages WHERE prow > %s "
                                 "ORDER BY prow LIMIT %s", (last, batch)).fetchall()

            got = self.read(page)
            if not got:
                return
            for r in got:
                yield Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=r[5])
            last = got[-1][0]

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray:
        rows = [int(r) for r in rows]
        if not rows:
            return np.zeros((0, DIMENSION), np.float32)
        got: dict[int, Any] = dict(self.read(lambda c: c.execute(
            "SELECT prow, embedding FROM passages WHERE prow = ANY(%s)", (rows,)).fetchall()))
        return np.stack([np.asarray(got[r], dtype=np.float32) for r in rows])

    def stats(self) -> dict[str, Any]:
        def q(c: psycopg.Connection) -> dict[str, Any]:
            meta: dict[str, Any] = dict(c.execute("SELECT key, value FROM meta").fetchall())
            docs = _scalar(c.execute("SELECT count(DISTINCT doc_id) FROM passages"))
            vocab = _scalar(c.execute("SELECT count(*) FROM bm25_terms"))
            ents = _scalar(c.execute("SELECT count(*) FROM entities"))
            edges = _scalar(c.execute("SELECT count(*) FROM mentions"))
            size = _scalar(c.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                                     "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                                     "AND c.relkind = 'r'",
                                     (schema.SCHEMA,)))
            version = schema.installed_version(c)
            library = _scalar(c.execute("SELECT count(*) FROM query_library"))
            return {"index": self.path, "backend": self.backend, "passages": int(meta["n_passages"]),
                    "documents": int(docs), "generation": int(meta["generation"]),
                    "embedding_model": meta["params"]["dense"]["model_id"], "dense_search": "hnsw (pgvector)",
                    "bm25": {"method": self.config.bm25.method, "vocabulary": int(vocab),
                             "tokens": int(meta["bm25_stats"]["total_len"])},
                    "graph": {"entities": int(ents), "edges": int(edges)}, "query_library": int(library),
                    "disk_bytes": int(size),
                    "schema_version": version, "created": meta["created"], "updated": meta["updated"]}
        return self.read(q)

    # ---------------------------------------------------------------- the query library
    def query_library(self) -> QueryLibrary:
        """The stored query library (empty when there is none); cached, and read again when another
        save (by any process) bumped its generation: one meta lookup per call otherwise."""
        cached = self._library
        if cached is not None and cached[0] == self.read(_library_generation):
            return cached[1]

        def load(c: psycopg.Connection) -> tuple[int, list[tuple[Any, ...]]]:
            with c.transaction():  # the generation and the rows from one snapshot
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                gen = _library_generation(c)
                rows = c.execute("SELECT question, hop, source, vector FROM query_library ORDER BY pos").fetchall()
            return gen, rows

        gen, rows = self.read(load)
        library = QueryLibrary.empty() if not rows else QueryLibrary(
            [r[0] for r in rows], np.asarray([r[1] for r in rows]),
            np.stack([np.asarray(r[3], dtype=np.float32) for r in rows]), [r[2] for r in rows])
        self._library = (gen, library)
        return library

    def save_query_library(self, library: QueryLibrary) -> None:
        """Replace the stored library in one transaction (rows no longer in it deleted, changed rows
        updated, new rows inserted); passages and their tables are not touched."""
        if not isinstance(library, QueryLibrary):
            raise InputError(f"a QueryLibrary is needed, got {type(library).__name__}")
        if library.dim != DIMENSION:
            raise InputError(f"query library vectors have {library.dim} dimensions; the index's have {DIMENSION}")
        saved = library.copy()
        with self._write() as conn:
            conn.execute(f"CREATE TEMP TABLE query_library_new (key text, pos integer, question text, hop text, "
                         f"source text, vector vector({DIMENSION})) ON COMMIT DROP")
            with conn.cursor().copy("COPY query_library_new (key, pos, question, hop, source, vector) "
                                    "FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["text", "int4", "text", "text", "text", "vector"])
                for pos, row in enumerate(zip(saved.keys, saved.questions, saved.hops, saved.sources,
                                              saved.vectors, strict=True)):
                    key, question, hop, source, vector = row
                    copy.write_row((key, pos, question, hop, source, vector))
            conn.execute("DELETE FROM query_library q WHERE NOT EXISTS "
                         "(SELECT 1 FROM query_library_new n WHERE n.key = q.key)")
            conn.execute("INSERT INTO query_library AS q (key, pos, question, hop, source, vector) "
                         "SELECT key, pos, question, hop, source, vector FROM query_library_new "
                         "ON CONFLICT (key) DO UPDATE SET pos = EXCLUDED.pos, question = EXCLUDED.question, "
                         "hop = EXCLUDED.hop, source = EXCLUDED.source, vector = EXCLUDED.vector, "
                         "added_at = CASE WHEN q.hop = EXCLUDED.hop THEN q.added_at ELSE now() END "
                         "WHERE (q.pos, q.question, q.hop, q.source, q.vector) IS DISTINCT FROM "
                         "(EXCLUDED.pos, EXCLUDED.question, EXCLUDED.hop, EXCLUDED.source, EXCLUDED.vector)")
            gen = _scalar(conn.execute(
                "INSERT INTO meta (key, value) VALUES ('query_library_generation', '1') ON CONFLICT (key) "
                "DO UPDATE SET value = to_jsonb((meta.value::text)::bigint + 1) RETURNING value"))
        self._library = (int(gen), saved)

    # ---------------------------------------------------------------- writing
    def add(self, passages: Iterable[Passage], progress: Progress | None = None,
            vectors: np.ndarray | None = None, ner: dict[str, tuple[str, ...]] | None = None) -> IngestReport:
        """Add passages in one transaction. Identical re-adds and duplicate content are skipped.

        `vectors`: the passages' embeddings by this index's model, aligned with `passages` (no
        re-embedding). `ner`: NER surfaces per passage id already computed by the same spaCy model
        (an export from the embedded store passes them so spaCy does not run again).
        """
        progress = progress or NullProgress()
        items = validate_passages(list(passages))
        if vectors is not None and len(vectors) != len(items):
            raise InputError(f"{len(items)} passages but {len(vectors)} vectors")
        report = IngestReport(received=len(items))
        with self._write() as conn:
            new, report.skipped_existing, report.skipped_duplicate_content = plan_insert(_Existing(), conn, items)
            if not new:
                return report
            chosen = [items[i] for i in new]
            t = time.perf_counter()
            if vectors is None:
                with progress.task("dense: embed", len(chosen)) as adv:
                    vecs = self.encoder.encode([passage_text_for_embedding(p.title, p.text) for p, _ in chosen], adv)
            else:
                vecs = np.asarray(vectors, dtype=np.float32)[new]
            if vecs.shape != (len(chosen), DIMENSION) or not np.all(np.isfinite(vecs)):
                raise InputError(f"vectors must be {len(chosen)} x {DIMENSION} finite numbers, got {vecs.shape}")
            report.seconds["embed"] = time.perf_counter() - t
            t = time.perf_counter()
            with progress.task("bm25: tokenise", len(chosen)) as adv:
                tokens = []
                for n, (p, _) in enumerate(chosen):
                    tokens.append(self.tokenizer(passage_text_for_bm25(p.title, p.text)))
                    if n % 500 == 499:
                        adv(500)
                adv(len(chosen) % 500)
            report.seconds["bm25"] = time.perf_counter() - t
            t = time.perf_counter()
            stored = int(self.meta(conn, "n_passages"))
            rebuild = len(chosen) >= 1000 and len(chosen) >= BULK_REBUILD_SHARE * stored
            if rebuild:
                conn.execute("DROP INDEX passages_embedding_hnsw")
            with conn.cursor().copy("COPY passages (id, doc_id, title, text, metadata, content_hash, doc_len, "
                                    "embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "text", "text", "jsonb", "text", "int4", "vector"])
                for (p, h), toks, v in zip(chosen, tokens, vecs, strict=True):
                    copy.write_row([p.id, p.doc_id or p.id, p.title, p.text,
                                    Jsonb(p.metadata), h, len(toks), v])
            row_of = dict(conn.execute("SELECT id, prow FROM passages WHERE id = ANY(%s)",
                                       ([p.id for p, _ in chosen],)).fetchall())
            added = [PassageRow(int(row_of[p.id]), p.id, p.title, p.text) for p, _ in chosen]
            report.seconds["passages"] = time.perf_counter() - t
            t = time.perf_counter()
            self._add_postings(conn, [(r.row, toks) for r, toks in zip(added, tokens, strict=True)])
            report.seconds["bm25_tables"] = time.perf_counter() - t
            t = time.perf_counter()
            known = {r.row: ner[r.id] for r in added if ner is not None and r.id in ner}
            self._rewrite_graph(conn, added, [], known, progress)
            report.seconds["graph"] = time.perf_counter() - t
            if rebuild:
                t = time.perf_counter()
                d = self.config.dense
                conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
                conn.execute(f"CREATE INDEX passages_embedding_hnsw ON passages USING hnsw "
                             f"(embedding vector_cosine_ops) WITH (m = {int(d.hnsw_m)}, "
                             f"ef_construction = {int(d.hnsw_ef_construction)})")
                report.seconds["hnsw"] = time.perf_counter() - t
            self._bump(conn, len(added), sum(len(x) for x in tokens))
        if rebuild:
            t = time.perf_counter()
            self._vacuum()
            report.seconds["vacuum"] = time.perf_counter() - t
        report.added = len(added)
        self._retrievers = {}
        return report

    def _vacuum(self) -> None:
        """After a bulk load: visibility map and planner statistics, so postings are read by index-only
        scans and plans fit the data (autovacuum would get there too, later)."""
        with _connect(self.dsn) as conn:
            conn.execute("SET statement_timeout = 0")
            for table in ("passages", "bm25_terms", "bm25_postings", "graph_ner", "entities", "mentions",
                          "entity_surfaces"):
                conn.execute(f"VACUUM (ANALYZE) {schema.SCHEMA}.{table}")

    def delete(self, ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete passages by id in one transaction; unknown ids are an error and nothing is deleted."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            raise InputError("no passage ids given to delete")
        report = DeleteReport()
        with self._write() as conn:
            found = dict(conn.execute("SELECT id, prow FROM passages WHERE id = ANY(%s)", (ids,)).fetchall())
            missing = [i for i in ids if i not in found]
            if missing:
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                raise InputError(f"{len(missing)} id(s) not in the index {self.path}: {shown}; nothing was deleted")
            removed = sorted(int(r) for r in found.values())
            t = time.perf_counter()
            # terms only the removed passages use go first; the others' df drop by their share
            conn.execute("DELETE FROM bm25_terms t USING (SELECT tid, count(*) AS n FROM bm25_postings "
                         "WHERE prow = ANY(%s) GROUP BY tid) c WHERE t.tid = c.tid AND t.df = c.n", (removed,))
            conn.execute("UPDATE bm25_terms t SET df = t.df - c.n FROM (SELECT tid, count(*) AS n FROM bm25_postings "
                         "WHERE prow = ANY(%s) GROUP BY tid) c WHERE t.tid = c.tid AND t.df > c.n", (removed,))
            lost = _scalar(conn.execute("SELECT coalesce(sum(doc_len), 0) FROM passages WHERE prow = ANY(%s)",
                                        (removed,)))
            conn.execute("DELETE FROM passages WHERE prow = ANY(%s)", (removed,))  # cascades to postings, NER
            report.seconds["passages"] = time.perf_counter() - t
            t = time.perf_counter()
            self._rewrite_graph(conn, [], removed, {}, progress or NullProgress())
            report.seconds["graph"] = time.perf_counter() - t
            self._bump(conn, -len(removed), -int(lost))
        report.deleted = len(removed)
        self._retrievers = {}
        return report

    def _bump(self, conn: psycopg.Connection, passages: int, tokens: int) -> None:
        conn.execute("UPDATE meta SET value = to_jsonb((value::text)::bigint + %s) WHERE key = 'n_passages'",
                     (passages,))
        conn.execute("UPDATE meta SET value = to_jsonb((value::text)::bigint + 1) WHERE key = 'generation'")
        conn.execute("UPDATE meta SET value = jsonb_build_object('n_docs', (value->>'n_docs')::bigint + %s, "
                     "'total_len', (value->>'total_len')::bigint + %s) WHERE key = 'bm25_stats'", (passages, tokens))
        conn.execute("UPDATE meta SET value = to_jsonb(%s::text) WHERE key = 'updated'",
                     (datetime.now(UTC).isoformat(timespec="seconds"),))

    @staticmethod
    def _add_postings(conn: psycopg.Connection, docs: list[tuple[int, list[str]]]) -> None:
        df: Counter[str] = Counter()
        per_doc = []
        for row, toks in docs:
            counts = Counter(toks)
            df.update(counts.keys())
            per_doc.append((row, len(toks), counts))
        if not df:
            return
        terms = sorted(df)
        conn.execute("INSERT INTO bm25_terms (term, df) SELECT * FROM unnest(%s::text[], %s::int[]) "
                     "ON CONFLICT (term) DO UPDATE SET df = bm25_terms.df + EXCLUDED.df",
                     (terms, [df[t] for t in terms]))
        tid: dict[str, int] = dict(conn.execute("SELECT term, tid FROM bm25_terms WHERE term = ANY(%s)",
                                                (terms,)).fetchall())
        with conn.cursor().copy("COPY bm25_postings (tid, prow, tf, dl) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "int8", "int4", "int4"])
            for row, dl, counts in per_doc:
                for term, tf in counts.items():
                    copy.write_row((tid[term], row, tf, dl))

    def _rewrite_graph(self, conn: psycopg.Connection, added: list[PassageRow], removed: list[int],
                       known: dict[int, tuple[str, ...]], progress: Progress) -> None:
        """Recompute the entity graph of the new passage set (as the embedded store does: mention
        matching runs over all passages, NER only on passages without a stored result) and replace
        the entity tables with it."""
        stored: NerCache = {int(r): (int(c), tuple(s)) for r, c, s in
                            conn.execute("SELECT prow, crc, surfaces FROM graph_ner").fetchall()}
        cache = dict(stored)
        for r in removed:
            cache.pop(int(r), None)
        by_row = {p.row: p for p in added}
        for row, surfaces in known.items():
            cache[row] = (text_checksum(by_row[row].text), tuple(surfaces))
        base = EntityGraph(self.config.graph, [], [], sp.csr_array((0, 0), dtype=np.int8), [],
                           np.zeros(0, np.int64), cache)
        all_rows = lambda: [PassageRow(int(r), i, t, x) for r, i, t, x in  # noqa: E731
                            conn.execute("SELECT prow, id, title, text FROM passages ORDER BY prow").fetchall()]
        with progress.task("graph: entities", len([p for p in added if p.row not in known])) as adv:
            graph = base.update([p for p in added if p.row not in known], [], all_rows, adv)
        ner_new = {r: v for r, v in graph.ner.items() if stored.get(r) != v}
        gone = [r for r in stored if r not in graph.ner]
        if gone:
            conn.execute("DELETE FROM graph_ner WHERE prow = ANY(%s)", (gone,))
        if ner_new:
            conn.execute("DELETE FROM graph_ner WHERE prow = ANY(%s)", (list(ner_new),))
            with conn.cursor().copy("COPY graph_ner (prow, crc, surfaces) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "int8", "text[]"])
                for r, (crc, surfaces) in ner_new.items():
                    copy.write_row((r, crc, list(surfaces)))
        m = graph.matrix.tocoo()
        degree = np.bincount(m.col, minlength=graph.n_entities) if graph.n_entities else np.zeros(0, np.int64)
        conn.execute("DELETE FROM mentions")
        conn.execute("DELETE FROM entities")
        conn.execute("DELETE FROM entity_surfaces")
        with conn.cursor().copy("COPY entities (eid, key, degree) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "text", "int4"])
            for e, key in enumerate(graph.entity_keys):
                copy.write_row((e, key, int(degree[e])))
        with conn.cursor().copy("COPY mentions (prow, eid, kind) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int4", "int2"])
            for r, e, k in zip(m.row.tolist(), m.col.tolist(), m.data.tolist(), strict=True):
                copy.write_row((r, e, k))
        with conn.cursor().copy("COPY entity_surfaces (surface, eid) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "int4"])
            for s, e in zip(graph.query_surfaces, graph.query_surface_entities.tolist(), strict=True):
                copy.write_row((s, e))
        conn.execute("UPDATE meta SET value = to_jsonb(%s::int) WHERE key = 'graph_max_surface'",
                     (max((len(s) for s in graph.query_surfaces), default=0),))


def _connect(dsn: str) -> psycopg.Connection:
    try:
        return psycopg.connect(dsn, connect_timeout=int(CONNECT_TIMEOUT_S), autocommit=True)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"cannot connect to PostgreSQL at {redact(dsn)}: {str(exc).strip()}") from exc


def _scalar(cur: psycopg.Cursor[Any]) -> Any:
    """The first column of the one row an aggregate query returns."""
    row = cur.fetchone()
    if row is None:
        raise AssertionError("an aggregate query returned no row")
    return row[0]


def _library_generation(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'query_library_generation'").fetchone()
    return 0 if row is None else int(row[0])


def _lock(conn: psycopg.Connection) -> None:
    conn.execute(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT_S)}s'")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK_KEY,))
    except psycopg.errors.LockNotAvailable as exc:
        raise InputError(f"the index is being written by another process; gave up after {LOCK_TIMEOUT_S:.0f} s") \
            from exc
