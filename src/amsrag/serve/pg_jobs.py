"""The job records of a service on a PostgreSQL index: the `amsrag.serve_jobs` table, created when missing.

Outside the store's numbered migrations, like the query log: a server must not need a schema upgrade of the
index (or its write lock) to start. Several services may share the database, so a record names its owner, a
number each service holds a session advisory lock on (`pg_advisory_lock(OWNER_LOCK_CLASS, owner)`) for as long as
its connection lives. A process that dies (kill -9 included) loses its connection and so its lock: a queued or
running record whose owner's lock is free belongs to a stopped service and is stored as failed (INTERRUPTED),
at start for every such record and whenever one is looked up. One connection, shared under a lock and opened
again once when it drops; the last `keep` records are kept (queued and running ones never dropped).
"""

from __future__ import annotations

import logging
import random
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from amsrag.serve.jobs import Job, interrupt
from amsrag.store.postgres.connection import SharedConnection, StoreUnavailableError, redact
from amsrag.store.postgres.schema import SCHEMA

log = logging.getLogger("amsrag.serve")
TABLE = f"{SCHEMA}.serve_jobs"
CREATE_LOCK_KEY = 0x616D736A  # "amsj": serialises the CREATE ... IF NOT EXISTS of concurrent first starts
OWNER_LOCK_CLASS = 0x616D736F  # "amso": the first key of the owners' two-key advisory locks
LIVE = ("queued", "running")

_SCHEMA = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {TABLE} (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    id text PRIMARY KEY,
    owner integer NOT NULL,  -- the service that ran it: the second key of its advisory lock
    status text NOT NULL,
    record jsonb NOT NULL,  -- Job.record()
    updated timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS serve_jobs_seq ON {TABLE} (seq);
CREATE INDEX IF NOT EXISTS serve_jobs_live ON {TABLE} (owner) WHERE status IN ('queued', 'running');
"""


class PostgresJobStore:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.location = f"{redact(dsn)} ({TABLE})"
        self.keep = 200
        self.owner = 0  # taken when the first connection opens
        self._connection = SharedConnection(dsn, on_connect=self._hold_owner_lock)  # the lock lives with it
        self._run = self._connection.run
        self._run(self._create)

    def _hold_owner_lock(self, conn: psycopg.Connection) -> None:
        """Lock this service's owner number on `conn` (a new random one when another session holds it)."""
        for _ in range(100):
            if self.owner:
                row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (OWNER_LOCK_CLASS, self.owner)).fetchone()
                if row is not None and row[0]:
                    return
            self.owner = random.SystemRandom().randint(1, 2**31 - 1)
        raise StoreUnavailableError("no free owner lock for the job records after 100 tries")

    @staticmethod
    def _create(conn: psycopg.Connection) -> None:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()
        if row is not None and row[0]:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CREATE_LOCK_KEY,))
            conn.execute(_SCHEMA)

    def close(self) -> None:
        self._connection.close()  # releases the owner lock

    # ---- the store -------------------------------------------------------------------
    def _owner_stopped(self, conn: psycopg.Connection, owner: int) -> bool:
        """True when no session holds `owner`'s lock: the service that ran its jobs is gone."""
        if owner == self.owner:
            return False
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (OWNER_LOCK_CLASS, owner)).fetchone()
        if row is None or not row[0]:
            return False
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (OWNER_LOCK_CLASS, owner))
        return True

    def _interrupt(self, conn: psycopg.Connection, rows: list[tuple[Any, ...]]) -> list[Job]:
        """The (id, owner, record) rows whose owner stopped, stored and returned as failed (INTERRUPTED)."""
        stopped: dict[int, bool] = {}
        out = []
        for job_id, owner, record in rows:
            if owner not in stopped:
                stopped[owner] = self._owner_stopped(conn, int(owner))
            if stopped[owner]:
                job = interrupt(Job.from_record(record))
                # only while still live: a concurrent start may have stored it first
                conn.execute(f"UPDATE {TABLE} SET status = %s, record = %s, updated = now() WHERE id = %s "
                             f"AND status IN ('queued', 'running')", (job.status, Jsonb(job.record()), job_id))
                out.append(job)
        return out

    def load(self, keep: int) -> list[Job]:
        """Nothing cached (records are read when asked for); the live records of stopped services are stored
        as failed."""
        self.keep = keep

        def load(conn: psycopg.Connection) -> list[Job]:
            rows = conn.execute(f"SELECT id, owner, record FROM {TABLE} WHERE status IN ('queued', 'running') "
                                f"ORDER BY seq").fetchall()
            return self._interrupt(conn, rows)

        stopped = self._run(load)
        if stopped:
            log.warning("%d job(s) were interrupted when the service running them stopped; they are reported as "
                        "failed", len(stopped))
        return []

    def save(self, job: Job, jobs: list[Job]) -> None:
        def save(conn: psycopg.Connection) -> None:
            with conn.transaction():
                conn.execute(f"INSERT INTO {TABLE} (id, owner, status, record) VALUES (%s, %s, %s, %s) "
                             f"ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, status = excluded.status, "
                             f"record = excluded.record, updated = now()",
                             (job.id, self.owner, job.status, Jsonb(job.record())))
                if job.status not in LIVE:
                    conn.execute(f"DELETE FROM {TABLE} WHERE status NOT IN ('queued', 'running') AND seq <= "
                                 f"(SELECT seq FROM {TABLE} ORDER BY seq DESC OFFSET %s LIMIT 1)", (self.keep,))

        self._run(save)

    def lookup(self, job_id: str) -> Job | None:
        def lookup(conn: psycopg.Connection) -> Job | None:
            row = conn.execute(f"SELECT id, owner, record, status FROM {TABLE} WHERE id = %s", (job_id,)).fetchone()
            if row is None:
                return None
            if row[3] in LIVE:
                stopped = self._interrupt(conn, [row[:3]])
                if stopped:
                    return stopped[0]
            return Job.from_record(row[2])

        return self._run(lookup)
