"""One SQLite file that threads and processes share: WAL, one connection behind a lock, and every write one
`BEGIN IMMEDIATE` transaction (so a writer in another process waits up to `BUSY_TIMEOUT_S`, never fails at
once). The query log and the review queue are such files."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's transaction

T = TypeVar("T")


def use_wal(conn: sqlite3.Connection) -> None:
    """WAL journal mode, switched only when the file is not in it yet: the mode is stored in the file, and
    setting it writes, so a read of an existing file (`index stats` on a full disk) must not ask again."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL")


class WalDatabase:
    """`schema`: the CREATE statements (IF NOT EXISTS); `meta_table` (key, value) records `schema_version`."""

    def __init__(self, path: str | Path, schema: str, meta_table: str, schema_version: int) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.lock = threading.Lock()
        self.conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None,
                                    timeout=BUSY_TIMEOUT_S)
        try:
            with self.lock:
                use_wal(self.conn)
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.executescript(schema)
                self.conn.execute(f"INSERT OR IGNORE INTO {meta_table} VALUES ('schema_version', ?)",
                                  (str(schema_version),))
        except BaseException:
            self.conn.close()
            raise

    def transaction(self, fn: Callable[[], T]) -> T:
        """`fn()` inside one write transaction: committed when it returns, rolled back when it raises."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn()
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
        return result

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
