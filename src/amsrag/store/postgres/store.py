"""The PostgreSQL + pgvector index: the same PassageIndex as the embedded store, in a database.

Passages, their vectors (pgvector, HNSW with cosine), BM25 term and posting tables and the
embedded store's segmented BM25 index as blobs (scored in-process, see bm25_blobs.py), the entity
graph (entities, mentions), each document's source fingerprint, the vectors staged by an ingest
and the query library live in the `amsrag` schema. Every add, document put, delete, repair or
library save is one transaction, serialised across processes by an advisory lock (staging vectors
is a short transaction of its own, outside the lock), so several amsrag processes can share one
database and see each other's writes as soon as they commit. Reads go through a psycopg pool; a
failed read (server down, connection dropped) is retried once within the request timeout and then
reported as `StoreUnavailableError`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
import psycopg
import scipy.sparse as sp
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import DIMENSION, Encoder, passage_text_for_embedding
from amsrag.embed.factory import encoder_for
from amsrag.errors import AmsragError, IndexBusyError, IndexMismatchError, IndexNotFoundError, InputError
from amsrag.filters import Where
from amsrag.progress import NullProgress, Progress
from amsrag.retrieve.bm25 import BM25Index, BM25Tokenizer, passage_text_for_bm25
from amsrag.retrieve.entities import SPACELESS_CLASS
from amsrag.retrieve.entities_zh import is_mostly_han
from amsrag.retrieve.filtered import AllowedRows
from amsrag.retrieve.graph import EntityGraph, NerCache, text_checksum
from amsrag.store.documents import Document, DocumentInfo, DocumentMeta, PutReport, check_documents, plan_put
from amsrag.store.health import CheckReport, RepairReport
from amsrag.store.postgres import bm25_blobs, graph_state, schema
from amsrag.store.postgres.bm25_blobs import BM25State
from amsrag.store.postgres.connection import (
    CONNECT_TIMEOUT_S,
    StoreUnavailableError,
    configure_connection,
    connect,
    pool_limits,
    redact,
)
from amsrag.store.postgres.graph_state import GraphCache
from amsrag.store.postgres.rows import RowNames
from amsrag.store.query_library import QueryLibrary
from amsrag.store.writes import (
    DeleteReport,
    IngestReport,
    expected_params,
    ids_to_delete,
    param_differences,
    plan_insert,
    refusing_differences,
    stored_metadata,
    validate_passages,
    with_legacy_tokenizer,
    zh_graph_problem,
)
from amsrag.structured.catalog import TableDeleteReport, TableWriteReport
from amsrag.structured.table import Table
from amsrag.themes.model import Themes
from amsrag.types import Passage, PassageRow
from amsrag.version import INDEX_FORMAT_VERSION, __version__

T = TypeVar("T")
ALLOWED_KEPT = 32  # resolved filters kept per store (each a sorted row array)
REQUEST_TIMEOUT_S = 10.0  # a read (with its one retry) gives up after this
LOCK_TIMEOUT_S = 60.0
BULK_REBUILD_SHARE = 0.5  # an add at least this large (vs. stored passages) rebuilds HNSW after loading
LOOKUP_CHUNK = 20_000  # content hashes per lookup statement
TABLES_RECHECK_S = 5.0  # an index without tables looks for the table schema again after this long
HNSW_INDEX = "passages_embedding_hnsw"
COMPONENTS = ("bm25", "dense", "graph")  # what `check` verifies and `repair` rebuilds
NORM_TOLERANCE = 1e-3  # a stored vector's norm may differ this much from 1
CHECK_SAMPLE = 200  # passages whose postings `check` compares with a fresh tokenisation
REPAIR_PAGE = 2000  # passages per step of a BM25 rebuild


class _Stored:
    """What `plan_insert` and `plan_put` ask the passage table, answered by PostgreSQL."""

    @staticmethod
    def existing(conn: psycopg.Connection, ids: Sequence[str], hashes: Sequence[str]
                 ) -> tuple[dict[str, str], dict[str, str]]:
        by_id: dict[str, str] = dict(conn.execute("SELECT id, content_hash FROM passages WHERE id = ANY(%s)",
                                                  (list(ids),)).fetchall())
        by_hash: dict[str, str] = dict(conn.execute(
            "SELECT content_hash, id FROM passages WHERE content_hash = ANY(%s)", (list(hashes),)).fetchall())
        return by_id, by_hash

    @staticmethod
    def document_rows(conn: psycopg.Connection, doc_ids: Sequence[str]) -> list[tuple[int, str, str, str]]:
        """(row, passage id, doc_id, content hash) of every stored passage of the given documents."""
        return [(int(r), i, d, h) for r, i, d, h in conn.execute(
            "SELECT prow, id, doc_id, content_hash FROM passages WHERE doc_id = ANY(%s) ORDER BY prow",
            (list(doc_ids),)).fetchall()]


@dataclass
class _Change:
    """What `_apply` did."""

    added: list[PassageRow]
    removed: int
    embedded: int  # inserted passages embedded now (the others had a given, staged or stored vector)
    bulk: bool  # the HNSW index was rebuilt after loading (vacuum after the commit)
    bm25: BM25State | None = field(default=None)  # the BM25 index as the write left it (cached once committed)


def _record_documents(conn: psycopg.Connection, doc_hashes: Mapping[str, tuple[str, str]]) -> None:
    """Record (fingerprint, source) of documents written in full."""
    if doc_hashes:
        ids = list(doc_hashes)
        conn.execute("INSERT INTO documents (doc_id, content_hash, source) "
                     "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) ON CONFLICT (doc_id) DO UPDATE "
                     "SET content_hash = EXCLUDED.content_hash, source = EXCLUDED.source, updated = now()",
                     (ids, [doc_hashes[d][0] for d in ids], [doc_hashes[d][1] for d in ids]))


def _forget_documents(conn: psycopg.Connection, doc_ids: Iterable[str]) -> None:
    """Drop the recorded fingerprint of documents changed passage by passage (their title, time and tags
    stay); a document without passages left (call this after deleting them) loses its row."""
    ids = list(doc_ids)
    if ids:
        conn.execute("DELETE FROM documents d WHERE d.doc_id = ANY(%s) AND NOT EXISTS "
                     "(SELECT 1 FROM passages p WHERE p.doc_id = d.doc_id)", (ids,))
        conn.execute("UPDATE documents SET content_hash = '' WHERE doc_id = ANY(%s)", (ids,))


def _put_document_meta(conn: psycopg.Connection, metas: Mapping[str, DocumentMeta]) -> int:
    """Write the metadata of the stored documents among `metas` (a row made for one that has none) and count
    the documents' metadata generation up; how many documents were written."""
    ids = list(metas)
    cur = conn.execute(
        "INSERT INTO documents (doc_id, content_hash, source, title, modified, size, tags) "
        "SELECT m.doc_id, '', '', m.title, m.modified::timestamptz, m.size, "
        "ARRAY(SELECT jsonb_array_elements_text(m.tags)) "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::jsonb[]) "
        "AS m(doc_id, title, modified, size, tags) "
        "WHERE EXISTS (SELECT 1 FROM passages p WHERE p.doc_id = m.doc_id) "
        "ON CONFLICT (doc_id) DO UPDATE SET title = EXCLUDED.title, modified = EXCLUDED.modified, "
        "size = EXCLUDED.size, tags = EXCLUDED.tags",
        (ids, [metas[d].title for d in ids], [metas[d].modified for d in ids], [metas[d].size for d in ids],
         [Jsonb(list(metas[d].tags)) for d in ids]))
    conn.execute("UPDATE meta SET value = to_jsonb((value #>> '{}')::bigint + 1) WHERE key = 'documents_generation'")
    return cur.rowcount


