"""The BM25 index a store keeps (bm25s's formulas over segmented postings), English stemming and stop words,
Chinese segmentation and bigrams (`cjk_tokens`); searching it is `amsrag.retrieve.bm25.BM25Retriever`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from amsrag.config import BM25Config
from amsrag.errors import IndexCorruptError
from amsrag.indexes.bm25_segments import Segment, merge_policy, merged, segment_from_ids
from amsrag.indexes.cjk_tokens import BIGRAM_MARK, han_runs, han_tokens
from amsrag.types import PassageRow

TOKENIZER_VERSION = "amsrag-bm25-tokenizer-1"
FORMAT_VERSION = 2  # 1: one token cache re-indexed by bm25s on load (still read)
_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")


class BM25Tokenizer:
    """Lowercase word tokens of two or more characters, stop words removed, Snowball-stemmed; runs of Han
    characters tokenised as `config.cjk` says (jieba words and character bigrams by default; "none": a run
    is one word, as amsrag did before). Text without Han characters is tokenised the same in every mode."""

    def __init__(self, config: BM25Config) -> None:
        self._stop = frozenset(STOPWORDS_EN) if config.stopwords == "en" else frozenset()
        self._stemmer = Stemmer.Stemmer("english") if config.stemmer == "english" else None
        self._cjk = config.cjk

    def _words(self, text: str) -> list[str]:
        tokens = [t for t in _TOKEN_RE.findall(text) if t not in self._stop]
        return self._stemmer.stemWords(tokens) if self._stemmer is not None else tokens

    def __call__(self, text: str) -> list[str]:
        text = text.lower()
        runs = han_runs(text) if self._cjk != "none" else []
        if not runs:
            return self._words(text)
        tokens: list[str] = []
        start = 0
        for begin, end in runs:
            tokens.extend(self._words(text[start:begin]))
            tokens.extend(han_tokens(text[begin:end], self._cjk))
            start = end
        tokens.extend(self._words(text[start:]))
        return tokens

    def content_words(self, text: str) -> set[str]:
        return set(self(text))

    def contained_tokens(self, text: str) -> list[str] | None:
        """Tokens every passage holding `text` verbatim has, or None when none are certain. jieba may cut a
        run of Han characters differently inside a longer run, so only its bigrams are certain (and a run
        without bigrams, in modes "jieba" and "none", makes nothing certain)."""
        runs = han_runs(text.lower())
        if not runs:
            return self(text)
        if self._cjk not in ("jieba+bigram", "bigram"):
            return None
        lowered = text.lower()
        tokens: list[str] = []
        start = 0
        for begin, end in runs:
            tokens.extend(self._words(lowered[start:begin]))
            tokens.extend(t for t in han_tokens(lowered[begin:end], "bigram") if t.startswith(BIGRAM_MARK))
            start = end
        tokens.extend(self._words(lowered[start:]))
        return tokens


def passage_text_for_bm25(title: str, text: str) -> str:
    return f"{title}\n{text}" if title else text


class CollectionStats:
    """Collection statistics of the live passages, from which every score is computed at query time."""

    def __init__(self, n_docs: int, total_len: int, df: np.ndarray) -> None:
        self.n_docs = n_docs
        self.total_len = total_len
        self.df = df  # int64 per vocabulary id

    @property
    def avgdl(self) -> float:
        return self.total_len / self.n_docs if self.n_docs else 1.0


def _idf(method: str, df: int, n: int) -> float:
    """bm25s's idf variants (`bm25s.scoring`), one term at a time."""
    if method == "robertson":
        return math.log(max((n - df + 0.5) / (df + 0.5), 1.0))
    if method == "lucene":
        return math.log(1 + (n - df + 0.5) / (df + 0.5))
    if method == "atire":
        return math.log(n / df)
    if method == "bm25l":
        return math.log((n + 1) / (df + 0.5))
    return math.log((n + 1) / df)  # bm25+


