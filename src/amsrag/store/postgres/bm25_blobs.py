"""The embedded store's segmented BM25 index (`amsrag.indexes.bm25.BM25Index`) kept in PostgreSQL.

The table `bm25_blobs` (schema v5) holds the index's pieces, each under a name that says what it
holds, so a process that has a piece never reads it again:

- `seg-<hash>`: a segment's immutable arrays (npz; the name is the segment's content hash);
- `seg-<hash>.dead-<n>`: its n dead marks (npy; dead marks only grow, so n names them);
- `vocab-<n>`: the first n vocabulary terms (JSON; the vocabulary only grows);
- `df`: the document frequencies (npy) and `index`: the segment list and collection statistics
  (JSON), rewritten by every change.

Every write that changes the passages updates the index (`BM25Index.updated`: a new segment, dead
marks, merges) and writes the new pieces and deletes those no longer used, in its own transaction;
meta `bm25_generation` counts these writes, so a reader knows with one lookup whether its copy is current.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import psycopg

from amsrag.config import BM25Config
from amsrag.errors import IndexCorruptError
from amsrag.indexes.bm25 import BM25Index, CollectionStats
from amsrag.indexes.bm25_segments import Segment
from amsrag.types import PassageRow

FORMAT = 1
PAGE = 5000  # passages per page when building from the passages table


@dataclass
class BM25State:
    """An in-process copy of the stored index at `generation`; `prior` the copy before it (its pieces
    are reused when a reader goes back to it, e.g. a replica that has not replayed the newest write)."""

    generation: int
    index: BM25Index
    prior: list[BM25Index] = field(default_factory=list)


def dead_name(seg: Segment) -> str | None:
    return f"{seg.name}.dead-{len(seg.dead)}" if len(seg.dead) else None


def vocab_name(index: BM25Index) -> str:
    return f"vocab-{len(index.vocab)}"


def piece_names(index: BM25Index) -> set[str]:
    """The names of the immutable pieces `index` is made of (`df` and `index` aside)."""
    names = {vocab_name(index)}
    for seg in index.segments:
        names.add(seg.name)
        dead = dead_name(seg)
        if dead is not None:
            names.add(dead)
    return names


def array_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def array_from_bytes(data: bytes) -> np.ndarray:
    return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))


def _piece_bytes(index: BM25Index, name: str) -> bytes:
    if name == vocab_name(index):
        return json.dumps(index.vocab).encode("utf-8")
    for seg in index.segments:
        if name == seg.name:
            return seg.to_bytes()
        if name == dead_name(seg):
            return array_bytes(seg.dead)
    raise AssertionError(f"{name} is not a piece of the index")


def _index_json(index: BM25Index) -> bytes:
    meta = {"format": FORMAT, "n_docs": index.stats.n_docs, "total_len": index.stats.total_len,
            "vocab": vocab_name(index),
            "segments": [{"name": s.name, "dead": dead_name(s)} for s in index.segments]}
    return json.dumps(meta).encode("utf-8")


def generation(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'bm25_generation'").fetchone()
    return 0 if row is None else int(row[0])


def write(conn: psycopg.Connection, old: BM25Index | None, new: BM25Index) -> int:
    """Store `new` in place of `old` (what the table holds now; None: whatever it holds is dropped),
    in the caller's write transaction; the new generation."""
    if old is None:
        conn.execute("DELETE FROM bm25_blobs")
        have: set[str] = set()
    else:
        have = piece_names(old)
    want = piece_names(new)
    gone = sorted(have - want)
    if gone:
        conn.execute("DELETE FROM bm25_blobs WHERE name = ANY(%s)", (gone,))
    rows = [(name, _piece_bytes(new, name)) for name in sorted(want - have)]
    rows += [("df", array_bytes(new.stats.df)), ("index", _index_json(new))]
    conn.execute("DELETE FROM bm25_blobs WHERE name IN ('df', 'index')")
    with conn.cursor().copy("COPY bm25_blobs (name, data) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "bytea"])
        for row in rows:
            copy.write_row(row)
    got = conn.execute("INSERT INTO meta (key, value) VALUES ('bm25_generation', '1') ON CONFLICT (key) "
                       "DO UPDATE SET value = to_jsonb((meta.value::text)::bigint + 1) RETURNING value").fetchone()
    if got is None:
        raise AssertionError("no bm25_generation returned")
    return int(got[0])


def load(conn: psycopg.Connection, config: BM25Config, previous: BM25State | None) -> BM25State:
    """The stored index (pieces already in `previous` or its prior copies are not read again), in the
    caller's snapshot: run it in one transaction (a reader: repeatable read) so the pieces agree."""
    gen = generation(conn)
    top: dict[str, bytes] = {n: bytes(d) for n, d in conn.execute(
        "SELECT name, data FROM bm25_blobs WHERE name IN ('index', 'df')").fetchall()}
    if "index" not in top or "df" not in top:
        raise IndexCorruptError("the BM25 index is missing from bm25_blobs (run `amsrag index repair`)")
    meta = json.loads(top["index"])
    if meta.get("format") != FORMAT:
        raise IndexCorruptError(f"bm25_blobs holds BM25 format {meta.get('format')!r}, expected {FORMAT}")
    known = [previous.index, *previous.prior] if previous is not None else []
    segs: dict[str, Segment] = {}
    deads: dict[str, np.ndarray] = {}
    vocab: list[str] | None = None
    for old in known:
        if vocab is None and vocab_name(old) == meta["vocab"]:
            vocab = old.vocab
        for seg in old.segments:
            segs.setdefault(seg.name, seg)
            dead = dead_name(seg)
            if dead is not None:
                deads.setdefault(dead, seg.dead)
    missing = [s["name"] for s in meta["segments"] if s["name"] not in segs]
    missing += [s["dead"] for s in meta["segments"] if s["dead"] is not None and s["dead"] not in deads]
    if vocab is None:
        missing.append(meta["vocab"])
    if missing:
        got = {n: bytes(d) for n, d in conn.execute("SELECT name, data FROM bm25_blobs WHERE name = ANY(%s)",
                                                    (missing,)).fetchall()}
        lost = sorted(set(missing) - set(got))
        if lost:
            raise IndexCorruptError(f"bm25_blobs lacks {', '.join(lost[:5])} (run `amsrag index repair`)")
        for name, data in got.items():
            if name == meta["vocab"]:
                vocab = json.loads(data)
            elif ".dead-" in name:
                deads[name] = array_from_bytes(data).astype(np.int64)
            else:
                segs[name] = Segment.from_bytes(name, data)
    assert vocab is not None
    segments = []
    for s in meta["segments"]:
        seg = segs[str(s["name"])]
        dead_of: str | None = s["dead"]
        marks = deads[dead_of] if dead_of is not None else np.zeros(0, np.int64)
        segments.append(seg if np.array_equal(seg.dead, marks) else replace(seg, dead=marks))
    df = array_from_bytes(top["df"]).astype(np.int64)
    index = BM25Index(config, list(vocab), segments, CollectionStats(int(meta["n_docs"]), int(meta["total_len"]), df))
    return BM25State(gen, index, [previous.index] if previous is not None else [])


def build(conn: psycopg.Connection, config: BM25Config) -> BM25State:
    """Index every stored passage afresh and store it in place of whatever the table holds (the v5
    migration, `repair`), in the caller's write transaction."""
    rows: list[PassageRow] = []
    last = 0
    while True:
        page: Sequence[tuple[Any, ...]] = conn.execute(
            "SELECT prow, id, title, text FROM passages WHERE prow > %s ORDER BY prow LIMIT %s",
            (last, PAGE)).fetchall()
        if not page:
            break
        rows.extend(PassageRow(int(r), i, t, x) for r, i, t, x in page)
        last = int(page[-1][0])
    index = BM25Index.build(rows, config)
    return BM25State(write(conn, None, index), index)