# A document's modification time as the UTC text filters compare (`amsrag.filters.utc_stamp`).
_UTC_STAMP = "to_char(d.modified AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"


class PostgresIndex:
    """Passages + BM25 + vectors + entity graph in PostgreSQL. Use `create` or `open`."""

    backend = "postgres"

    def __init__(self, dsn: str, config: AmsragConfig, pool_size: int | None = None,
                 request_timeout: float = REQUEST_TIMEOUT_S, read_dsn: str | None = None,
                 pool_min: int | None = None) -> None:
        """`read_dsn`: a streaming read replica of `dsn` that serves every read (writes go to `dsn`;
        a replica shows a write once it has replayed it). `pool_size` / `pool_min`: the read pool's
        most and fewest open connections (see `pool_limits`)."""
        self.dsn = dsn
        self.read_dsn = read_dsn or dsn
        self.path = redact(dsn)  # what reports print where the embedded store prints its directory
        self.config = config
        self.request_timeout = request_timeout
        self._encoder: Encoder | None = None
        self.built: dict[str, object] = {}  # what the layers above build over this index (retrievers)
        self._library: tuple[int, QueryLibrary] | None = None  # (query_library_generation, library)
        self.tokenizer = BM25Tokenizer(config.bm25)  # BM25's, shared with its retriever
        self.row_names = RowNames()  # (id, title) of passage rows met, for `describe_rows`
        self._bm25: BM25State | None = None  # the in-process BM25 index, as of its bm25_generation
        self._bm25_lock = threading.Lock()
        self._allowed: dict[tuple[int, int, Where], AllowedRows] = {}  # (generations, filter): its rows
        self.graph_cache = GraphCache()  # the in-process entity graph, as of its graph_generation
        self._tables: Any = None  # the PgTableStore, opened on first use
        self._tables_checked = 0.0  # when the table schema was last found missing (monotonic seconds)
        self._themes: tuple[int, Themes | None] | None = None  # (themes_generation, themes)
        kwargs = {"connect_timeout": int(CONNECT_TIMEOUT_S), "autocommit": True,
                  "options": f"-c search_path={schema.SEARCH_PATH.replace(' ', '')} "
                             f"-c statement_timeout={int(request_timeout * 1000)}"}
        self.pool_min, self.pool_max = pool_limits(pool_min, pool_size)
        self.pool = ConnectionPool(self.read_dsn, min_size=self.pool_min, max_size=self.pool_max, kwargs=kwargs,
                                   configure=configure_connection, timeout=request_timeout,
                                   open=False, name="amsrag")
        self.pool.open(wait=False)

    # ---------------------------------------------------------------- opening
    @classmethod
    def create(cls, dsn: str, config: AmsragConfig | None = None, **kwargs: Any) -> PostgresIndex:
        config = config or AmsragConfig()
        if config.bm25.method != "lucene":
            raise InputError(f"the postgres backend scores BM25 with the lucene method only, not "
                             f"{config.bm25.method!r}")
        with connect(dsn) as conn, conn.transaction():
            _lock(conn)
            if schema.installed_version(conn) is not None:
                raise InputError(f"an amsrag index already exists in {redact(dsn)}: add passages with "
                                 f"`amsrag index add`, or use another database")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            d = config.dense
            schema.migrate(conn, {"dim": DIMENSION, "m": d.hnsw_m, "ef_construction": d.hnsw_ef_construction,
                                  "k1": float(config.bm25.k1), "b": float(config.bm25.b)}, __version__,
                           {5: lambda c: bm25_blobs.build(c, config.bm25)})
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
        with connect(dsn) as conn:
            version = schema.installed_version(conn)
            if version is None:
                raise IndexNotFoundError(f"no amsrag index in {redact(dsn)}: build one with `amsrag index build "
                                         f"INPUT... --index URL` or copy one with `amsrag index export`")
            if version < schema.CURRENT_VERSION:
                with conn.transaction():
                    _lock(conn)
                    row = conn.execute(f"SELECT value FROM {schema.SCHEMA}.meta WHERE key = 'config'").fetchone()
                    stored = AmsragConfig.from_toml(row[0], source=f"{redact(dsn)} meta.config") if row \
                        else AmsragConfig()
                    schema.migrate(conn, {"dim": DIMENSION, "k1": float(stored.bm25.k1),
                                          "b": float(stored.bm25.b)}, __version__,
                                   {5: lambda c: bm25_blobs.build(c, stored.bm25)})
            elif version > schema.CURRENT_VERSION:
                schema.migrate(conn, {}, __version__)  # raises: newer than this amsrag
            conn.execute(f"SET search_path = {schema.SEARCH_PATH}")
            meta: dict[str, Any] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format_version") != INDEX_FORMAT_VERSION:
            raise IndexMismatchError(
                f"index in {redact(dsn)} has format version {meta.get('format_version')!r}; this amsrag "
                f"({__version__}) reads version {INDEX_FORMAT_VERSION}. Rebuild it.")
        config = with_legacy_tokenizer(AmsragConfig.from_toml(meta["config"], source=f"{redact(dsn)} meta.config"),
                                       meta["params"].get("bm25", {}))
        for name, params in expected_params(config).items():
            diffs = refusing_differences(name, meta["params"].get(name, {}), params)
            if diffs:
                raise IndexMismatchError(
                    f"index in {redact(dsn)} was built with different {name} settings than this installation "
                    f"provides ({'; '.join(diffs)}). It cannot be used as is: rebuild it.")
        return cls(dsn, config, **kwargs)

    def close(self) -> None:
        if self._tables is not None:
            self._tables.close()
            self._tables = None
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
                if attempt == 1 and remaining > 0.05:
                    # connections are not tested when lent (that costs a round trip per read): after a
                    # failure, test the idle ones so the retry does not get another dead one
                    with contextlib.suppress(Exception):
                        self.pool.check()
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

    def _primary(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run `fn` where writes go (a pooled connection, or a new one to `dsn` when reads are served by
        a replica): for what a writer must see exactly, such as the vectors it has just staged."""
        if self.read_dsn == self.dsn:
            return self.read(fn)
        conn = connect(self.dsn)
        try:
            conn.execute(f"SET search_path = {schema.SEARCH_PATH}")
            register_vector(conn)
            return fn(conn)
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection]:
        """One transaction holding the cross-process write lock; no statement timeout (bulk work)."""
        conn = connect(self.dsn)
        try:
            with conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 0")
                _lock(conn)
                conn.execute(f"SET LOCAL search_path = {schema.SEARCH_PATH}")
                register_vector(conn)
                yield conn
        finally:
            conn.close()

    # ---------------------------------------------------------------- the in-process BM25 index
    def bm25_index(self, conn: psycopg.Connection) -> BM25Index:
        """The BM25 index as `conn` (a read connection) sees it: the cached copy while its generation is
        the stored one (one lookup), else the stored index read again, only the pieces not cached."""
        return self.bm25_state(conn, bm25_blobs.generation(conn)).index

    def bm25_state(self, conn: psycopg.Connection, generation: int | None = None) -> BM25State:
        """The cached BM25 index when it is at `generation` (None: whichever is cached, no lookup), else
        the stored index as `conn` (a read connection) sees it, read again (only the pieces not cached)."""
        state = self._bm25
        if state is not None and (generation is None or state.generation == generation):
            return state
        with self._bm25_lock:
            state = self._bm25
            if state is not None and generation is not None and state.generation == generation:
                return state  # another thread has just read it
            with conn.transaction():  # the generation and the pieces from one snapshot
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                state = bm25_blobs.load(conn, self.config.bm25, self._bm25)
            self._bm25 = state
        return state

    def _bm25_for_write(self, conn: psycopg.Connection) -> BM25State:
        """The stored BM25 index, in a write transaction (which holds the write lock) before it changes it."""
        state = self._bm25
        if state is not None and state.generation == bm25_blobs.generation(conn):
            return state
        with self._bm25_lock:
            state = self._bm25 = bm25_blobs.load(conn, self.config.bm25, self._bm25)
        return state

    # ---------------------------------------------------------------- components
    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = encoder_for(self.config.embedding)
        return self._encoder

    def allowed_rows(self, where: Where) -> AllowedRows:
        """The rows `where` allows, read from the passages' document keys and metadata once per generation and
        filter (the same matching as the embedded store's, in Python: one statement over every passage)."""
        def run(c: psycopg.Connection) -> AllowedRows:
            with c.transaction():  # the generation and the passages from one snapshot
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                key = (int(self.meta(c, "generation") or 0), int(self.meta(c, "documents_generation") or 0), where)
                found = self._allowed.get(key)
                if found is None:
                    found = AllowedRows.resolve(where, c.execute(
                        f"SELECT p.prow, p.doc_id, p.metadata->>'source', p.metadata->>'type', {_UTC_STAMP}, d.tags "
                        "FROM passages p LEFT JOIN documents d ON d.doc_id = p.doc_id").fetchall())
            if len(self._allowed) >= ALLOWED_KEPT:
                self._allowed.clear()
            self._allowed[key] = found
            return found

        return self.read(run)

    def update_config(self, config: AmsragConfig) -> None:
        """Replace query-time settings; settings the stored tables depend on need a rebuild."""
        old, new = expected_params(self.config), expected_params(config)
        changed = [f"{n}: {'; '.join(d)}" for n in old if (d := param_differences(old[n], new[n]))]
        if changed:
            raise InputError(f"these settings need a rebuild, not a config update: {' | '.join(changed)}")
        with self._write() as conn:
            conn.execute("UPDATE meta SET value = %s WHERE key = 'config'", (json.dumps(config.to_toml()),))
        self.config = config
        self.built = {}
        self._bm25 = None  # loaded again with the new settings

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int(self.read(lambda c: self.meta(c, "n_passages")))

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        rows = [int(r) for r in rows]
        if not rows:
            return []
        found = {r: name for r in rows if (name := self.row_names.get(r)) is not None}
        missing = sorted(set(rows) - found.keys())
        if missing:
            fetched = {int(r): (str(i), str(t)) for r, i, t in self.read(lambda c: c.execute(
                "SELECT prow, id, title FROM passages WHERE prow = ANY(%s)", (missing,)).fetchall())}
            self.row_names.update(fetched)
            found.update(fetched)
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
            staged = _scalar(c.execute("SELECT count(*) FROM staged_vectors s WHERE NOT EXISTS "
                                       "(SELECT 1 FROM passages p WHERE p.content_hash = s.content_hash)"))
            return {"index": self.path, "backend": self.backend, "passages": int(meta["n_passages"]),
                    "documents": int(docs), "generation": int(meta["generation"]),
                    "embedding_model": meta["params"]["dense"]["model_id"], "dense_search": "hnsw (pgvector)",
                    "bm25": {"method": self.config.bm25.method, "vocabulary": int(vocab),
                             "tokens": int(meta["bm25_stats"]["total_len"])},
                    "graph": {"entities": int(ents), "edges": int(edges)}, "query_library": int(library),
                    "staged_vectors": int(staged),
                    "disk_bytes": int(size),
                    "schema_version": version, "created": meta["created"], "updated": meta["updated"]}
        return self.read(q)

    # ---------------------------------------------------------------- the query library
    # ---------------------------------------------------------------- tables and themes
    def tables(self) -> Any:
        """The index's tables (`PgTableStore`, schema amsrag_tables), or None while the database holds none
        (looked for again at most every TABLES_RECHECK_S seconds)."""
        from amsrag.store.postgres.tables import PgTableStore

        if self._tables is None:
            if time.monotonic() - self._tables_checked < TABLES_RECHECK_S:
                return None
            try:
                self._tables = PgTableStore.open(self.dsn)
            except IndexNotFoundError:
                self._tables_checked = time.monotonic()
                return None
        return self._tables

    def put_tables(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        from amsrag.store.postgres.tables import PgTableStore

        if self._tables is None:
            self._tables = PgTableStore.open(self.dsn, create=True)
        report: TableWriteReport = self._tables.add(tables, replace=replace)
        return report

    def delete_tables(self, table_ids: Sequence[str]) -> TableDeleteReport:
        store = self.tables()
        if store is None:
            return TableDeleteReport(0, ())
        report: TableDeleteReport = store.delete(table_ids)
        return report

    def stored_rows(self) -> list[int]:
        return [int(r) for (r,) in self.read(lambda c: c.execute("SELECT prow FROM passages ORDER BY prow").fetchall())]

    def themes(self) -> Themes | None:
        """The corpus themes saved in meta (`themes`: the npz base64-encoded beside its card), re-read when
        another process saved newer ones (`themes_generation`)."""
        gen = int(self.read(lambda c: self.meta(c, "themes_generation")) or 0)
        cached = self._themes
        if cached is not None and cached[0] == gen:
            return cached[1]
        stored = self.read(lambda c: self.meta(c, "themes")) if gen else None
        themes = _themes_from_meta(stored) if stored else None
        self._themes = (gen, themes)
        return themes

    def save_themes(self, themes: Themes) -> None:
        value = _themes_to_meta(themes)
        with self._write() as conn:
            gen = int(self.meta(conn, "themes_generation") or 0) + 1
            conn.execute("INSERT INTO meta (key, value) VALUES ('themes', %s), ('themes_generation', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (Jsonb(value), Jsonb(gen)))
        self._themes = None

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
            vectors: np.ndarray | None = None, doc_hashes: Mapping[str, tuple[str, str]] | None = None,
            ner: dict[str, tuple[str, ...]] | None = None) -> IngestReport:
        """Add passages in one transaction. Identical re-adds and duplicate content are skipped.

        `vectors`: the passages' embeddings by this index's model, aligned with `passages` (no
        re-embedding); without them, vectors staged for the same content are reused and only the rest
        is embedded. `doc_hashes` ({doc_id: (fingerprint, source)}) records the documents this add
        completes; the fingerprint of any other document it adds to is forgotten. `ner`: NER surfaces
        per passage id already computed by the same spaCy model (an export from the embedded store
        passes them so spaCy does not run again).
        """
        progress = progress or NullProgress()
        items = validate_passages(list(passages))
        if vectors is not None and len(vectors) != len(items):
            raise InputError(f"{len(items)} passages but {len(vectors)} vectors")
        report = IngestReport(received=len(items))
        doc_hashes = dict(doc_hashes or {})
        with self._write() as conn:
            new, report.skipped_existing, report.skipped_duplicate_content = plan_insert(_Stored(), conn, items)
            chosen = [items[i] for i in new]
            _forget_documents(conn, {p.doc_id or p.id for p, _ in chosen} - set(doc_hashes))
            _record_documents(conn, doc_hashes)
            if not chosen:
                return report  # commits the fingerprints (if any); the generation stays
            given = None if vectors is None else np.asarray(vectors, dtype=np.float32)[new]
            change = self._apply(conn, [], chosen, given, progress, report.seconds, ner)
        self._written(change, report.seconds)
        report.added, report.embedded = len(change.added), change.embedded
        return report

    def put_documents(self, documents: Sequence[Document], progress: Progress | None = None,
                      delete: Sequence[str] = ()) -> PutReport:
        """Make each document hold exactly its given passages and delete the documents in `delete`, in
        one transaction: new documents are added, changed ones replaced (passages with the same id and
        content stay; the vectors of staged content and of removed passages are reused, only new
        content is embedded)."""
        docs = check_documents(list(documents))
        delete = list(dict.fromkeys(delete))
        if not docs and not delete:
            raise InputError("no documents given to put or delete")
        validate_passages([p for d in docs for p in d.passages])
        progress = progress or NullProgress()
        report = PutReport(documents=len(docs))
        with self._write() as conn:
            plan = plan_put(_Stored(), conn, docs, delete)
            _record_documents(conn, {d.doc_id: (d.content_hash, d.source) for d in docs})
            report.deleted_documents = len(delete)
            report.kept, report.created = plan.kept, plan.created
            report.skipped_duplicate_content = plan.skipped_duplicate_content
            report.unchanged = len(plan.unchanged)
            if not plan.removed_rows and not plan.insert:
                return report  # commits the fingerprints; the generation stays
            change = self._apply(conn, plan.removed_rows, plan.insert, None, progress, report.seconds)
            _forget_documents(conn, delete)
        self._written(change, report.seconds)
        report.added, report.removed = len(change.added), change.removed
        report.embedded = change.embedded
        report.reused_vectors = len(change.added) - change.embedded
        return report

    def delete_documents(self, doc_ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete whole documents in one transaction; an unknown doc_id is an error and nothing is deleted."""
        doc_ids = ids_to_delete(doc_ids, "document")
        report = DeleteReport()
        with self._write() as conn:
            found = _Stored.document_rows(conn, doc_ids)
            missing = sorted(set(doc_ids) - {d for _, _, d, _ in found})
            if missing:
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                raise InputError(f"{len(missing)} document(s) not in the index {self.path}: {shown}; "
                                 f"nothing was deleted")
            change = self._apply(conn, sorted(r for r, _, _, _ in found), [], None, progress or NullProgress(),
                                 report.seconds)
            _forget_documents(conn, doc_ids)
        self._written(change, report.seconds)
        report.deleted, report.documents = change.removed, len(doc_ids)
        return report

    def delete(self, ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete passages by id in one transaction; unknown ids are an error and nothing is deleted.
        The documents they belong to lose their recorded fingerprint (changed passage by passage)."""
        ids = ids_to_delete(ids, "passage")
        report = DeleteReport()
        with self._write() as conn:
            found = {i: (int(r), d) for i, r, d in conn.execute(
                "SELECT id, prow, doc_id FROM passages WHERE id = ANY(%s)", (ids,)).fetchall()}
            missing = [i for i in ids if i not in found]
            if missing:
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                raise InputError(f"{len(missing)} id(s) not in the index {self.path}: {shown}; nothing was deleted")
            change = self._apply(conn, sorted(r for r, _ in found.values()), [], None, progress or NullProgress(),
                                 report.seconds)
            _forget_documents(conn, {d for _, d in found.values()})
        self._written(change, report.seconds)
        report.deleted = change.removed
        return report

    def documents(self, prefix: str | None = None) -> dict[str, DocumentInfo]:
        """Every document with stored passages (those whose doc_id or recorded source starts with
        `prefix`, when given), by doc_id; content_hash is "" when no fingerprint is recorded."""
        def q(c: psycopg.Connection) -> list[tuple[Any, ...]]:
            return c.execute(
                f"SELECT p.doc_id, count(*), coalesce(d.content_hash, ''), coalesce(d.source, ''), d.title, "
                f"{_UTC_STAMP}, d.size, d.tags "
                "FROM passages p LEFT JOIN documents d ON d.doc_id = p.doc_id "
                "WHERE %(prefix)s::text IS NULL OR starts_with(p.doc_id, %(prefix)s) "
                "OR starts_with(d.source, %(prefix)s) "
                "GROUP BY p.doc_id, d.doc_id ORDER BY p.doc_id COLLATE \"C\"",
                {"prefix": prefix or None}).fetchall()

        return {d: DocumentInfo(d, int(n), h, src, title, modified, None if size is None else int(size),
                                tuple(tags or ()))
                for d, n, h, src, title, modified, size, tags in self._primary(q)}

    def put_document_meta(self, metas: Mapping[str, DocumentMeta]) -> int:
        """Rewrite the rows of stored documents with their title, modification time, size and tags (their
        passages untouched: the passages' generation stays); how many were written."""
        if not metas:
            return 0
        with self._write() as conn:
            return _put_document_meta(conn, metas)

    def unembedded(self, hashes: Sequence[str]) -> list[str]:
        """The content hashes among `hashes` with neither a stored passage nor a staged vector (each
        once, in order)."""
        wanted = list(dict.fromkeys(hashes))

        def q(c: psycopg.Connection) -> set[str]:
            out: set[str] = set()
            for start in range(0, len(wanted), LOOKUP_CHUNK):
                out.update(h for (h,) in c.execute(
                    "SELECT h FROM unnest(%s::text[]) AS x(h) "
                    "WHERE NOT EXISTS (SELECT 1 FROM passages p WHERE p.content_hash = x.h) "
                    "AND NOT EXISTS (SELECT 1 FROM staged_vectors s WHERE s.content_hash = x.h)",
                    (wanted[start : start + LOOKUP_CHUNK],)).fetchall())
            return out

        missing = self._primary(q) if wanted else set()
        return [h for h in wanted if h in missing]

    def count_staged(self, hashes: Sequence[str]) -> int:
        """How many of `hashes` have a staged vector but no stored passage (an interrupted ingest's work)."""
        wanted = list(dict.fromkeys(hashes))

        def q(c: psycopg.Connection) -> int:
            return sum(int(_scalar(c.execute(
                "SELECT count(*) FROM staged_vectors s WHERE s.content_hash = ANY(%s) "
                "AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.content_hash = s.content_hash)",
                (wanted[start : start + LOOKUP_CHUNK],)))) for start in range(0, len(wanted), LOOKUP_CHUNK))

        return self._primary(q) if wanted else 0

    def stage_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Commit vectors for content not stored yet (an ingest's progress, kept if it is killed): one
        short transaction of its own, without the write lock (a long write elsewhere does not hold it
        up) and without a new generation (no passage changes)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(hashes), DIMENSION):
            raise InputError(f"{len(hashes)} hashes need a ({len(hashes)}, {DIMENSION}) array, got {vectors.shape}")
        if not np.all(np.isfinite(vectors)):
            raise InputError("staged vectors must be finite numbers")
        # in content-hash order, as `_apply` locks the rows it deletes: concurrent writers cannot deadlock
        rows = sorted({h: v for h, v in zip(hashes, vectors, strict=True)}.items())
        if not rows:
            return

        def upsert(c: psycopg.Connection) -> None:
            with c.transaction(), c.cursor() as cur:
                cur.executemany(
                    "INSERT INTO staged_vectors (content_hash, vector) SELECT %(h)s, %(v)s "
                    "WHERE NOT EXISTS (SELECT 1 FROM passages WHERE content_hash = %(h)s) "
                    "ON CONFLICT (content_hash) DO UPDATE SET vector = EXCLUDED.vector, staged_at = now()",
                    [{"h": h, "v": v} for h, v in rows])

        self._primary(upsert)

    # ---------------------------------------------------------------- the one write path
    def _apply(self, conn: psycopg.Connection, removed: Sequence[int], chosen: Sequence[tuple[Passage, str]],
               vectors: np.ndarray | None, progress: Progress, seconds: dict[str, float],
               ner: Mapping[str, tuple[str, ...]] | None = None) -> _Change:
        """The passage change of every write, in the caller's write transaction: delete the rows
        `removed` (their postings and NER go with them, BM25 document frequencies drop), insert
        `chosen` (vectors: the given ones, else those staged or stored for the same content, else
        embedded now), rewrite the entity graph, update the BM25 statistics and the generation."""
        t = time.perf_counter()
        embedded = 0
        if vectors is None:
            vecs, embedded = self._vectors_for(conn, chosen, progress)
        else:
            vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.shape != (len(chosen), DIMENSION) or not np.all(np.isfinite(vecs)):
            raise InputError(f"vectors must be {len(chosen)} x {DIMENSION} finite numbers, got {vecs.shape}")
        seconds["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        tokens = self._tokenise(chosen, progress)
        seconds["bm25"] = time.perf_counter() - t
        t = time.perf_counter()
        lost = self._delete_rows(conn, removed)
        seconds["delete"] = time.perf_counter() - t
        t = time.perf_counter()
        stored = int(self.meta(conn, "n_passages")) - len(removed)
        rebuild = len(chosen) >= 1000 and len(chosen) >= BULK_REBUILD_SHARE * stored
        if rebuild:
            conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        added = self._insert_rows(conn, chosen, tokens, vecs)
        seconds["passages"] = time.perf_counter() - t
        t = time.perf_counter()
        self._add_postings(conn, [(r.row, toks) for r, toks in zip(added, tokens, strict=True)])
        seconds["bm25_tables"] = time.perf_counter() - t
        t = time.perf_counter()
        old = self._bm25_for_write(conn)
        new = old.index.updated(added, list(removed), tokens_of=tokens)  # tokenised once, above
        bm25 = BM25State(bm25_blobs.write(conn, old.index, new), new, [old.index])
        seconds["bm25_index"] = time.perf_counter() - t
        t = time.perf_counter()
        known = {r.row: tuple(ner[r.id]) for r in added if ner is not None and r.id in ner}
        self._rewrite_graph(conn, added, list(removed), known, progress)
        seconds["graph"] = time.perf_counter() - t
        if rebuild:
            t = time.perf_counter()
            self._create_hnsw(conn)
            seconds["hnsw"] = time.perf_counter() - t
        self._bump(conn, len(added) - len(removed), sum(len(x) for x in tokens) - lost)
        return _Change(added, len(removed), embedded, rebuild, bm25)

    def _written(self, change: _Change, seconds: dict[str, float]) -> None:
        """After a write committed: planner statistics after a bulk load; retrievers read afresh."""
        if change.bulk:
            t = time.perf_counter()
            self._vacuum()
            seconds["vacuum"] = time.perf_counter() - t
        if change.bm25 is not None:
            self._bm25 = change.bm25
        self.built = {}

    def _vectors_for(self, conn: psycopg.Connection, chosen: Sequence[tuple[Passage, str]],
                     progress: Progress) -> tuple[np.ndarray, int]:
        """The vectors of `chosen`: staged, or stored with a passage of the same content (one being
        replaced), else embedded now; and how many were embedded."""
        hashes = [h for _, h in chosen]
        if not hashes:
            return np.zeros((0, DIMENSION), np.float32), 0
        known: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), LOOKUP_CHUNK):
            part = hashes[start : start + LOOKUP_CHUNK]
            for h, v in conn.execute("SELECT content_hash, vector FROM staged_vectors WHERE content_hash = ANY(%s) "
                                     "UNION ALL SELECT content_hash, embedding FROM passages "
                                     "WHERE content_hash = ANY(%s)", (part, part)).fetchall():
                known[h] = np.asarray(v, dtype=np.float32)
        todo = [i for i, h in enumerate(hashes) if h not in known]
        with progress.task("dense: embed", len(todo)) as adv:
            if todo:
                fresh = self.encoder.encode([passage_text_for_embedding(chosen[i][0].title, chosen[i][0].text)
                                             for i in todo], adv)
                known.update({hashes[i]: np.asarray(fresh[j], dtype=np.float32) for j, i in enumerate(todo)})
        return np.stack([known[h] for h in hashes]), len(todo)

    def _tokenise(self, chosen: Sequence[tuple[Passage, str]], progress: Progress) -> list[list[str]]:
        if not chosen:
            return []
        with progress.task("bm25: tokenise", len(chosen)) as adv:
            tokens = []
            for n, (p, _) in enumerate(chosen):
                tokens.append(self.tokenizer(passage_text_for_bm25(p.title, p.text)))
                if n % 500 == 499:
                    adv(500)
            adv(len(chosen) % 500)
        return tokens

    @staticmethod
    def _delete_rows(conn: psycopg.Connection, removed: Sequence[int]) -> int:
        """Delete passage rows (postings and NER cascade; terms only they use go, the others' df drop
        by their share); the BM25 tokens they held."""
        if not removed:
            return 0
        rows = [int(r) for r in removed]
        conn.execute("DELETE FROM bm25_terms t USING (SELECT tid, count(*) AS n FROM bm25_postings "
                     "WHERE prow = ANY(%s) GROUP BY tid) c WHERE t.tid = c.tid AND t.df = c.n", (rows,))
        conn.execute("UPDATE bm25_terms t SET df = t.df - c.n FROM (SELECT tid, count(*) AS n FROM bm25_postings "
                     "WHERE prow = ANY(%s) GROUP BY tid) c WHERE t.tid = c.tid AND t.df > c.n", (rows,))
        lost = _scalar(conn.execute("SELECT coalesce(sum(doc_len), 0) FROM passages WHERE prow = ANY(%s)", (rows,)))
        conn.execute("DELETE FROM passages WHERE prow = ANY(%s)", (rows,))
        return int(lost)

    @staticmethod
    def _insert_rows(conn: psycopg.Connection, chosen: Sequence[tuple[Passage, str]], tokens: list[list[str]],
                     vecs: np.ndarray) -> list[PassageRow]:
        """Insert the passages with their vectors (staged vectors of their content are dropped: stored now)."""
        if not chosen:
            return []
        with conn.cursor().copy("COPY passages (id, doc_id, title, text, metadata, content_hash, doc_len, "
                                "embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "text", "text", "jsonb", "text", "int4", "vector"])
            for (p, h), toks, v in zip(chosen, tokens, vecs, strict=True):
                copy.write_row([p.id, p.doc_id or p.id, p.title, p.text, Jsonb(stored_metadata(p)), h, len(toks), v])
        row_of: dict[str, int] = dict(conn.execute("SELECT id, prow FROM passages WHERE id = ANY(%s)",
                                   ([p.id for p, _ in chosen],)).fetchall())
        # rows locked in content-hash order, as `stage_vectors` writes them: no deadlock between the two
        conn.execute("DELETE FROM staged_vectors WHERE content_hash IN (SELECT content_hash FROM staged_vectors "
                     "WHERE content_hash = ANY(%s) ORDER BY content_hash FOR UPDATE)", ([h for _, h in chosen],))
        return [PassageRow(int(row_of[p.id]), p.id, p.title, p.text) for p, _ in chosen]

    def _create_hnsw(self, conn: psycopg.Connection) -> None:
        d = self.config.dense
        conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
        conn.execute(f"CREATE INDEX {HNSW_INDEX} ON passages USING hnsw (embedding vector_cosine_ops) "
                     f"WITH (m = {int(d.hnsw_m)}, ef_construction = {int(d.hnsw_ef_construction)})")

    def _vacuum(self) -> None:
        """After a bulk load: visibility map and planner statistics, so postings are read by index-only
        scans and plans fit the data (autovacuum would get there too, later)."""
        with connect(self.dsn) as conn:
            conn.execute("SET statement_timeout = 0")
            for table in ("passages", "bm25_terms", "bm25_postings", "graph_ner", "entities", "mentions",
                          "entity_surfaces"):
                conn.execute(f"VACUUM (ANALYZE) {schema.SCHEMA}.{table}")

    # ---------------------------------------------------------------- checking and repair
    def check(self, progress: Progress | None = None) -> CheckReport:
        """Verify the tables against each other, in one read-only snapshot: the passage count and BM25
        statistics in meta, every passage's postings and every term's document frequency (and the
        postings of a sample of passages against their text tokenised again), every stored vector
        finite and unit-norm, the HNSW index present and valid, the entity graph covering every
        passage. PostgreSQL keeps no derived files; `repair` rebuilds the components in `repairable`."""
        report = CheckReport(self.location)
        conn = connect(self.dsn)
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute(f"SET LOCAL search_path = {schema.SEARCH_PATH}")
                self._check(conn, report, progress or NullProgress())
        finally:
            conn.close()
        return report

    def _check(self, conn: psycopg.Connection, report: CheckReport, progress: Progress) -> None:
        report.checked.append(f"schema version {schema.installed_version(conn)}")
        n, total = conn.execute("SELECT count(*), coalesce(sum(doc_len), 0) FROM passages").fetchone() or (0, 0)
        n, total = int(n), int(total)
        with progress.task("check: tables", len(COMPONENTS)) as adv:
            self._check_bm25(conn, report, n, total)
            adv(1)
            self._check_dense(conn, report)
            adv(1)
            self._check_graph(conn, report)
            zh = self._zh_graph_problem(conn)
            if zh is not None:
                report.problem(zh, "graph")
            adv(1)
        staged = _scalar(conn.execute("SELECT count(*) FROM staged_vectors s WHERE NOT EXISTS "
                                      "(SELECT 1 FROM passages p WHERE p.content_hash = s.content_hash)"))
        report.checked.append(f"{n} passages, {staged} staged vector(s)")

    def _check_bm25(self, conn: psycopg.Connection, report: CheckReport, n: int, total: int) -> None:
        report.checked.append("bm25")
        meta: dict[str, Any] = dict(conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('n_passages', 'bm25_stats')").fetchall())
        if meta.get("n_passages") != n:
            report.problem(f"meta: n_passages is {meta.get('n_passages')}, the passages table holds {n}", "bm25")
        stats = meta.get("bm25_stats") or {}
        if (stats.get("n_docs"), stats.get("total_len")) != (n, total):
            report.problem(f"bm25: the collection statistics count {stats.get('n_docs')} passages of "
                           f"{stats.get('total_len')} tokens; the passages hold {n} of {total}", "bm25")
        unposted = _scalar(conn.execute("SELECT count(*) FROM passages p WHERE p.doc_len > 0 AND NOT EXISTS "
                                        "(SELECT 1 FROM bm25_postings po WHERE po.prow = p.prow)"))
        if unposted:
            report.problem(f"bm25: {unposted} passage(s) have no postings", "bm25")
        bad_len = _scalar(conn.execute(
            "SELECT count(*) FROM passages p JOIN (SELECT prow, sum(tf) AS s, min(dl) AS lo, max(dl) AS hi "
            "FROM bm25_postings GROUP BY prow) c ON c.prow = p.prow "
            "WHERE c.s <> p.doc_len OR c.lo <> p.doc_len OR c.hi <> p.doc_len"))
        if bad_len:
            report.problem(f"bm25: the postings of {bad_len} passage(s) do not add up to their length", "bm25")
        bad_df = _scalar(conn.execute(
            "SELECT count(*) FROM bm25_terms t FULL JOIN (SELECT tid, count(*) AS n FROM bm25_postings "
            "GROUP BY tid) c ON c.tid = t.tid WHERE t.df IS DISTINCT FROM c.n"))
        if bad_df:
            report.problem(f"bm25: {bad_df} term(s) have a document frequency other than their number of "
                           f"postings", "bm25")
        share = min(100.0, 200.0 * CHECK_SAMPLE / max(n, 1))
        sample = conn.execute(f"SELECT prow, title, text, doc_len FROM passages TABLESAMPLE BERNOULLI ({share:.6f}) "
                              f"LIMIT {CHECK_SAMPLE}").fetchall()
        stored: dict[int, Counter[str]] = {int(r[0]): Counter() for r in sample}
        for row, term, tf in conn.execute("SELECT po.prow, t.term, po.tf FROM bm25_postings po JOIN bm25_terms t "
                                          "ON t.tid = po.tid WHERE po.prow = ANY(%s)", (list(stored),)).fetchall():
            stored[int(row)][term] = int(tf)
        impact = dict(self.meta(conn, "bm25_impact") or {})
        if impact.get("ref") is None:
            if _scalar(conn.execute("SELECT count(*) FROM bm25_postings")):
                report.problem("bm25: postings without a reference length for their impacts (meta bm25_impact)",
                               "bm25")
        else:  # every posting's impact is its tf part at the reference length (pruning relies on it)
            bad_imp = _scalar(conn.execute(
                "SELECT count(*) FROM bm25_postings WHERE abs(imp - tf / (tf + %(k1)s * (1 - %(b)s + %(b)s * dl "
                "/ %(ref)s))) > 1e-6 * imp + 1e-9",
                {"k1": float(impact["k1"]), "b": float(impact["b"]), "ref": float(impact["ref"])}))
            if bad_imp:
                report.problem(f"bm25: {bad_imp} posting(s) have an impact other than their tf part at the "
                               f"reference length", "bm25")
        self._check_bm25_index(conn, report, n, total)
        differ = 0
        for row, title, text, doc_len in sample:
            tokens = self.tokenizer(passage_text_for_bm25(title, text))
            differ += int(len(tokens) != doc_len or Counter(tokens) != stored[int(row)])
        if differ:
            report.problem(f"bm25: {differ} of {len(sample)} sampled passage(s) have postings that differ from "
                           f"their text tokenised again", "bm25")

    def _check_bm25_index(self, conn: psycopg.Connection, report: CheckReport, n: int, total: int) -> None:
        """The in-process index's pieces: readable, over exactly the stored passages, with their lengths
        and as many (term, passage) pairs as the postings table."""
        try:
            index = bm25_blobs.load(conn, self.config.bm25, None).index
        except (AmsragError, ValueError, KeyError, OSError) as exc:
            report.problem(f"bm25: the index in bm25_blobs cannot be read ({exc})", "bm25")
            return
        rows = np.asarray([int(r) for (r,) in conn.execute("SELECT prow FROM passages ORDER BY prow")], np.int64)
        pairs = int(_scalar(conn.execute("SELECT count(*) FROM bm25_postings")))
        if (index.stats.n_docs, index.stats.total_len) != (n, total) or not np.array_equal(index.rows, rows) \
                or int(index.stats.df.sum()) != pairs:
            report.problem(f"bm25: the index in bm25_blobs holds {len(index.rows)} passages of "
                           f"{index.stats.total_len} tokens and {int(index.stats.df.sum())} postings; the tables "
                           f"hold {n} of {total} and {pairs}", "bm25")

    @staticmethod
    def _check_dense(conn: psycopg.Connection, report: CheckReport) -> None:
        report.checked.append("dense")
        bad = _scalar(conn.execute("SELECT count(*) FROM passages WHERE NOT (vector_norm(embedding) BETWEEN %s AND %s)",
                                   (1 - NORM_TOLERANCE, 1 + NORM_TOLERANCE)))
        if bad:
            report.problem(f"dense: {bad} stored vector(s) are not unit-norm or not finite (repair embeds them "
                           f"again)", "dense")
        index = conn.execute("SELECT i.indisvalid, am.amname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                             "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
                             "WHERE i.indexrelid = to_regclass(%s)", (f"{schema.SCHEMA}.{HNSW_INDEX}",)).fetchone()
        if index is None:
            report.problem(f"dense: the HNSW index {HNSW_INDEX} is missing", "dense")
        elif not index[0]:
            report.problem(f"dense: the HNSW index {HNSW_INDEX} is not valid (an interrupted build)", "dense")
        elif index[1] != "hnsw" or "vector_cosine_ops" not in index[2]:
            report.problem(f"dense: {HNSW_INDEX} is not an HNSW index of cosine distance ({index[2]})", "dense")

    @staticmethod
    def _check_graph(conn: psycopg.Connection, report: CheckReport) -> None:
        report.checked.append("graph")
        no_ner = _scalar(conn.execute("SELECT count(*) FROM passages p WHERE NOT EXISTS "
                                      "(SELECT 1 FROM graph_ner g WHERE g.prow = p.prow)"))
        if no_ner:
            report.problem(f"graph: {no_ner} passage(s) have no stored NER result (not in the entity graph)",
                           "graph")
        dangling = _scalar(conn.execute(
            "SELECT count(*) FROM mentions m WHERE NOT EXISTS (SELECT 1 FROM passages p WHERE p.prow = m.prow) "
            "OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.eid = m.eid)"))
        if dangling:
            report.problem(f"graph: {dangling} mention(s) of a passage or entity that does not exist", "graph")
        bad_degree = _scalar(conn.execute(
            "SELECT count(*) FROM entities e LEFT JOIN (SELECT eid, count(*) AS n FROM mentions GROUP BY eid) c "
            "ON c.eid = e.eid WHERE e.degree <> coalesce(c.n, 0)"))
        if bad_degree:
            report.problem(f"graph: {bad_degree} entit(y/ies) with a degree other than their number of mentions",
                           "graph")
        lost = _scalar(conn.execute("SELECT count(*) FROM entity_surfaces s WHERE NOT EXISTS "
                                    "(SELECT 1 FROM entities e WHERE e.eid = s.eid)"))
        if lost:
            report.problem(f"graph: {lost} query surface(s) name an entity that does not exist", "graph")

    def _zh_graph_problem(self, conn: psycopg.Connection) -> str | None:
        return zh_graph_problem(
            (self.meta(conn, "params") or {}).get("graph", {}), expected_params(self.config)["graph"],
            lambda: int(_scalar(conn.execute("SELECT count(*) FROM passages WHERE title ~ %(c)s OR text ~ %(c)s",
                                             {"c": SPACELESS_CLASS}))))

    def _forget_zh_ner(self, conn: psycopg.Connection) -> None:
        """Before the graph is rewritten for other Chinese entity settings: drop the stored NER of the passages
        those settings decide (mostly Han), so that it runs again; spaCy's results for the others stay."""
        if self._zh_graph_problem(conn) is None:
            return
        han = conn.execute("SELECT prow, text FROM passages WHERE text ~ %s", (SPACELESS_CLASS,)).fetchall()
        stale = [int(r) for r, text in han if is_mostly_han(text)]
        conn.execute("DELETE FROM graph_ner WHERE prow = ANY(%s)", (stale,))

    def repair(self, components: Sequence[str] | None = None, progress: Progress | None = None) -> RepairReport:
        """Rebuild what `check` finds damaged (or the given `components`) from the passages, in one write
        transaction: BM25 tokenised again (terms, postings, lengths, statistics); the HNSW index built
        again (a stored vector that is not unit-norm is embedded again first; the others are kept);
        the entity graph rewritten (stored NER reused, spaCy runs only on passages without it)."""
        t0 = time.perf_counter()
        progress = progress or NullProgress()
        report = RepairReport(self.location)
        unknown = sorted(set(components or ()) - set(COMPONENTS))
        if unknown:
            raise InputError(f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(COMPONENTS)}")
        with self._write() as conn:
            if components:
                todo = set(components)
            else:
                found = CheckReport(self.location)
                self._check(conn, found, progress)
                todo = set(found.repairable)
            bm25 = None
            if todo:
                if "bm25" in todo:
                    bm25 = self._rebuild_bm25(conn, progress)
                if "dense" in todo:
                    report.reembedded = self._rebuild_dense(conn, progress)
                if "graph" in todo:
                    self._forget_zh_ner(conn)
                    self._rewrite_graph(conn, [], [], {}, progress)
                for name, params in expected_params(self.config).items():
                    if name in todo:  # what the rebuilt component was built with (a graph's Chinese settings)
                        conn.execute("UPDATE meta SET value = jsonb_set(value, %s, %s) WHERE key = 'params'",
                                     ([name], Jsonb(params)))
                self._bump(conn, 0, 0)
        report.rebuilt = sorted(todo)
        if todo:
            self._written(_Change([], 0, 0, bulk="bm25" in todo, bm25=bm25), {})
        report.seconds = time.perf_counter() - t0
        return report

    def _rebuild_bm25(self, conn: psycopg.Connection, progress: Progress) -> BM25State:
        """Terms, postings, passage lengths, the collection statistics and the in-process index's pieces
        from the passages' text."""
        conn.execute("DELETE FROM bm25_postings")
        conn.execute("DELETE FROM bm25_terms")
        # impacts are written again, at a reference length the first page sets
        conn.execute("UPDATE meta SET value = jsonb_set(value, '{ref}', 'null') WHERE key = 'bm25_impact'")
        n = int(_scalar(conn.execute("SELECT count(*) FROM passages")))
        total, last = 0, 0
        with progress.task("repair: bm25", n) as adv:
            while True:
                page = conn.execute("SELECT prow, title, text FROM passages WHERE prow > %s ORDER BY prow LIMIT %s",
                                    (last, REPAIR_PAGE)).fetchall()
                if not page:
                    break
                docs = [(int(r), self.tokenizer(passage_text_for_bm25(title, text))) for r, title, text in page]
                conn.execute("UPDATE passages p SET doc_len = x.dl FROM unnest(%s::bigint[], %s::int[]) AS x(prow, dl) "
                             "WHERE p.prow = x.prow AND p.doc_len <> x.dl",
                             ([r for r, _ in docs], [len(toks) for _, toks in docs]))
                self._add_postings(conn, docs)
                total += sum(len(toks) for _, toks in docs)
                last = docs[-1][0]
                adv(len(docs))
        conn.execute("INSERT INTO meta (key, value) VALUES ('n_passages', to_jsonb(%s::bigint)) "
                     "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (n,))
        conn.execute("INSERT INTO meta (key, value) VALUES ('bm25_stats', jsonb_build_object('n_docs', %s::bigint, "
                     "'total_len', %s::bigint)) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (n, total))
        with progress.task("repair: bm25 index", 1) as adv:
            state = bm25_blobs.build(conn, self.config.bm25)
            adv(1)
        return state

    def _rebuild_dense(self, conn: psycopg.Connection, progress: Progress) -> int:
        """Embed again the passages whose stored vector is damaged, then build the HNSW index again;
        how many were embedded."""
        bad = conn.execute("SELECT prow, title, text FROM passages WHERE NOT (vector_norm(embedding) BETWEEN %s "
                           "AND %s) ORDER BY prow", (1 - NORM_TOLERANCE, 1 + NORM_TOLERANCE)).fetchall()
        if bad:
            with progress.task("repair: embed passages whose stored vector is damaged", len(bad)) as adv:
                fresh = self.encoder.encode([passage_text_for_embedding(title, text) for _, title, text in bad], adv)
            with conn.cursor() as cur:
                cur.executemany("UPDATE passages SET embedding = %s WHERE prow = %s",
                                [(np.asarray(v, dtype=np.float32), int(r[0])) for r, v in zip(bad, fresh, strict=True)])
        with progress.task("repair: dense (HNSW index)", 1) as adv:
            conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
            self._create_hnsw(conn)
            adv(1)
        return len(bad)

    def _bump(self, conn: psycopg.Connection, passages: int, tokens: int) -> None:
        conn.execute("UPDATE meta SET value = to_jsonb((value::text)::bigint + %s) WHERE key = 'n_passages'",
                     (passages,))
        conn.execute("UPDATE meta SET value = to_jsonb((value::text)::bigint + 1) WHERE key = 'generation'")
        conn.execute("UPDATE meta SET value = jsonb_build_object('n_docs', (value->>'n_docs')::bigint + %s, "
                     "'total_len', (value->>'total_len')::bigint + %s) WHERE key = 'bm25_stats'", (passages, tokens))
        conn.execute("UPDATE meta SET value = to_jsonb(%s::text) WHERE key = 'updated'",
                     (datetime.now(UTC).isoformat(timespec="seconds"),))

    def _add_postings(self, conn: psycopg.Connection, docs: list[tuple[int, list[str]]]) -> None:
        """Insert the postings of `docs` (their terms' document frequencies go up), each with its impact:
        the tf part at the index's reference average length (set by the first postings written)."""
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
        impact = self.meta(conn, "bm25_impact") or {}
        k1, b = float(impact.get("k1", self.config.bm25.k1)), float(impact.get("b", self.config.bm25.b))
        ref = impact.get("ref")
        if ref is None:  # the first postings: their average length is the reference from now on
            ref = max(1.0, sum(dl for _, dl, _ in per_doc) / len(per_doc))
            conn.execute("INSERT INTO meta (key, value) VALUES ('bm25_impact', %s) ON CONFLICT (key) "
                         "DO UPDATE SET value = EXCLUDED.value", (Jsonb({"ref": ref, "k1": k1, "b": b}),))
        norm = k1 * (1 - b)
        scale = k1 * b / float(ref)
        with conn.cursor().copy("COPY bm25_postings (tid, prow, tf, dl, imp) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "int8", "int4", "int4", "float4"])
            for row, dl, counts in per_doc:
                for term, tf in counts.items():
                    copy.write_row((tid[term], row, tf, dl, tf / (tf + norm + scale * dl)))

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
        graph_state.bump_generation(conn)


def _scalar(cur: psycopg.Cursor[Any]) -> Any:
    """The first column of the one row an aggregate query returns."""
    row = cur.fetchone()
    if row is None:
        raise AssertionError("an aggregate query returned no row")
    return row[0]


def _themes_to_meta(themes: Themes) -> dict[str, str]:
    import base64
    import tempfile
    from pathlib import Path

    from amsrag.themes.model import ARRAYS_FILE, CARD_FILE

    with tempfile.TemporaryDirectory(prefix="amsrag-themes-") as tmp:
        themes.save(tmp)
        return {"card": (Path(tmp) / CARD_FILE).read_text(encoding="utf-8"),
                "npz": base64.b64encode((Path(tmp) / ARRAYS_FILE).read_bytes()).decode("ascii")}


def _themes_from_meta(value: dict[str, str]) -> Themes:
    import base64
    import tempfile
    from pathlib import Path

    from amsrag.themes.model import ARRAYS_FILE, CARD_FILE

    with tempfile.TemporaryDirectory(prefix="amsrag-themes-") as tmp:
        (Path(tmp) / CARD_FILE).write_text(value["card"], encoding="utf-8")
        (Path(tmp) / ARRAYS_FILE).write_bytes(base64.b64decode(value["npz"]))
        return Themes.load(tmp)


def _library_generation(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'query_library_generation'").fetchone()
    return 0 if row is None else int(row[0])


def _lock(conn: psycopg.Connection) -> None:
    conn.execute(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT_S)}s'")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK_KEY,))
    except psycopg.errors.LockNotAvailable as exc:
        raise IndexBusyError(f"the index is being written by another process; gave up after {LOCK_TIMEOUT_S:.0f} s") \
            from exc