class BM25Index:
    """BM25 over segments of term frequencies (`bm25_segments`): adding or deleting passages touches
    only the new segment, the dead marks and the collection statistics, never the other passages.
    Scores equal bm25s's on the same passages (its formulas, checked against rank_bm25 in the tests)."""

    def __init__(self, config: BM25Config, vocab: list[str], segments: list[Segment], stats: CollectionStats) -> None:
        self.config = config
        self.tokenizer = BM25Tokenizer(config)
        self.vocab = vocab
        self.vocab_ids = {tok: i for i, tok in enumerate(vocab)}
        self.segments = segments
        self.stats = stats
        self._live = [s.live_mask() if len(s.dead) else None for s in segments]
        rows = [s.rows if m is None else s.rows[m] for s, m in zip(segments, self._live, strict=True)]
        self._rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        self._starts = np.cumsum([0] + [len(r) for r in rows])  # first position of each segment in `rows`
        avgdl = stats.avgdl
        # the length normaliser of every passage, as bm25s computes it (float64, then float32)
        self._norm = [((1 - config.b) + config.b * s.lengths / avgdl).astype(np.float32) for s in segments]
        self._nonoccurrence = config.method in ("bm25l", "bm25+")

    @property
    def rows(self) -> np.ndarray:
        """Store rows of the live passages, ascending: `scores` is aligned with them."""
        return self._rows

    @property
    def n_terms(self) -> int:
        return int(np.count_nonzero(self.stats.df))

    @property
    def n_tokens(self) -> int:
        return self.stats.total_len

    @staticmethod
    def params(config: BM25Config) -> dict[str, object]:
        """What stored indexes depend on (the formulas are applied at query time, so not bm25s)."""
        params: dict[str, object] = {**config.model_dump(mode="json"), "tokenizer": TOKENIZER_VERSION,
                                     "stemmer_lib": f"PyStemmer=={Stemmer.version()}"}
        if config.cjk == "none":  # as amsrag recorded before it tokenised Chinese (`with_legacy_tokenizer`)
            del params["cjk"]
        if config.cjk in ("jieba+bigram", "jieba"):
            params["segmenter_lib"] = f"jieba=={metadata.version('jieba')}"
        return params

    @classmethod
    def build(cls, rows: Sequence[PassageRow], config: BM25Config,
              progress: Callable[[int], None] | None = None) -> BM25Index:
        return cls.empty(config).updated(rows, [], progress)

    @classmethod
    def empty(cls, config: BM25Config) -> BM25Index:
        return cls(config, [], [], CollectionStats(0, 0, np.zeros(0, np.int64)))

    # ---- updates ----------------------------------------------------------------------------
    def updated(self, added: Sequence[PassageRow], removed_rows: Sequence[int],
                progress: Callable[[int], None] | None = None,
                tokens_of: Sequence[list[str]] | None = None) -> BM25Index:
        """The index with `removed_rows` deleted and `added` indexed: only the new passages are
        tokenised and only their segment is built (plus any merge the size tiers call for).
        `tokens_of`: the new passages' tokens when the caller has them already (aligned with `added`)."""
        vocab = list(self.vocab)
        ids = dict(self.vocab_ids)
        if tokens_of is not None and len(tokens_of) != len(added):
            raise ValueError(f"{len(tokens_of)} token lists for {len(added)} passages")
        given = list(tokens_of) if tokens_of is not None else [None] * len(added)
        pairs = sorted(zip(added, given, strict=True), key=lambda pt: pt[0].row)
        added = [p for p, _ in pairs]
        lengths = np.zeros(len(added), dtype=np.int64)
        flat: list[int] = []
        for i, (p, known) in enumerate(pairs):
            tokens = known if known is not None else self.tokenizer(passage_text_for_bm25(p.title, p.text))
            for tok in tokens:
                j = ids.get(tok)
                if j is None:
                    j = ids[tok] = len(vocab)
                    vocab.append(tok)
                flat.append(j)
            lengths[i] = len(tokens)
            if progress is not None and (i + 1) % 500 == 0:
                progress(500)
        if progress is not None and len(added) % 500:
            progress(len(added) % 500)
        df = np.zeros(len(vocab), dtype=np.int64)
        df[: len(self.stats.df)] = self.stats.df
        n_docs, total_len = self.stats.n_docs, self.stats.total_len
        segments = []
        gone = np.unique(np.asarray(removed_rows, dtype=np.int64))
        for seg in self.segments:
            local = _local_positions(seg, gone)
            if len(local):
                df -= _term_counts(seg, local, len(vocab))
                n_docs -= len(local)
                total_len -= int(seg.lengths[local].sum())
                seg = seg.with_dead(local)
            segments.append(seg)
        if added:
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            new = segment_from_ids(np.asarray([p.row for p in added], dtype=np.int64), offsets,
                                   np.asarray(flat, dtype=np.int32), len(vocab))
            df += np.diff(new.indptr)
            n_docs += new.n
            total_len += int(lengths.sum())
            if segments and any(s.n and int(s.rows[-1]) >= int(new.rows[0]) for s in segments):
                segments = [merged([*segments, new], len(vocab))]  # rows out of order: one segment again
                segments[0] = _sorted_segment(segments[0], len(vocab))
            else:
                segments.append(new)
        segments = merge_policy(segments, len(vocab))
        return BM25Index(self.config, vocab, segments, CollectionStats(n_docs, total_len, df))

    # ---- storage ------------------------------------------------------------------------------
    def save(self, directory: Path, previous: Path | None = None) -> None:
        """Write into `directory`; segments already saved in `previous` are hard-linked from there."""
        for seg in self.segments:
            seg.save(directory, previous)
        np.save(directory / "df.npy", self.stats.df)
        (directory / "vocab.json").write_text(json.dumps(self.vocab), encoding="utf-8")
        meta = {"format": FORMAT_VERSION, "n_docs": self.stats.n_docs, "total_len": self.stats.total_len,
                "segments": [{"name": s.name, "n": s.n, "dead": len(s.dead)} for s in self.segments]}
        (directory / "bm25.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, config: BM25Config) -> BM25Index:
        if (directory / "tokens.npz").exists():  # format 1: one token cache, bm25s re-indexed on load
            return cls._load_token_cache(directory, config)
        meta = json.loads((directory / "bm25.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise IndexCorruptError(f"{directory}: BM25 format {meta.get('format')!r}, expected {FORMAT_VERSION}")
        vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        segments = [Segment.load(directory, s["name"], bool(s["dead"])) for s in meta["segments"]]
        stats = CollectionStats(int(meta["n_docs"]), int(meta["total_len"]), np.load(directory / "df.npy"))
        return cls(config, vocab, segments, stats)

    @classmethod
    def _load_token_cache(cls, directory: Path, config: BM25Config) -> BM25Index:
        with np.load(directory / "tokens.npz") as z:
            rows, offsets, flat = z["rows"], z["offsets"], z["flat"]
        vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        if not len(rows):
            return cls.empty(config)
        seg = segment_from_ids(rows, offsets, flat, len(vocab))
        return cls(config, vocab, [seg], CollectionStats(len(rows), int(offsets[-1]), np.diff(seg.indptr)))

    def rows_with_words(self, text: str) -> np.ndarray | None:
        """Store rows of the live passages holding every token a passage holding `text` must have
        (`BM25Tokenizer.contained_tokens`); None when there is none (stop words and one-letter words only, or
        Han text without bigrams): then any passage may contain it."""
        certain = self.tokenizer.contained_tokens(text)
        if certain is None:
            return None
        terms = []
        for tok in set(certain):
            t = self.vocab_ids.get(tok)
            if t is None or not self.stats.df[t]:
                return np.zeros(0, np.int64)
            terms.append(t)
        if not terms:
            return None
        terms.sort(key=lambda t: int(self.stats.df[t]))
        found = []
        for seg in self.segments:
            docs = np.asarray(seg.postings(terms[0])[0])
            for t in terms[1:]:
                if not len(docs):
                    break
                docs = np.intersect1d(docs, seg.postings(t)[0], assume_unique=True)
            if len(docs) and len(seg.dead):
                docs = docs[~np.isin(docs, seg.dead)]
            found.append(seg.rows[docs])
        return np.concatenate(found) if found else np.zeros(0, np.int64)

    # ---- scoring --------------------------------------------------------------------------------
    def _query_terms(self, query: str) -> list[tuple[int, float, float]]:
        """(vocabulary id, idf, non-occurrence score) per query token in the index, repeats kept: a
        query word that occurs twice counts twice, as in rank_bm25 and Lucene."""
        out = []
        method, n = self.config.method, self.stats.n_docs
        for tok in self.tokenizer(query):
            t = self.vocab_ids.get(tok)
            if t is None or not self.stats.df[t]:
                continue
            idf = np.float32(_idf(method, int(self.stats.df[t]), n))
            out.append((t, float(idf), float(idf * self._tfc(np.zeros(1, np.float32), np.ones(1, np.float32))[0])))
        return out

    def _tfc(self, tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
        """bm25s's term-frequency components; `norm` is 1 - b + b * length / avgdl."""
        k1, delta, method = np.float32(self.config.k1), np.float32(self.config.delta), self.config.method
        if method in ("robertson", "lucene"):
            return tf / (k1 * norm + tf)
        if method == "atire":
            return (tf * (k1 + 1)) / (tf + k1 * norm)
        if method == "bm25l":
            c = tf / norm
            return ((k1 + 1) * (c + delta)) / (k1 + c + delta)
        return ((k1 + 1) * tf) / (k1 * norm + tf) + delta

    def _segment_scores(self, i: int, terms: list[tuple[int, float, float]]) -> np.ndarray:
        seg, norm = self.segments[i], self._norm[i]
        docs, parts = [], []
        for t, idf, nonocc in terms:
            d, tf = seg.postings(t)
            if not len(d):
                continue
            part = np.float32(idf) * self._tfc(tf, norm[d])
            if self._nonoccurrence:
                part -= np.float32(nonocc)
            docs.append(d)
            parts.append(part)
        if not docs:
            return np.zeros(seg.n, dtype=np.float64)
        # one pass: bincount adds each passage's contributions in query-term order, as a per-term loop would
        return np.bincount(np.concatenate(docs), weights=np.concatenate(parts), minlength=seg.n)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every live passage (aligned with `rows`)."""
        terms = self._query_terms(query)
        out = np.zeros(len(self._rows), dtype=np.float32)
        if not terms:
            return out
        for i, live in enumerate(self._live):
            acc = self._segment_scores(i, terms)
            out[self._starts[i] : self._starts[i + 1]] = acc if live is None else acc[live]
        if self._nonoccurrence:
            out += np.float32(sum(nonocc for _, _, nonocc in terms))
        return out

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray:
        """BM25 score of the passages at store rows `rows` (0 for a row not indexed), equal to their
        entries of `scores(query)`; the cost grows with the query's postings, not with the corpus."""
        wanted = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(wanted), dtype=np.float32)
        terms = self._query_terms(query)
        if not terms or not len(wanted):
            return out
        for seg, norm in zip(self.segments, self._norm, strict=True):
            pos = np.minimum(np.searchsorted(seg.rows, wanted), seg.n - 1)
            here = np.flatnonzero(seg.rows[pos] == wanted)
            if len(here) and len(seg.dead):
                here = here[~np.isin(pos[here], seg.dead)]
            if not len(here):
                continue
            local = pos[here]
            acc = np.zeros(len(local), dtype=np.float64)
            for t, idf, nonocc in terms:
                docs, tf = seg.postings(t)
                if not len(docs):
                    continue
                at = np.minimum(np.searchsorted(docs, local), len(docs) - 1)
                hit = np.asarray(docs)[at] == local
                part = np.float32(idf) * self._tfc(np.asarray(tf)[at[hit]], norm[local[hit]])
                if self._nonoccurrence:
                    part -= np.float32(nonocc)
                acc[hit] += part
            out[here] = acc
            if self._nonoccurrence:
                out[here] += np.float32(sum(nonocc for _, _, nonocc in terms))
        return out


def _local_positions(seg: Segment, rows: np.ndarray) -> np.ndarray:
    """Local indices of the live passages of `seg` among store rows `rows` (ascending)."""
    if not seg.n or not len(rows):
        return np.zeros(0, np.int64)
    pos = np.searchsorted(seg.rows, rows)
    inside = pos < seg.n
    pos, rows = pos[inside], rows[inside]
    return np.setdiff1d(pos[seg.rows[pos] == rows], seg.dead).astype(np.int64)


def _term_counts(seg: Segment, local: np.ndarray, vocab_size: int) -> np.ndarray:
    """How many of the passages `local` of `seg` contain each term (their document frequencies)."""
    starts, ends = seg.offsets[local], seg.offsets[local + 1]
    lengths = ends - starts
    which = np.repeat(np.arange(len(local), dtype=np.int64), lengths)
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    terms = np.asarray(seg.flat)[np.repeat(starts, lengths) + within].astype(np.int64)
    pairs = np.unique(which * vocab_size + terms)
    return np.bincount(pairs % vocab_size, minlength=vocab_size)


def _sorted_segment(seg: Segment, vocab_size: int) -> Segment:
    """`seg` with its passages in ascending row order (after an add of rows below existing ones)."""
    order = np.argsort(seg.rows, kind="stable")
    lengths = seg.lengths[order]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = np.concatenate([np.asarray(seg.flat[seg.offsets[i] : seg.offsets[i + 1]]) for i in order.tolist()])
    return segment_from_ids(seg.rows[order], offsets, flat, vocab_size)
