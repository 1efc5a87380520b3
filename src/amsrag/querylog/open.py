"""The query log of an index: `querylog.sqlite` in an embedded index's directory, or the `amsrag.query_log`
table of a PostgreSQL index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amsrag.config import AmsragConfig, QueryLogConfig
from amsrag.errors import InputError
from amsrag.querylog.base import QueryLog
from amsrag.querylog.sqlite import FILE, SqliteQueryLog


def is_postgres_url(spec: str | Path) -> bool:
    # amsrag.store.open's test, without importing the stores (a process that only logs stays light)
    return isinstance(spec, str) and spec.startswith(("postgresql://", "postgres://"))


def _postgres_log(url: str, retention_days: float) -> QueryLog:
    try:
        from amsrag.querylog.postgres import PostgresQueryLog
    except ImportError as exc:
        raise InputError(f"a postgresql:// index needs the PostgreSQL drivers ({exc.name} is missing): "
                         f"pip install 'amsrag[postgres]'") from exc
    return PostgresQueryLog(url, retention_days)


def query_log_for_index(index: Any, config: QueryLogConfig) -> QueryLog:
    """The log beside an open index (an EmbeddedIndex's directory, a PostgresIndex's database)."""
    if getattr(index, "backend", "") == "postgres":
        return _postgres_log(index.dsn, config.retention_days)
    return SqliteQueryLog(Path(index.path) / FILE, config.retention_days)


def index_config(spec: str | Path) -> AmsragConfig:
    """The configuration an index was built with, read without opening the index."""
    if is_postgres_url(spec):
        from amsrag.store.open import open_index

        with open_index(spec) as index:
            return index.config
    path = Path(spec) / "config.toml"
    if not path.is_file():
        raise InputError(f"no amsrag index at {spec} (no config.toml)")
    return AmsragConfig.load(path)


def open_query_log(spec: str | Path, config: QueryLogConfig | None = None, create: bool = False) -> QueryLog:
    """The query log of the index at `spec` (a directory or a postgresql:// URL); `config`: default, the
    index's own. Without `create`, an embedded index that never logged is an error that says how to start."""
    config = config or index_config(spec).query_log
    if is_postgres_url(spec):
        return _postgres_log(str(spec), config.retention_days)
    path = Path(spec) / FILE
    if not create and not path.is_file():
        if not (Path(spec) / "config.toml").is_file():
            raise InputError(f"no amsrag index at {spec} (no config.toml)")
        raise InputError(f"no query log at {path}: it is off by default; turn it on with `[query_log] enabled = "
                         f"true` in the index's config.toml (or `amsrag serve --query-log`, `amsrag ask --log`)")
    return SqliteQueryLog(path, config.retention_days)
