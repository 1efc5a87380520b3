"""The query log: the conformance suite on SQLite and PostgreSQL, the entry of an answer, the service's
logging (on, off, broken) and the `amsrag querylog` commands."""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from amsrag.querylog import SqliteQueryLog
from amsrag.querylog.sqlite import FILE
from amsrag.testing.querylog import QueryLogConformance


class TestSqliteQueryLog(QueryLogConformance):
    backend = "sqlite"

    def create_log(self, request, directory, retention_days, clock):
        directory.mkdir(parents=True)
        (directory / "config.toml").write_text("")  # what makes the directory an index to `open_query_log`
        return SqliteQueryLog(directory / FILE, retention_days, clock)

    def spec(self, log):
        return str(log.path.parent)

    def stored_text(self, log):
        return "".join(p.read_bytes().decode("utf-8", "replace") for p in log.path.parent.glob(FILE + "*"))


class TestPostgresQueryLog(QueryLogConformance):
    backend = "postgres"

    def create_log(self, request, directory, retention_days, clock):
        from amsrag.querylog.postgres import PostgresQueryLog
        from pg_server import new_database

        return PostgresQueryLog(new_database(request.getfixturevalue("pg_server")), retention_days, clock)

    def spec(self, log):
        return log.dsn

    def stored_text(self, log):
        import psycopg

        with psycopg.connect(log.dsn) as conn:
            return "\n".join(r[0] for r in conn.execute("SELECT q::text FROM amsrag.query_log q"))
