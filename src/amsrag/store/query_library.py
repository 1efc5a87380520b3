"""The query library of an index: labelled queries (question, hop label, where the label came from)
with their unit-normalised embeddings, and the nearest-neighbour vote over them.

Both store backends persist it (`PassageIndex.query_library` / `save_query_library`), so it lives
on the store's layer; the classification side (`amsrag.classify.library`, which re-exports these
names and adds `blend`) reads it. Queries are deduplicated by `normalise_question`; adding a question
again with another label relabels it (the latest confirmation wins).

Cost of one `vote` on a library of n queries: one float32 matrix-vector product (n x 384
multiply-adds), one `argpartition` over n scores and O(k) work on the k nearest, with no Python
loop over the library. For n = 5,000: 1.9 M multiply-adds streaming 7.7 MB of contiguous float32
(~0.15 ms for the product on one core; from main memory at ~10 GB/s it would stay under 0.8 ms),
~0.05 ms for the partition, ~0.02 ms for the rest: about 0.25 ms a vote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from amsrag.embed.encoder import DIMENSION
from amsrag.errors import InputError
from amsrag.text.normalise import normalise_question

Hop = Literal["one_hop", "multi_hop"]
HOP_LABELS: tuple[Hop, ...] = ("one_hop", "multi_hop")
ARRAY_KEYS = ("questions", "hops", "vectors", "sources")
SIMILARITY_TOLERANCE = 1e-6  # float32 cosines: a neighbour this close below the threshold is at it
UNIT_TOLERANCE = 1e-6  # rows whose norm is within this of 1 are kept as they are (round trips stay exact)
BATCH_CELLS = 1 << 24  # vote_batch: at most this many similarities (64 MB of float32) at once
SHOWN_NEIGHBOURS = 3


Weighting = Literal["cosine", "margin"]


@dataclass(frozen=True, slots=True)
class LibrarySettings:
    """How the library votes: the k nearest queries are looked at, those with a cosine of at least
    `threshold` count as close, each with a weight — its cosine (`cosine`), or how far its cosine clears
    the threshold, (cos - threshold) / (1 - threshold) (`margin`: a neighbour just at the threshold
    barely counts, a duplicate counts 1, so a loose threshold cannot let one distant query swing a
    route) — and their vote weighs w = S / (S + strength), S the sum of their weights."""

    threshold: float = 0.85  # cosine a neighbour needs to count as close
    k: int = 10  # neighbours looked at
    strength: float = 2.0  # blend weight w = S / (S + strength), S = sum of the close neighbours' weights
    weighting: Weighting = "cosine"

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise InputError(f"library threshold must be a cosine in (0, 1], got {self.threshold}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError(f"library k must be a positive integer, got {self.k!r}")
        if not self.strength > 0.0:
            raise InputError(f"library strength must be positive, got {self.strength}")
        if self.weighting not in ("cosine", "margin"):
            raise InputError(f"library weighting must be cosine or margin, got {self.weighting!r}")

    def weights(self, cosines: np.ndarray) -> np.ndarray:
        """Each close neighbour's weight in the vote (cosines at or above the threshold)."""
        c = np.asarray(cosines, dtype=np.float64)
        if self.weighting == "cosine":
            return c
        # a floor keeps a neighbour exactly at the threshold in the vote (its share defined), nearly weightless
        return np.maximum((c - self.threshold) / max(1.0 - self.threshold, 1e-6), 1e-6)


@dataclass(frozen=True, slots=True)
class LibraryVote:
    """What the close neighbours of one query say about its hop structure."""

    p_multi: float  # weighted share of multi_hop among the close neighbours (LibrarySettings.weights)
    weight: float  # w in [0, 1)
    n_close: int
    max_similarity: float
    neighbours: tuple[tuple[str, str, float], ...]  # up to 3: (question, hop label, cosine), best first

    def to_dict(self) -> dict[str, Any]:
        return {"p_multi": round(self.p_multi, 4), "weight": round(self.weight, 4), "n_close": self.n_close,
                "max_similarity": round(self.max_similarity, 4),
                "neighbours": [{"question": q, "hop": h, "similarity": round(s, 4)} for q, h, s in self.neighbours]}


@dataclass(frozen=True, slots=True)
class BatchVotes:
    """`vote` for many queries at once, as arrays (n,). Where no neighbour is close: n_close 0,
    weight 0 and p_multi NaN; max_similarity is NaN only for an empty library."""

    p_multi: np.ndarray
    weight: np.ndarray
    n_close: np.ndarray
    max_similarity: np.ndarray

    def __len__(self) -> int:
        return len(self.weight)

    def blend(self, p_multi_classifier: np.ndarray) -> np.ndarray:
        """(1 - w) p + w p_lib per query; p itself where the library has no close neighbour."""
        p = np.asarray(p_multi_classifier, dtype=np.float64)
        if p.shape != self.weight.shape:
            raise InputError(f"classifier probabilities of shape {p.shape} for {len(self)} votes")
        return np.where(self.n_close > 0, (1.0 - self.weight) * p + self.weight * np.nan_to_num(self.p_multi), p)


