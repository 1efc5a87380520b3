"""The review queue of an embedded index: `review.sqlite` in the index directory.

A file of its own, like the query log (`amsrag.querylog.sqlite`): WAL journal and a busy timeout, so the
service's threads and another process (`amsrag ops review mark`) share it; every write is one `BEGIN IMMEDIATE`
transaction. One open item per (question, system): a repeat refreshes it. A question already reviewed or
dismissed for that system does not enter again (its review stands). Open and dismissed items older than the
retention are deleted, and beyond `max_open` open items the oldest go; reviewed items are labelled data and
are kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from amsrag.errors import InputError
from amsrag.querylog.entry import iso, parse_time, utc
from amsrag.review.items import (
    STATUSES,
    Kind,
    Review,
    ReviewCandidate,
    ReviewItem,
    Status,
    check_kind,
    check_note,
    check_status,
    check_true_class,
    check_verdict,
)
from amsrag.sqlite_wal import WalDatabase
from amsrag.store.open import is_postgres_url
from amsrag.text.normalise import normalise_question
from amsrag.types import Complexity

FILE = "review.sqlite"
SCHEMA_VERSION = 1
MAX_LIMIT = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS review_item (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,  -- UTC, fixed-width ISO 8601: when it last entered
    created TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    query TEXT NOT NULL,
    qkey TEXT NOT NULL,  -- the normalised question: the dedup key with `system`
    system TEXT NOT NULL,
    answer TEXT NOT NULL,  -- JSON
    details TEXT,  -- JSON, a shadow probe's findings
    seen INTEGER NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT,
    true_class TEXT,
    note TEXT,
    reviewed_at TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS review_one_open ON review_item (qkey, system) WHERE status = 'open';
CREATE INDEX IF NOT EXISTS review_key ON review_item (qkey, system);
CREATE INDEX IF NOT EXISTS review_status_ts ON review_item (status, ts);
CREATE TABLE IF NOT EXISTS review_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = ("id", "ts", "created", "kind", "reason", "query", "system", "answer", "details", "seen", "status",
            "verdict", "true_class", "note", "reviewed_at")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM review_item"


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


def _item(row: tuple[Any, ...]) -> ReviewItem:
    v = dict(zip(_COLUMNS, row, strict=True))
    review = None
    if v["verdict"] is not None:
        review = Review(v["verdict"], v["true_class"], v["note"] or "", parse_time(v["reviewed_at"]))
    return ReviewItem(int(v["id"]), parse_time(v["ts"]), parse_time(v["created"]), cast(Kind, v["kind"]),
                      v["reason"], v["query"], v["system"], json.loads(v["answer"]),
                      None if v["details"] is None else json.loads(v["details"]), int(v["seen"]),
                      cast(Status, v["status"]), review)


class ReviewQueue(WalDatabase):
    def __init__(self, path: str | Path, max_open: int = 5000, retention_days: float = 90.0,
                 clock: Callable[[], datetime] | None = None) -> None:
        """`max_open`: open items kept (the oldest go first); `retention_days`: open and dismissed items older
        than this are deleted (0 keeps them); `clock`: UTC now by default."""
        if max_open < 1:
            raise InputError(f"max_open must be at least 1, got {max_open}")
        if retention_days < 0:
            raise InputError(f"retention_days must be 0 (keep all) or more, got {retention_days}")
        super().__init__(path, _SCHEMA, "review_meta", SCHEMA_VERSION)
        self.max_open = max_open
        self.retention_days = retention_days
        self._clock = clock or (lambda: datetime.now(UTC))

    # ------------------------------------------------------------------ entering
    def add(self, candidate: ReviewCandidate) -> int | None:
        """Enter `candidate`; the id of its open item (new or refreshed), or None when the question was
        already reviewed or dismissed for that system."""
        kind = check_kind(candidate.kind)
        key = normalise_question(candidate.query)
        if not key:
            raise InputError("a review item needs a non-empty question")
        now = iso(utc(self._clock()))

        def add() -> int | None:
            self._prune(now)
            rows = self.conn.execute("SELECT id, status FROM review_item WHERE qkey = ? AND system = ? "
                                      "ORDER BY status = 'open' DESC, id DESC", (key, candidate.system)).fetchall()
            if rows and rows[0][1] == "open":
                item_id = int(rows[0][0])
                self.conn.execute(
                    "UPDATE review_item SET ts = ?, kind = ?, reason = ?, query = ?, answer = ?, "
                    "details = COALESCE(?, details), seen = seen + 1 WHERE id = ?",
                    (now, kind, candidate.reason, candidate.query, _json(candidate.answer),
                     _json(candidate.details), item_id))
                return item_id
            if rows:
                return None
            cur = self.conn.execute(
                "INSERT INTO review_item (ts, created, kind, reason, query, qkey, system, answer, details, seen, "
                "status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 'open')",
                (now, now, kind, candidate.reason, candidate.query, key, candidate.system, _json(candidate.answer),
                 _json(candidate.details)))
            self.conn.execute(
                "DELETE FROM review_item WHERE id IN (SELECT id FROM review_item WHERE status = 'open' "
                "ORDER BY ts DESC, id DESC LIMIT -1 OFFSET ?)", (self.max_open,))
            assert cur.lastrowid is not None
            return int(cur.lastrowid)

        return self.transaction(add)

    def append(self, candidate: ReviewCandidate) -> int | None:
        """`add`, under the name a `BackgroundAppender` calls."""
        return self.add(candidate)

    def add_misroute_candidate(self, query: str, system: str, answer: Mapping[str, Any],
                               details: Mapping[str, Any]) -> int | None:
        """A shadow probe's misroute candidate: `answer` is the cheap route's answer (the ask JSON), `details`
        what the probe found (e.g. the wider route's answer and how they differ); kept with the item."""
        from amsrag.review.items import answer_body

        reason = str(details.get("reason") or "a shadow probe of a wider route disagrees with the answer")
        return self.add(ReviewCandidate("shadow", reason, query, system, answer_body(answer), dict(details)))

    def _prune(self, now: str) -> None:
        if self.retention_days > 0:
            oldest = iso(parse_time(now) - timedelta(days=self.retention_days))
            self.conn.execute("DELETE FROM review_item WHERE status != 'reviewed' AND ts < ?", (oldest,))

    # ------------------------------------------------------------------ reviewing
    def mark(self, item_id: int, verdict: str, true_class: str | None = None, note: str = "") -> ReviewItem:
        """Review an item: the answer is right or wrong, and (optionally) the question's true class. A
        reviewed item may be marked again (the latest review wins)."""
        v = check_verdict(verdict)
        c: Complexity | None = check_true_class(true_class)
        note = check_note(note)
        now = iso(utc(self._clock()))
        return self._set(item_id, "reviewed", v, c, note, now)

    def dismiss(self, item_id: int, note: str = "") -> ReviewItem:
        """Nothing to learn from this item: it leaves the open list without a review."""
        note = check_note(note)
        return self._set(item_id, "dismissed", None, None, note, iso(utc(self._clock())))

    def _set(self, item_id: int, status: Status, verdict: str | None, true_class: str | None, note: str,
             now: str) -> ReviewItem:
        def update() -> None:
            cur = self.conn.execute("UPDATE review_item SET status = ?, verdict = ?, true_class = ?, note = ?, "
                                     "reviewed_at = ? WHERE id = ?", (status, verdict, true_class, note, now,
                                                                      int(item_id)))
            if not cur.rowcount:
                raise InputError(f"no review item {item_id}")

        self.transaction(update)
        item = self.get(item_id)
        assert item is not None
        return item

    # ------------------------------------------------------------------ reading
    def get(self, item_id: int) -> ReviewItem | None:
        with self.lock:
            row = self.conn.execute(f"{_SELECT} WHERE id = ?", (int(item_id),)).fetchone()
        return None if row is None else _item(row)

    def items(self, status: str | None = "open", limit: int = 50, offset: int = 0) -> list[ReviewItem]:
        """Items of `status` (None: every status), newest first."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InputError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        if offset < 0:
            raise InputError(f"offset must be 0 or more, got {offset}")
        where, params = "", []
        if status is not None:
            where, params = " WHERE status = ?", [check_status(status)]
        with self.lock:
            rows = self.conn.execute(f"{_SELECT}{where} ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?",
                                      [*params, limit, offset]).fetchall()
        return [_item(r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self.lock:
            rows = dict(self.conn.execute("SELECT status, count(*) FROM review_item GROUP BY status").fetchall())
        return {s: int(rows.get(s, 0)) for s in STATUSES}

    def labelled(self) -> list[tuple[str, Complexity]]:
        """(question, true class) of every reviewed item that has one, oldest review first; a question
        reviewed under several systems counts once (its latest review)."""
        with self.lock:
            rows = self.conn.execute("SELECT qkey, query, true_class FROM review_item WHERE status = 'reviewed' "
                                      "AND true_class IS NOT NULL ORDER BY reviewed_at, id").fetchall()
        latest: dict[str, tuple[str, Complexity]] = {}
        for key, query, true_class in rows:
            latest.pop(key, None)
            latest[key] = (query, true_class)
        return list(latest.values())


def open_review_queue(spec: str | Path, create: bool = False, max_open: int = 5000,
                      retention_days: float = 90.0) -> ReviewQueue:
    """The review queue of the embedded index at `spec`. Without `create`, an index that never queued an
    answer is an error that says how to start."""
    if is_postgres_url(spec):
        raise InputError("the review queue is stored in an embedded index's directory; a PostgreSQL index has "
                         "none yet")
    directory = Path(spec)
    if not (directory / "config.toml").is_file():
        raise InputError(f"no amsrag index at {spec} (no config.toml)")
    path = directory / FILE
    if not create and not path.is_file():
        raise InputError(f"no review queue at {path}: it is off by default; turn it on with `[review] enabled = "
                         f"true` in the index's config.toml (or `amsrag serve --review`)")
    return ReviewQueue(path, max_open, retention_days)
