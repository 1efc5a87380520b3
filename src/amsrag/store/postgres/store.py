"""The PostgreSQL + pgvector index: the same capabilities as the embedded store, in a database.

Passages, their vectors (pgvector, HNSW with cosine), BM25 term and posting tables and the
embedded store's segmented BM25 index as blobs (scored in-process, see bm25_blobs.py), the entity
graph (entities, mentions), each document's source fingerprint, the vectors staged by an ingest
and the query library live in the `amsrag` schema. Every add, document put, delete, repair or
library save is one transaction, serialised across processes by an advisory lock (staging vectors
is a short transaction of its own, outside the lock), so several amsrag processes can share one
database and see each other's writes as soon as they commit. Reads go through a psycopg pool; a
failed read (server down, connection dropped) is retried once within the request timeout and then
reported as `StoreUnavailableError`. `PostgresIndex` composes the capabilities (`reads`, `writing`, `checks`,
`attached`, over `derived` and `core`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import DIMENSION
from amsrag.errors import IndexMismatchError, IndexNotFoundError, InputError
from amsrag.store.postgres import bm25_blobs, schema
from amsrag.store.postgres.attached import PgAttached
from amsrag.store.postgres.checks import PgChecks
from amsrag.store.postgres.connection import connect, redact
from amsrag.store.postgres.core import _lock
from amsrag.store.postgres.reads import PgReads
from amsrag.store.postgres.writing import PgWriting
from amsrag.store.writes import expected_params, refusing_differences, with_legacy_tokenizer
from amsrag.version import INDEX_FORMAT_VERSION, __version__


class PostgresIndex(PgReads, PgWriting, PgChecks, PgAttached):
    """Passages + BM25 + vectors + entity graph in PostgreSQL. Use `create` or `open`."""

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
