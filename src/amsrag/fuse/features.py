"""Features of fused candidates for the learned reranker (DESIGN §5, issue 16): what is known about each
candidate at query time without another model pass.

One row per candidate, columns `FEATURES`:

* per retriever r of `FEATURE_RETRIEVERS`: whether r ran for this query, 1/rank in r's list (0 when r did
  not list it), its score over the top score of r's list (NaN when not listed: LightGBM's missing value);
* the second hop: whether it ran, 1/rank in its list;
* the base fusion (CA-RRF or RRF, with the second hop): 1/rank and score over the top score; how many lists
  hold the candidate;
* query–passage dense cosine (stored vectors), its gap to the best candidate's and its 1/rank among them;
* BM25 of the candidate for the query, also when BM25 did not return it (`CandidateSignals.bm25_scores`),
  over the best candidate's and its 1/rank;
* title words found in the question, the whole title in the question, the share of the question's
  entities the passage mentions;
* the classifier: p(multi_hop), p(zero_hop), alpha of the routed class, the number of question entities,
  the number of candidates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

from amsrag.fuse.base import FusedItem, FusedList
from amsrag.types import Hit

FEATURE_RETRIEVERS: tuple[str, ...] = ("bm25", "dense", "graph")
HOP_LIST = "hop2"  # the second hop's list, beside the retrievers' (pipeline.multihop)
FEATURES_VERSION = 1

FEATURES: tuple[str, ...] = (
    *(f"{r}_{what}" for r in FEATURE_RETRIEVERS for what in ("ran", "rrank", "score")),
    "hop2_ran", "hop2_rrank",
    "base_rrank", "base_score", "n_lists",
    "cos", "cos_gap", "cos_rrank",
    "bm25_all", "bm25_rel", "bm25_all_rrank",
    "title_overlap", "title_in_query", "entity_share",
    "p_multi", "p_zero", "alpha", "query_entities", "n_candidates",
)
_WORD = re.compile(r"\w+")


@runtime_checkable
class CandidateSignals(Protocol):
    """What the features read from the index, for any candidate rows."""

    def vectors(self, rows: Sequence[int]) -> np.ndarray: ...

    def bm25_scores(self, query: str, rows: Sequence[int]) -> np.ndarray: ...

    def entity_share(self, query: str, rows: Sequence[int]) -> tuple[np.ndarray, int]:
        """Per row, the share of the query's entities the passage mentions; and the query's entity count."""
        ...


@dataclass(frozen=True, slots=True)
class QueryInputs:
    """The query-level inputs: its text and vector, and the classifier's view of it."""

    query: str
    vector: np.ndarray
    p_multi: float
    p_zero: float
    alpha: float


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 1}


@lru_cache(maxsize=4096)
def _title_terms(title: str) -> tuple[frozenset[str], str]:
    """A title's words and its words joined by single spaces (titles recur across queries: cached)."""
    return frozenset(_words(title)), " ".join(_WORD.findall(title.lower()))


def _reciprocal_ranks(values: np.ndarray) -> np.ndarray:
    """1 / (position in descending order, from 1); ties share the better position."""
    distinct, inverse = np.unique(-values, return_inverse=True)  # ascending -value = descending value
    first = np.searchsorted(np.sort(-values), distinct)  # the position each distinct value starts at
    return 1.0 / (first[inverse] + 1.0)


def candidate_features(candidates: Sequence[FusedItem], lists: Mapping[str, Sequence[Hit]], base: FusedList,
                       context: QueryInputs, signals: CandidateSignals) -> np.ndarray:
    """The feature matrix (len(candidates) x len(FEATURES)), float64, columns in `FEATURES` order.

    `lists`: the retrievers' ranked lists (keys among FEATURE_RETRIEVERS) and the second hop's (`HOP_LIST`);
    `base`: the fused list the candidates were taken from.
    """
    n = len(candidates)
    col = {name: i for i, name in enumerate(FEATURES)}
    x = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if n == 0:
        return x
    ids = [c.id for c in candidates]
    rows = [c.row for c in candidates]
    position = {pid: i for i, pid in enumerate(ids)}
    listed = np.zeros(n)
    for r in (*FEATURE_RETRIEVERS, HOP_LIST):
        hits = lists.get(r)
        ran = hits is not None
        x[:, col[f"{r}_ran"]] = float(ran)
        if r != HOP_LIST:
            x[:, col[f"{r}_score"]] = np.nan
        if not ran or not hits:
            continue
        top = max(float(hits[0].score), 1e-12)
        seen: set[str] = set()
        for h in hits:
            i = position.get(h.id)
            if i is None or h.id in seen:
                continue
            seen.add(h.id)
            listed[i] += r != HOP_LIST
            x[i, col[f"{r}_rrank"]] = 1.0 / h.rank
            if r != HOP_LIST:
                x[i, col[f"{r}_score"]] = float(h.score) / top
    base_rank = {it.id: i + 1 for i, it in enumerate(base.items)}
    top_base = max(float(base.items[0].score), 1e-12) if len(base) else 1.0
    x[:, col["base_rrank"]] = [1.0 / base_rank[c.id] if c.id in base_rank else 0.0 for c in candidates]
    x[:, col["base_score"]] = [c.score / top_base for c in candidates]
    x[:, col["n_lists"]] = listed

    vecs = np.asarray(signals.vectors(rows), dtype=np.float32)
    q = np.asarray(context.vector, dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
    cos = (vecs @ q).astype(np.float64) / np.maximum(norms, 1e-12)
    x[:, col["cos"]] = cos
    x[:, col["cos_gap"]] = cos - cos.max()
    x[:, col["cos_rrank"]] = _reciprocal_ranks(cos)
    bm = np.asarray(signals.bm25_scores(context.query, rows), dtype=np.float64)
    x[:, col["bm25_all"]] = bm
    x[:, col["bm25_rel"]] = bm / bm.max() if bm.max() > 0 else 0.0
    x[:, col["bm25_all_rrank"]] = _reciprocal_ranks(bm)

    query_words = _words(context.query)
    lowered = " ".join(_WORD.findall(context.query.lower()))
    padded = f" {lowered} "
    for i, c in enumerate(candidates):
        title, phrase = _title_terms(c.title)
        if title:
            x[i, col["title_overlap"]] = len(title & query_words) / len(title)
            x[i, col["title_in_query"]] = float(bool(phrase) and f" {phrase} " in padded)
    share, n_entities = signals.entity_share(context.query, rows)
    x[:, col["entity_share"]] = share
    x[:, col["p_multi"]] = context.p_multi
    x[:, col["p_zero"]] = context.p_zero
    x[:, col["alpha"]] = context.alpha
    x[:, col["query_entities"]] = n_entities
    x[:, col["n_candidates"]] = n
    return x
