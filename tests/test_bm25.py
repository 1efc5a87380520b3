"""BM25: parity with rank_bm25 (the reference implementation) and with the Lucene formula."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from rank_bm25 import BM25Okapi, BM25Plus

from amsrag.config import BM25Config
from amsrag.errors import InputError
from amsrag.indexes import bm25_segments as segments
from amsrag.indexes.bm25 import BM25Index, BM25Tokenizer, passage_text_for_bm25
from amsrag.retrieve.bm25 import BM25Retriever
from amsrag.types import PassageRow


class _Lookup:
    def __init__(self, rows: list[PassageRow]) -> None:
        self.info = {r.row: (r.id, r.title) for r in rows}

    def describe_rows(self, rows):
        return [self.info[int(r)] for r in rows]


@pytest.fixture(scope="module")
def rows(slice_passages) -> list[PassageRow]:
    return [PassageRow(i + 1, p.id, p.title, p.text) for i, p in enumerate(slice_passages)]


def _docs(rows, tok):
    return [tok(passage_text_for_bm25(r.title, r.text)) for r in rows]


@pytest.mark.parametrize(("method", "reference", "factor"), [("robertson", BM25Okapi, None), ("bm25+", BM25Plus, 1.0)])
def test_scores_and_ranking_match_rank_bm25(rows, slice_questions, method, reference, factor) -> None:
    config = BM25Config(method=method)
    tok = BM25Tokenizer(config)
    index = BM25Index.build(rows, config)
    kwargs = {"delta": config.delta} if method == "bm25+" else {}
    ref = reference(_docs(rows, tok), k1=config.k1, b=config.b, **kwargs)
    # bm25s' robertson omits rank_bm25's (k1 + 1) numerator factor: a constant, so rankings agree.
    factor = factor or (config.k1 + 1)
    for q in slice_questions:
        ours = np.asarray(index.scores(q.question), dtype=np.float64)
        theirs = ref.get_scores(tok(q.question))
        np.testing.assert_allclose(ours * factor, theirs, rtol=1e-4, atol=1e-5)
        retriever = BM25Retriever(index, _Lookup(rows))
        ranked = [h.row for h in retriever.search(q.question, k=10)]
        ref_order = sorted(range(len(rows)), key=lambda i: (-theirs[i], rows[i].id))
        expected = [rows[i].row for i in ref_order if theirs[i] > 0][:10]
        assert ranked == expected


def test_lucene_scores_follow_the_formula(rows, slice_questions) -> None:
    config = BM25Config(method="lucene")
    tok = BM25Tokenizer(config)
    docs = _docs(rows, tok)
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    df = Counter(t for d in docs for t in set(d))
    index = BM25Index.build(rows, config)
    for q in slice_questions[:6]:
        terms = tok(q.question)
        expected = []
        for d in docs:
            tf = Counter(d)
            s = 0.0
            for t in terms:
                if t not in df:
                    continue
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] / (tf[t] + config.k1 * (1 - config.b + config.b * len(d) / avgdl))
            expected.append(s)
        np.testing.assert_allclose(index.scores(q.question), expected, rtol=1e-4, atol=1e-5)


def test_tokenizer_stems_and_drops_stop_words() -> None:
    tok = BM25Tokenizer(BM25Config())
    assert tok("The runners are running in the races") == ["runner", "run", "race"]
    assert BM25Tokenizer(BM25Config(stemmer="none", stopwords="none"))("The cats") == ["the", "cats"]


def test_incremental_update_equals_full_build(rows, slice_questions) -> None:
    """Adds and deletes touch only segments and statistics, and score exactly as a full rebuild does."""
    config = BM25Config()
    full = BM25Index.build(rows, config)
    part = BM25Index.build(rows[:40], config).updated(rows[40:], [])
    np.testing.assert_array_equal(part.rows, full.rows)
    assert len(part.segments) == 2
    removed = [r.row for r in rows[10:30]]
    after_delete = full.updated([], removed)
    rebuilt = BM25Index.build([r for r in rows if r.row not in removed], config)
    np.testing.assert_array_equal(after_delete.rows, rebuilt.rows)
    assert after_delete.n_terms == rebuilt.n_terms and after_delete.n_tokens == rebuilt.n_tokens
    for q in slice_questions:
        np.testing.assert_array_equal(part.scores(q.question), full.scores(q.question))
        np.testing.assert_array_equal(after_delete.scores(q.question), rebuilt.scores(q.question))


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_many_small_commits_merge_and_match_bm25s(rows, slice_questions, monkeypatch, method) -> None:
    """Segments written one small batch at a time, with deletes in between and size-tiered merges,
    score as bm25s does on the final passage set (bm25s is the reference for every variant)."""
    import bm25s

    monkeypatch.setattr(segments, "TIER_BASE", 4)
    monkeypatch.setattr(segments, "MERGE_FACTOR", 3)
    config = BM25Config(method=method)
    index = BM25Index.empty(config)
    live: list[PassageRow] = []
    most = commits = 0
    for start in range(0, len(rows), 7):
        commits += 1
        batch = rows[start : start + 7]
        gone = [r.row for r in live[1::9]]
        index = index.updated(batch, gone)
        live = [r for r in live if r.row not in gone] + list(batch)
        most = max(most, len(index.segments))
    assert 3 <= most < commits  # segments were merged along the way
    tok = BM25Tokenizer(config)
    ref = bm25s.BM25(k1=config.k1, b=config.b, delta=config.delta, method=method)
    ref.index(_docs(live, tok), show_progress=False)
    ref_vocab = ref.vocab_dict
    np.testing.assert_array_equal(index.rows, [r.row for r in live])
    for q in slice_questions:
        ids = [ref_vocab[t] for t in tok(q.question) if t in ref_vocab]
        expected = ref.get_scores(ids) if ids else np.zeros(len(live))
        ours = index.scores(q.question)
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
        some = [r.row for r in live[::5]] + [10_000_000]
        np.testing.assert_allclose(index.score_rows(q.question, some),
                                   [*ours[::5], 0.0], rtol=1e-6, atol=1e-7)


def test_saved_segments_are_linked_not_rewritten(rows, slice_questions, tmp_path) -> None:
    config = BM25Config()
    first = BM25Index.build(rows[:50], config)
    (tmp_path / "g1").mkdir()
    first.save(tmp_path / "g1")
    second = BM25Index.load(tmp_path / "g1", config).updated(rows[50:], [rows[3].row])
    (tmp_path / "g2").mkdir()
    second.save(tmp_path / "g2", previous=tmp_path / "g1")
    old_seg = first.segments[0].name
    assert (tmp_path / "g2" / f"{old_seg}.flat.npy").stat().st_nlink == 2  # shared with g1
    assert (tmp_path / "g2" / f"{old_seg}.dead.npy").exists()
    loaded = BM25Index.load(tmp_path / "g2", config)
    for q in slice_questions[:10]:
        np.testing.assert_array_equal(loaded.scores(q.question), second.scores(q.question))


def test_format_1_token_cache_still_loads(rows, slice_questions, tmp_path) -> None:
    """Indexes written before segments (one tokens.npz and a sorted vocabulary) open unchanged."""
    import json

    config = BM25Config()
    tok = BM25Tokenizer(config)
    docs = _docs(rows, tok)
    vocab = sorted({t for d in docs for t in d})
    ids = {t: i for i, t in enumerate(vocab)}
    flat = np.asarray([ids[t] for d in docs for t in d], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    np.savez(tmp_path / "tokens.npz", rows=np.asarray([r.row for r in rows], np.int64), offsets=offsets, flat=flat)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    old = BM25Index.load(tmp_path, config)
    fresh = BM25Index.build(rows, config)
    for q in slice_questions[:10]:
        np.testing.assert_array_equal(old.scores(q.question), fresh.scores(q.question))


def test_query_without_known_terms_returns_nothing(rows) -> None:
    retriever = BM25Retriever(BM25Index.build(rows, BM25Config()), _Lookup(rows))
    assert retriever.search("zzzqqq xxyyzz", k=5) == []
    assert retriever.search("the of and", k=5) == []
    with pytest.raises(InputError, match="query is empty"):
        retriever.search("   ", k=5)
    with pytest.raises(InputError, match="k must be a positive integer"):
        retriever.search("film", k=0)