@dataclass(frozen=True, slots=True)
class LibraryAddReport:
    """Per given query, once: new to the library, relabelled (its stored label changed) or unchanged."""

    added: int
    relabelled: int
    unchanged: int

    def to_dict(self) -> dict[str, int]:
        return {"added": self.added, "relabelled": self.relabelled, "unchanged": self.unchanged}


class QueryLibrary:
    """Labelled queries with unit-normalised float32 vectors; deduplicated by
    `amsrag.ingest.datasets.normalise_question` (re-adding a question with another label relabels
    it: the latest confirmation wins).

    A library an index hands out (`PassageIndex.query_library()`) is shared by every reader: treat it
    as read-only, and `copy()` it before `add` when the result is to be saved.
    """

    def __init__(self, questions: list[str], hops: np.ndarray, vectors: np.ndarray, sources: list[str]) -> None:
        questions, sources = list(questions), list(sources)
        vectors = np.asarray(vectors)
        n = len(questions)
        if vectors.ndim != 2 or len(vectors) != n:
            raise InputError(f"{n} questions need vectors of shape ({n}, dim), got {vectors.shape}")
        if len(sources) != n:
            raise InputError(f"{n} questions but {len(sources)} sources")
        multi = _hop_codes(hops, questions)
        keys = _keys(questions)
        for source, question in zip(sources, questions, strict=True):
            _check_source(source, question)
        seen: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key in seen:
                raise InputError(f"question {questions[i]!r} is in the library twice (as {questions[seen[key]]!r}); "
                                 f"questions are unique after normalisation")
            seen[key] = i
        self._questions = questions
        self._keys = keys
        self._multi = multi
        self._vectors = _unit(vectors, lambda i: f"question {questions[i]!r}")
        self._sources = sources
        self._row: dict[str, int] = seen

    @classmethod
    def empty(cls, dim: int = DIMENSION) -> QueryLibrary:
        return cls([], np.zeros(0, np.int8), np.zeros((0, dim), np.float32), [])

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return len(self._questions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QueryLibrary):
            return NotImplemented
        return (self._questions == other._questions and self._sources == other._sources
                and np.array_equal(self._multi, other._multi) and self._vectors.shape == other._vectors.shape
                and np.array_equal(self._vectors, other._vectors))

    def __repr__(self) -> str:
        return f"QueryLibrary({len(self)} queries, {self.counts()})"

    @property
    def dim(self) -> int:
        return int(self._vectors.shape[1])

    @property
    def questions(self) -> list[str]:
        return list(self._questions)

    @property
    def keys(self) -> list[str]:
        """The dedup key (`normalise_question`) of every question, in library order."""
        return list(self._keys)

    @property
    def hops(self) -> list[str]:
        return [HOP_LABELS[int(m)] for m in self._multi]

    @property
    def sources(self) -> list[str]:
        return list(self._sources)

    @property
    def vectors(self) -> np.ndarray:
        """The stored unit vectors (n, dim), read-only."""
        view = self._vectors.view()
        view.flags.writeable = False
        return view

    def hop_of(self, question: str) -> str | None:
        """The stored label of `question` (matched after normalisation), None when it is not stored."""
        row = self._row.get(normalise_question(question))
        return None if row is None else HOP_LABELS[int(self._multi[row])]

    def counts(self) -> dict[str, int]:
        """Queries per hop label (every label, 0 included) and per source, the latter keyed `source:NAME`."""
        out: dict[str, int] = {hop: int(np.count_nonzero(self._multi == code)) for code, hop in enumerate(HOP_LABELS)}
        for source, n in sorted(Counter(self._sources).items()):
            out[f"source:{source}"] = n
        return out

    def copy(self) -> QueryLibrary:
        return QueryLibrary.from_arrays(self.to_arrays())

    # ---------------------------------------------------------------- voting
    def vote(self, vector: np.ndarray, settings: LibrarySettings) -> LibraryVote | None:
        """The vote of the close neighbours of the query `vector` (normalised here); None when no
        stored query has a cosine of at least `settings.threshold`."""
        v = np.asarray(vector, dtype=np.float32)
        if v.shape != (self.dim,):
            raise InputError(f"query vector must have shape ({self.dim},), got {v.shape}")
        v = _unit(v[None, :], lambda i: "the query")[0]
        n = len(self)
        if n == 0:
            return None
        sims = self._vectors @ v
        k = min(settings.k, n)
        top = np.argpartition(sims, n - k)[n - k :] if k < n else np.arange(n)
        top = top[np.lexsort((top, -sims[top]))]  # best first, ties by library order
        s = sims[top].astype(np.float64)
        close = s >= settings.threshold - SIMILARITY_TOLERANCE
        if not close.any():
            return None
        rows, s = top[close], s[close]
        w = settings.weights(s)
        total = float(w.sum())
        p_multi = float((w * self._multi[rows]).sum() / total)
        shown = tuple((self._questions[int(r)], HOP_LABELS[int(self._multi[r])], float(c))
                      for r, c in zip(rows[:SHOWN_NEIGHBOURS], s[:SHOWN_NEIGHBOURS], strict=True))
        return LibraryVote(p_multi=p_multi, weight=total / (total + settings.strength), n_close=int(close.sum()),
                           max_similarity=float(s[0]), neighbours=shown)

    def vote_batch(self, vectors: np.ndarray, settings: LibrarySettings) -> BatchVotes:
        """`vote` for every row of `vectors` (m, dim), in chunks so the m x n similarities never
        exceed `BATCH_CELLS` at once (10k x 10k runs in ~64 MB)."""
        q = np.asarray(vectors, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise InputError(f"query vectors must have shape (m, {self.dim}), got {q.shape}")
        m, n = len(q), len(self)
        p_multi = np.full(m, np.nan)
        weight = np.zeros(m)
        n_close = np.zeros(m, np.int64)
        max_similarity = np.full(m, np.nan)
        if m == 0 or n == 0:
            return BatchVotes(p_multi, weight, n_close, max_similarity)
        q = _unit(q, lambda i: f"query {i}")
        k = min(settings.k, n)
        step = max(1, BATCH_CELLS // n)
        multi = self._multi.astype(np.float64)
        for start in range(0, m, step):
            sims = q[start : start + step] @ self._vectors.T
            top = (np.argpartition(sims, n - k, axis=1)[:, n - k :] if k < n
                   else np.broadcast_to(np.arange(n), sims.shape))
            s = np.take_along_axis(sims, top, axis=1).astype(np.float64)
            close = s >= settings.threshold - SIMILARITY_TOLERANCE
            cs = np.where(close, settings.weights(s), 0.0)
            total = cs.sum(axis=1)
            voted = (cs * multi[top]).sum(axis=1)
            rows = slice(start, start + len(sims))
            n_close[rows] = close.sum(axis=1)
            max_similarity[rows] = s.max(axis=1)
            weight[rows] = total / (total + settings.strength)
            with np.errstate(invalid="ignore", divide="ignore"):
                p_multi[rows] = np.where(total > 0, voted / np.where(total > 0, total, 1.0), np.nan)
        return BatchVotes(p_multi, weight, n_close, max_similarity)

    # ---------------------------------------------------------------- writing
    def add(self, questions: Sequence[str], hops: Sequence[str], vectors: np.ndarray, source: str) -> LibraryAddReport:
        """Add labelled queries with their embeddings (normalised here), all or nothing: everything is
        checked before the library changes. Each given query counts once, in order: added (new),
        relabelled (stored with the other label, which it now replaces, with its text, vector and
        source) or unchanged (stored with this label; left as it is)."""
        questions = list(questions)
        n = len(questions)
        if len(hops) != n:
            raise InputError(f"{n} questions but {len(hops)} hop labels")
        v = np.asarray(vectors)
        if v.ndim != 2 or v.shape != (n, self.dim):
            raise InputError(f"{n} questions need vectors of shape ({n}, {self.dim}), got {v.shape}")
        multi = _hop_codes(np.asarray(list(hops), dtype=object), questions)
        keys = _keys(questions)
        for question in questions:
            _check_source(source, question)
        v = _unit(v, lambda i: f"question {questions[i]!r}")

        row = dict(self._row)
        qs, srcs = list(self._questions), list(self._sources)
        all_keys = list(self._keys)
        new_multi: list[int] = []
        new_vectors: list[int] = []  # positions in `v` of the queries new to the library
        replaced: dict[int, int] = {}  # stored row -> position in `v` of its latest relabel
        stored_multi = self._multi.copy()
        added = relabelled = unchanged = 0
        for i, key in enumerate(keys):
            r = row.get(key)
            if r is None:
                row[key] = len(qs)
                qs.append(questions[i])
                srcs.append(source)
                all_keys.append(key)
                new_multi.append(int(multi[i]))
                new_vectors.append(i)
                added += 1
                continue
            current = int(stored_multi[r]) if r < len(stored_multi) else new_multi[r - len(stored_multi)]
            if current == int(multi[i]):
                unchanged += 1
                continue
            relabelled += 1
            qs[r], srcs[r] = questions[i], source
            if r < len(stored_multi):
                stored_multi[r] = multi[i]
                replaced[r] = i
            else:
                new_multi[r - len(stored_multi)] = int(multi[i])
                new_vectors[r - len(stored_multi)] = i
        if added == relabelled == 0:
            return LibraryAddReport(0, 0, unchanged)
        out = np.concatenate([self._vectors, v[new_vectors]]) if new_vectors else self._vectors.copy()
        for r, i in replaced.items():
            out[r] = v[i]
        self._questions, self._sources, self._keys, self._row = qs, srcs, all_keys, row
        self._multi = np.concatenate([stored_multi, np.asarray(new_multi, dtype=np.int8)])
        self._vectors = np.ascontiguousarray(out)
        return LibraryAddReport(added, relabelled, unchanged)

    # ---------------------------------------------------------------- storage
    def to_arrays(self) -> dict[str, np.ndarray]:
        """questions, hops (labels), sources as unicode arrays and vectors (n, dim) float32: what a
        store saves (`np.savez` needs no pickling for them)."""
        return {"questions": np.asarray(self._questions, dtype=np.str_),
                "hops": np.asarray(self.hops, dtype=np.str_),
                "vectors": self._vectors.copy(),
                "sources": np.asarray(self._sources, dtype=np.str_)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> QueryLibrary:
        missing = [k for k in ARRAY_KEYS if k not in arrays]
        if missing:
            raise InputError(f"query library arrays lack {', '.join(missing)} (expected {', '.join(ARRAY_KEYS)})")
        vectors = np.asarray(arrays["vectors"])
        if vectors.ndim != 2:
            raise InputError(f"query library vectors must be (n, dim), got shape {vectors.shape}")
        return cls([str(q) for q in np.asarray(arrays["questions"]).tolist()], np.asarray(arrays["hops"]),
                   vectors, [str(s) for s in np.asarray(arrays["sources"]).tolist()])


def _hop_codes(hops: np.ndarray | Sequence[Any], questions: Sequence[str]) -> np.ndarray:
    """0 for one_hop, 1 for multi_hop per question (labels, or those codes, are accepted)."""
    values = np.asarray(hops)
    if values.ndim != 1 or len(values) != len(questions):
        raise InputError(f"{len(questions)} questions but hop labels of shape {values.shape}")
    if values.dtype.kind in "iub":
        bad = [(i, h) for i, h in enumerate(values.tolist()) if h not in (0, 1)]
        if bad:
            raise InputError(f"unknown hop code {bad[0][1]!r} for question {questions[bad[0][0]]!r}: "
                             f"0 (one_hop) or 1 (multi_hop)")
        return values.astype(np.int8)
    codes = np.zeros(len(questions), np.int8)
    for i, hop in enumerate(values.tolist()):
        if hop not in HOP_LABELS:
            raise InputError(f"unknown hop label {hop!r} for question {questions[i]!r}; "
                             f"use one of {', '.join(HOP_LABELS)}")
        codes[i] = HOP_LABELS.index(hop)
    return codes


def _keys(questions: Sequence[str]) -> list[str]:
    keys = []
    for i, q in enumerate(questions):
        if not isinstance(q, str):
            raise InputError(f"question {i} is a {type(q).__name__}, not text")
        key = normalise_question(q)
        if not key:
            raise InputError(f"question {i} ({q!r}) is empty: a library query needs words")
        keys.append(key)
    return keys


def _check_source(source: Any, question: str) -> None:
    if not isinstance(source, str) or not source.strip():
        raise InputError(f"the source of question {question!r} must be a non-empty name, got {source!r}")


def _unit(vectors: np.ndarray, name: Callable[[int], str]) -> np.ndarray:
    """Rows scaled to unit length as contiguous float32 (rows already unit within UNIT_TOLERANCE are
    kept bit for bit); NaN, infinite or zero rows are an InputError naming the row (`name(i)`)."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    if not v.size:
        return v.copy()
    finite = np.isfinite(v).all(axis=1)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise InputError(f"the vector of {name(bad)} holds NaN or infinite values")
    norms = np.linalg.norm(v.astype(np.float64), axis=1)
    if (norms == 0).any():
        bad = int(np.argmin(norms))
        raise InputError(f"the vector of {name(bad)} is all zeros")
    off = np.abs(norms - 1.0) > UNIT_TOLERANCE
    out = v.copy()
    if off.any():
        out[off] = (v[off] / norms[off, None]).astype(np.float32)
    return out
