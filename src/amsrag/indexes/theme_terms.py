"""Label terms: unstemmed lower-case word tokens and class-based TF-IDF (BERTopic's c-TF-IDF).

Tokens are runs of three or more letters (no digits, no underscore), lower-cased, minus English stop
words (bm25s's list and scikit-learn's). The weight of term t in theme c is
tf(t, c) * log(1 + A / f(t)): tf the term's share of the theme's tokens, A the mean number of tokens per
theme, f(t) the term's count across all themes.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN
from scipy import sparse

_WORD = re.compile(r"\b[^\W\d_]{3,}\b")
_STEMMER = Stemmer.Stemmer("english")


@functools.cache
def stopwords() -> frozenset[str]:
    """The words never used as labels: bm25s's and scikit-learn's English lists (scikit-learn imported here,
    on the first label, not with the module: the index opens without it)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(STOPWORDS_EN) | frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str) -> list[str]:
    """The label tokens of `text`, in order."""
    return [t for t in _WORD.findall(text.lower()) if t not in stopwords()]


def stem(words: Iterable[str]) -> list[str]:
    return list(_STEMMER.stemWords(list(words)))


def count_terms(texts: Sequence[str], labels: np.ndarray, n_themes: int, vocab: Sequence[str]
                ) -> tuple[list[str], sparse.csr_matrix]:
    """Per-theme term counts of `texts` (theme `labels[i]`; -1 skipped), over `vocab` extended by the new
    terms (appended in sorted order, so the result depends on the inputs alone)."""
    index = {t: i for i, t in enumerate(vocab)}
    per_text = [Counter(tokenize(t)) for t in texts]
    new = sorted({w for c in per_text for w in c if w not in index})
    vocab_out = list(vocab) + new
    for w in new:
        index[w] = len(index)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[int] = []
    for theme, counts in zip(labels.tolist(), per_text, strict=True):
        if theme < 0:
            continue
        for w, n in counts.items():
            rows.append(theme)
            cols.append(index[w])
            vals.append(n)
    m = sparse.csr_matrix((np.asarray(vals, np.int64), (np.asarray(rows, np.int64), np.asarray(cols, np.int64))),
                          shape=(n_themes, len(vocab_out)), dtype=np.int64)
    m.sum_duplicates()
    return vocab_out, m


def widen(m: sparse.csr_matrix, n_cols: int) -> sparse.csr_matrix:
    """`m` with zero columns appended up to `n_cols`."""
    return sparse.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], n_cols))


def ctfidf(counts: sparse.csr_matrix) -> sparse.csr_matrix:
    """c-TF-IDF weights of a (themes x terms) count matrix."""
    counts = sparse.csr_matrix(counts, dtype=np.float64)
    totals = np.asarray(counts.sum(axis=1)).ravel()
    freq = np.asarray(counts.sum(axis=0)).ravel()
    nonempty = totals > 0
    mean_tokens = float(totals[nonempty].mean()) if nonempty.any() else 0.0
    idf = np.log1p(mean_tokens / np.maximum(freq, 1.0))
    tf = sparse.diags(1.0 / np.maximum(totals, 1.0)) @ counts
    return sparse.csr_matrix(tf @ sparse.diags(idf))


def top_terms(counts: sparse.csr_matrix, vocab: Sequence[str], n: int) -> list[list[tuple[str, float]]]:
    """The `n` best c-TF-IDF terms of each theme (ties by term), skipping a term whose stem an earlier,
    better term of the same theme already has ("huguenot" after "huguenots")."""
    weights = ctfidf(counts)
    out: list[list[tuple[str, float]]] = []
    for r in range(weights.shape[0]):
        lo, hi = weights.indptr[r], weights.indptr[r + 1]
        cols, vals = weights.indices[lo:hi], weights.data[lo:hi]
        if len(cols) > 4 * n + 32:  # only the best few can be picked: rank those (and every tie of the last)
            cut = np.partition(vals, len(vals) - (4 * n + 32))[len(vals) - (4 * n + 32)]
            keep = np.flatnonzero(vals >= cut)
            cols, vals = cols[keep], vals[keep]
        order = sorted(range(len(cols)), key=lambda i: (-vals[i], vocab[cols[i]]))
        picked: list[tuple[str, float]] = []
        stems: set[str] = set()
        for i in order:
            if vals[i] <= 0:
                break
            term = vocab[cols[i]]
            s = _STEMMER.stemWord(term)
            if s in stems:
                continue
            stems.add(s)
            picked.append((term, float(vals[i])))
            if len(picked) == n:
                break
        out.append(picked)
    return out
