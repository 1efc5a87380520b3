"""The PostgreSQL index's connections and caches: the read pool with its retry, the write transaction under
the cross-process lock, the in-process BM25 copy, the encoder, filters and query-time settings."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import Encoder
from amsrag.embed.factory import encoder_for
from amsrag.errors import IndexBusyError, InputError
from amsrag.filters import Where
from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.indexes.bm25 import BM25Index, BM25Tokenizer
from amsrag.indexes.themes import Themes
from amsrag.store.postgres import bm25_blobs, schema
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
from amsrag.store.writes import expected_params, param_differences

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


# A document's modification time as the UTC text filters compare (`amsrag.filters.utc_stamp`).
_UTC_STAMP = "to_char(d.modified AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"


def _scalar(cur: psycopg.Cursor[Any]) -> Any:
    """The first column of the one row an aggregate query returns."""
    row = cur.fetchone()
    if row is None:
        raise AssertionError("an aggregate query returned no row")
    return row[0]


def _lock(conn: psycopg.Connection) -> None:
    conn.execute(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT_S)}s'")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK_KEY,))
    except psycopg.errors.LockNotAvailable as exc:
        raise IndexBusyError(f"the index is being written by another process; gave up after {LOCK_TIMEOUT_S:.0f} s") \
            from exc


class PgCore:
    """What every capability of `PostgresIndex` stands on: the pools, the caches and the settings."""

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
