"""Immutable BM25 segments: the postings of a batch of passages, term frequencies and lengths only.

bm25s bakes the corpus statistics (document frequencies, average length) into every stored score,
so adding one passage changes every posting. A segment stores what does not change — each
passage's token ids and a term-major list of (passage, term frequency) — and `BM25Index` applies
the BM25 formulas at query time with the statistics of the whole live corpus. A new batch of
passages is a new segment; deleting a passage marks it dead in its segment. Segments are merged
size-tiered (ten of one size become one of the next), so a passage is rewritten O(log n) times.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

# Arrays of a segment that never change once written: saved once, hard-linked into later generations.
IMMUTABLE = ("rows", "offsets", "flat", "indptr", "docs", "tf")
MERGE_FACTOR = 10  # this many segments of one size tier are merged into one
TIER_BASE = 1000  # passages in the smallest tier
COMPACT_DEAD_SHARE = 0.3  # a segment with more dead passages than this is rewritten


@dataclass(frozen=True)
class Segment:
    """Passages `rows[i]` (ascending store rows) with token ids `flat[offsets[i]:offsets[i+1]]`;
    postings of term t are `docs[indptr[t]:indptr[t+1]]` (ascending local indices) with `tf`."""

    name: str
    rows: np.ndarray  # int64
    offsets: np.ndarray  # int64, len(rows) + 1
    flat: np.ndarray  # int32 vocabulary ids
    indptr: np.ndarray  # int64, covers the vocabulary as it was when the segment was made
    docs: np.ndarray  # int32
    tf: np.ndarray  # float32
    dead: np.ndarray  # int64 local indices of deleted passages, ascending

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def n_live(self) -> int:
        return len(self.rows) - len(self.dead)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def live_mask(self) -> np.ndarray:
        mask = np.ones(self.n, dtype=bool)
        mask[self.dead] = False
        return mask

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        if term + 1 >= len(self.indptr):
            return self.docs[:0], self.tf[:0]
        lo, hi = int(self.indptr[term]), int(self.indptr[term + 1])
        return self.docs[lo:hi], self.tf[lo:hi]

    def with_dead(self, local: np.ndarray) -> Segment:
        return replace(self, dead=np.union1d(self.dead, local).astype(np.int64))

    # ---- storage --------------------------------------------------------------------------
    def save(self, directory: Path, previous: Path | None) -> None:
        """Write the segment into `directory`; immutable arrays already in `previous` (the same
        segment name means the same content) are hard-linked instead of written again."""
        for field in IMMUTABLE:
            target = directory / f"{self.name}.{field}.npy"
            source = previous / target.name if previous is not None else None
            if source is not None:
                try:
                    os.link(source, target)
                    continue
                except OSError:
                    pass
            np.save(target, np.asarray(getattr(self, field)))
        if len(self.dead):
            np.save(directory / f"{self.name}.dead.npy", self.dead)

    def to_bytes(self) -> bytes:
        """The immutable arrays as one npz blob (dead marks are kept apart: they change)."""
        buf = io.BytesIO()
        arrays: dict[str, Any] = {f: np.ascontiguousarray(getattr(self, f)) for f in IMMUTABLE}
        np.savez(buf, **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Segment:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {f: z[f] for f in IMMUTABLE}
        return cls(name=name, dead=np.zeros(0, np.int64), **arrays)

    @classmethod
    def load(cls, directory: Path, name: str, has_dead: bool) -> Segment:
        # memory-mapped, as plain ndarray views (np.memmap's Python-level indexing costs per posting list)
        arrays = {f: np.asarray(np.load(directory / f"{name}.{f}.npy", mmap_mode="r")) for f in IMMUTABLE}
        dead = np.load(directory / f"{name}.dead.npy") if has_dead else np.zeros(0, np.int64)
        return cls(name=name, dead=dead, **arrays)


def segment_from_ids(rows: np.ndarray, offsets: np.ndarray, flat: np.ndarray, vocab_size: int) -> Segment:
    """A segment over passages given as token ids (rows ascending)."""
    n = len(rows)
    flat = np.ascontiguousarray(flat, dtype=np.int32)
    doc_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    code, tf = np.unique(flat.astype(np.int64) * max(n, 1) + doc_of, return_counts=True)
    terms = code // max(n, 1)
    indptr = np.zeros(vocab_size + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=vocab_size), out=indptr[1:])
    digest = hashlib.blake2b(digest_size=8)
    for part in (rows, offsets, flat):
        digest.update(np.ascontiguousarray(part).tobytes())
    return Segment(name=f"seg-{digest.hexdigest()}", rows=np.asarray(rows, dtype=np.int64),
                   offsets=np.asarray(offsets, dtype=np.int64), flat=flat, indptr=indptr,
                   docs=(code % max(n, 1)).astype(np.int32), tf=tf.astype(np.float32),
                   dead=np.zeros(0, np.int64))


def merged(segments: Sequence[Segment], vocab_size: int) -> Segment:
    """One segment holding the live passages of `segments` (consecutive in row order)."""
    rows, flats, lengths = [], [], []
    for seg in segments:
        live = seg.live_mask()
        seg_lengths = seg.lengths
        rows.append(seg.rows[live])
        flats.append(np.asarray(seg.flat)[np.repeat(live, seg_lengths)])
        lengths.append(seg_lengths[live])
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(all_lengths)]).astype(np.int64)
    return segment_from_ids(np.concatenate(rows), offsets, np.concatenate(flats), vocab_size)


def tier(n_live: int) -> int:
    return int(math.log(max(n_live, 1) / TIER_BASE, MERGE_FACTOR)) if n_live > TIER_BASE else 0


def merge_policy(segments: list[Segment], vocab_size: int) -> list[Segment]:
    """Rewrite segments mostly dead, then merge the trailing run of same-tier segments while it
    holds MERGE_FACTOR of them (the newest segments are the smallest and sit last)."""
    out = [merged([s], vocab_size) if s.n and len(s.dead) > COMPACT_DEAD_SHARE * s.n else s for s in segments]
    out = [s for s in out if s.n_live]
    while len(out) >= MERGE_FACTOR:
        last = tier(out[-1].n_live)
        run = 0
        while run < len(out) and tier(out[-1 - run].n_live) == last:
            run += 1
        if run < MERGE_FACTOR:
            break
        out = [*out[:-run], merged(out[-run:], vocab_size)]
    return out
