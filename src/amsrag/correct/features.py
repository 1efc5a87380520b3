"""Features of (query, passage) pairs within one candidate list, for the retrieval evaluator.

Some features are list-relative (BM25 normalised by the list's best, cosine minus the list's best):
the evaluator sees a candidate list as the corrective step does, not isolated pairs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.correct.text import (
    QueryInfo,
    content_terms,
    entity_coverage,
    mentions,
    type_match,
)
from amsrag.indexes.entities import entity_key, title_surfaces

FEATURE_VERSION = 1
FEATURE_NAMES: tuple[str, ...] = (
    "cos",  # dense cosine query . passage
    "cos_rel",  # cos minus the list's best cos
    "cos_rank_recip",  # 1 / rank of cos in the list
    "sent_max",  # best sentence cosine
    "sent_rel",  # sent_max minus the list's best sent_max
    "sent_top2",  # mean of the two best sentence cosines
    "bm25_norm",  # BM25 within the list (IDF over the list) / the list's best
    "term_cov",  # share of the query's content terms in the passage
    "title_in_query",  # the passage title (or its alias) is named in the query
    "title_term_cov",  # share of the title's content terms in the query
    "ent_cov",  # mean coverage of the query's key entities in the passage
    "has_entities",  # the query has key entities
    "type_known",  # the question's expected answer type is known
    "type_match",  # the passage carries an entity / value of that type
    "log_len",  # log(1 + passage words) / 5
)
N_FEATURES = len(FEATURE_NAMES)


@dataclass(frozen=True, slots=True)
class PassageView:
    """What the features need of one passage: text, its vectors and NER labels."""

    title: str
    text: str
    vector: np.ndarray  # (384,)
    sentence_vectors: np.ndarray  # (n_sentences, 384); may be empty
    labels: frozenset[str]


def bm25_in_list(query_terms: Sequence[str], docs: Sequence[Sequence[str]], k1: float = 1.2,
                 b: float = 0.75) -> np.ndarray:
    n = len(docs)
    if n == 0 or not query_terms:
        return np.zeros(n)
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    avgdl = max(sum(len(d) for d in docs) / n, 1e-9)
    scores = np.zeros(n)
    for i, d in enumerate(docs):
        tf = Counter(d)
        norm = k1 * (1 - b + b * len(d) / avgdl)
        for t in query_terms:
            f = tf.get(t, 0)
            if f:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                scores[i] += idf * f * (k1 + 1) / (f + norm)
    return scores


def list_features(query: QueryInfo, query_vector: np.ndarray, passages: Sequence[PassageView]) -> np.ndarray:
    """(n, N_FEATURES) features of every passage of one candidate list."""
    n = len(passages)
    x = np.zeros((n, N_FEATURES), dtype=np.float64)
    if n == 0:
        return x
    q = np.asarray(query_vector, dtype=np.float64)
    cos = np.array([float(p.vector @ q) for p in passages])
    sent_max = np.empty(n)
    sent_top2 = np.empty(n)
    for i, p in enumerate(passages):
        if len(p.sentence_vectors):
            s = np.sort(p.sentence_vectors @ q)[::-1]
            sent_max[i], sent_top2[i] = s[0], s[: min(2, len(s))].mean()
        else:
            sent_max[i] = sent_top2[i] = cos[i]
    docs = [content_terms(f"{p.title}\n{p.text}") for p in passages]
    bm = bm25_in_list(list(query.terms), docs)
    rank = np.empty(n)
    rank[np.argsort(-cos, kind="stable")] = np.arange(1, n + 1)
    q_terms = set(query.terms)
    q_low = query.text.lower()
    for i, p in enumerate(passages):
        d_terms = set(docs[i])
        low = f"{p.title}\n{p.text}".lower()
        title_keys = [entity_key(s) for s in title_surfaces(p.title)]
        t_terms = set(content_terms(p.title))
        ents = [entity_coverage(k, low, d_terms) for k in query.entities]
        x[i] = (
            cos[i],
            cos[i] - cos.max(),
            1.0 / rank[i],
            sent_max[i],
            sent_max[i] - sent_max.max(),
            sent_top2[i],
            bm[i] / bm.max() if bm.max() > 0 else 0.0,
            len(q_terms & d_terms) / len(q_terms) if q_terms else 0.0,
            1.0 if any(len(k) >= 3 and mentions(q_low, k) for k in title_keys) else 0.0,
            len(t_terms & q_terms) / len(t_terms) if t_terms else 0.0,
            float(np.mean(ents)) if ents else 0.0,
            1.0 if query.entities else 0.0,
            0.0 if query.answer_type == "other" else 1.0,
            type_match(query.answer_type, p.labels),
            math.log1p(len(p.text.split())) / 5.0,
        )
    return x
