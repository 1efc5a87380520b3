"""Sparse retrieval: BM25 through bm25s, English stemming and stop words.

bm25s indexes are static, so the index keeps every passage's token ids and re-indexes from them
on change: tokenising (the slow part) happens once per passage, re-indexing 30k passages takes
about a second.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from amsrag.config import BM25Config
from amsrag.retrieve.base import RowLookup, check_k, check_query
from amsrag.retrieve.topk import topk_indices
from amsrag.types import Hit, PassageRow

TOKENIZER_VERSION = "amsrag-bm25-tokenizer-1"
_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")


class BM25Tokenizer:
    """Lowercase word tokens of two or more characters, stop words removed, Snowball-stemmed."""

    def __init__(self, config: BM25Config) -> None:
        self._stop = frozenset(STOPWORDS_EN) if config.stopwords == "en" else frozenset()
        self._stemmer = Stemmer.Stemmer("english") if config.stemmer == "english" else None

    def __call__(self, text: str) -> list[str]:
        tokens = [t for t in _TOKEN_RE.findall(text.lower()) if t not in self._stop]
        return self._stemmer.stemWords(tokens) if self._stemmer is not None else tokens

    def content_words(self, text: str) -> set[str]:
        return set(self(text))


def passage_text_for_bm25(title: str, text: str) -> str:
    return f"{title}\n{text}" if title else text


@dataclass
class TokenCache:
    """Token ids of every indexed passage: `flat[offsets[i]:offsets[i+1]]` belongs to `rows[i]`."""

    rows: np.ndarray  # int64, ascending
    offsets: np.ndarray  # int64, len(rows) + 1
    flat: np.ndarray  # int32 ids into vocab
    vocab: list[str]

    @classmethod
    def empty(cls) -> TokenCache:
        return cls(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32), [])

    def updated(self, added: Sequence[tuple[int, list[str]]], removed_rows: Sequence[int]) -> TokenCache:
        """A new cache with `removed_rows` dropped and `added` appended.

        The vocabulary is compacted to the tokens still used and sorted, so the cache equals the one a
        full build of the same passages makes. Integer work only: kept passages are not re-tokenised.
        """
        keep = ~np.isin(self.rows, np.asarray(removed_rows, dtype=np.int64))
        lengths = np.diff(self.offsets)
        kept_flat = self.flat[np.repeat(keep, lengths)].astype(np.int64)
        index = {tok: i for i, tok in enumerate(self.vocab)}
        extra: list[str] = []
        new_ids: list[int] = []
        for _, tokens in added:
            for tok in tokens:
                j = index.get(tok)
                if j is None:
                    j = index[tok] = len(self.vocab) + len(extra)
                    extra.append(tok)
                new_ids.append(j)
        all_ids = np.concatenate([kept_flat, np.asarray(new_ids, dtype=np.int64)])
        combined = self.vocab + extra
        used = np.unique(all_ids)
        used_tokens = [combined[i] for i in used.tolist()]
        order = sorted(range(len(used_tokens)), key=used_tokens.__getitem__)
        remap = np.zeros(len(combined), dtype=np.int32)
        remap[used[order]] = np.arange(len(order), dtype=np.int32)
        flat = remap[all_ids]
        row_lengths = np.concatenate([lengths[keep], np.asarray([len(t) for _, t in added], dtype=np.int64)])
        rows = np.concatenate([self.rows[keep], np.asarray([r for r, _ in added], dtype=np.int64)])
        offsets = np.concatenate([[0], np.cumsum(row_lengths)]).astype(np.int64)
        if len(rows) > 1 and np.any(np.diff(rows) < 0):
            by_row = np.argsort(rows, kind="stable")
            flat = np.concatenate([flat[offsets[i] : offsets[i + 1]] for i in by_row])
            rows = rows[by_row]
            offsets = np.concatenate([[0], np.cumsum(row_lengths[by_row])]).astype(np.int64)
        return TokenCache(rows, offsets, flat.astype(np.int32), [used_tokens[i] for i in order])

    def doc_ids(self) -> list[list[int]]:
        return [self.flat[self.offsets[i] : self.offsets[i + 1]].tolist() for i in range(len(self.rows))]

    def save(self, directory: Path) -> None:
        np.savez(directory / "tokens.npz", rows=self.rows, offsets=self.offsets, flat=self.flat)
        (directory / "vocab.json").write_text(json.dumps(self.vocab), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> TokenCache:
        with np.load(directory / "tokens.npz") as z:
            rows, offsets, flat = z["rows"], z["offsets"], z["flat"]
        vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        return cls(rows, offsets, flat, vocab)


class BM25Index:
    """bm25s scores over the token cache; document i of bm25s is store row `rows[i]`."""

    def __init__(self, config: BM25Config, cache: TokenCache) -> None:
        self.config = config
        self.cache = cache
        self.tokenizer = BM25Tokenizer(config)
        self.vocab_ids = {tok: i for i, tok in enumerate(cache.vocab)}
        self._bm25 = bm25s.BM25(k1=config.k1, b=config.b, delta=config.delta, method=config.method,
                                backend=config.backend)
        if len(cache.rows):
            # vocab ids are already dense 0..V-1: hand bm25s an identity vocabulary.
            self._bm25.index((cache.doc_ids(), {i: i for i in range(len(cache.vocab))}),
                             create_empty_token=False, show_progress=False)

    @property
    def rows(self) -> np.ndarray:
        return self.cache.rows

    @staticmethod
    def params(config: BM25Config) -> dict[str, object]:
        """What stored token caches depend on. bm25s itself is not listed: its index is rebuilt on load."""
        return {**config.model_dump(mode="json"), "tokenizer": TOKENIZER_VERSION,
                "stemmer_lib": f"PyStemmer=={Stemmer.version()}"}

    @classmethod
    def build(cls, rows: Sequence[PassageRow], config: BM25Config,
              progress: Callable[[int], None] | None = None) -> BM25Index:
        return cls.empty(config).updated(rows, [], progress)

    @classmethod
    def empty(cls, config: BM25Config) -> BM25Index:
        return cls(config, TokenCache.empty())

    def updated(self, added: Sequence[PassageRow], removed_rows: Sequence[int],
                progress: Callable[[int], None] | None = None) -> BM25Index:
        tokenized: list[tuple[int, list[str]]] = []
        for i, p in enumerate(added):
            tokenized.append((p.row, self.tokenizer(passage_text_for_bm25(p.title, p.text))))
            if progress is not None and (i + 1) % 500 == 0:
                progress(500)
        if progress is not None and len(added) % 500:
            progress(len(added) % 500)
        return BM25Index(self.config, self.cache.updated(tokenized, removed_rows))

    def save(self, directory: Path) -> None:
        self.cache.save(directory)

    @classmethod
    def load(cls, directory: Path, config: BM25Config) -> BM25Index:
        return cls(config, TokenCache.load(directory))

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray:
        """BM25 score of the passages at store rows `rows` (0 for a row not indexed), equal to their entries of
        `scores(query)`, read from bm25s's per-token postings: the cost grows with the query's postings and
        the number of rows, not with the corpus."""
        wanted = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(wanted), dtype=np.float32)
        ids = [self.vocab_ids[t] for t in self.tokenizer(query) if t in self.vocab_ids]
        if not ids or not len(self.rows) or not len(wanted):
            return out
        pos = np.searchsorted(self.rows, wanted)
        pos[pos >= len(self.rows)] = 0
        present = self.rows[pos] == wanted
        docs = pos[present]
        postings = self._bm25.scores
        data, indices, indptr = postings["data"], postings["indices"], postings["indptr"]
        acc = np.zeros(len(docs), dtype=np.float32)
        for t in ids:  # a query word that occurs twice counts twice, as in `scores`
            lo, hi = int(indptr[t]), int(indptr[t + 1])
            if lo == hi:
                continue
            docs_t = indices[lo:hi]
            at = np.minimum(np.searchsorted(docs_t, docs), hi - lo - 1)
            hit = docs_t[at] == docs
            acc[hit] += data[lo:hi][at[hit]]
        nonoccurrence = getattr(self._bm25, "nonoccurrence_array", None)
        if nonoccurrence is not None:  # bm25l / bm25+: the score of a term a passage lacks
            acc += nonoccurrence[ids].sum()
        out[present] = acc
        return out

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed passage (aligned with `rows`).

        A query word that occurs twice counts twice, as in rank_bm25 and Lucene.
        """
        ids = [self.vocab_ids[t] for t in self.tokenizer(query) if t in self.vocab_ids]
        if not ids or not len(self.rows):
            return np.zeros(len(self.rows), dtype=np.float32)
        return self._bm25.get_scores_from_ids(ids)


class BM25Retriever:
    name = "bm25"

    def __init__(self, index: BM25Index, lookup: RowLookup) -> None:
        self.index = index
        self.lookup = lookup

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        check_query(query)
        check_k(k)
        scores = self.index.scores(query)
        rows = self.index.rows
        best = topk_indices(scores, k, lambda i: self.lookup.describe_rows([int(rows[i])])[0][0], min_score=0.0)
        info = self.lookup.describe_rows([int(rows[i]) for i in best])
        return [Hit(id=pid, score=float(scores[i]), rank=n + 1, title=title, retriever=self.name, row=int(rows[i]))
                for n, (i, (pid, title)) in enumerate(zip(best, info, strict=True))]

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray:
        """BM25 scores of the given store rows for `query` (see `BM25Index.score_rows`)."""
        return self.index.score_rows(query, rows)
