"""BM25: parity with rank_bm25 (the reference implementation) and with the Lucene formula."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from rank_bm25 import BM25Okapi, BM25Plus

from amsrag.config import BM25Config
from amsrag.errors import InputError
from amsrag.retrieve.bm25 import BM25Index, BM25Retriever, BM25Tokenizer, passage_text_for_bm25
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
    config = BM25Config()
    full = BM25Index.build(rows, config)
    part = BM25Index.build(rows[:40], config).updated(rows[40:], [])
    assert part.cache.vocab == full.cache.vocab
    np.testing.assert_array_equal(part.rows, full.rows)
    removed = [r.row for r in rows[10:30]]
    after_delete = full.updated([], removed)
    rebuilt = BM25Index.build([r for r in rows if r.row not in removed], config)
    for q in slice_questions:
        np.testing.assert_allclose(part.scores(q.question), full.scores(q.question), rtol=1e-6)
        np.testing.assert_allclose(after_delete.scores(q.question), rebuilt.scores(q.question), rtol=1e-6)


def test_query_without_known_terms_returns_nothing(rows) -> None:
    retriever = BM25Retriever(BM25Index.build(rows, BM25Config()), _Lookup(rows))
    assert retriever.search("zzzqqq xxyyzz", k=5) == []
    assert retriever.search("the of and", k=5) == []
    with pytest.raises(InputError, match="query is empty"):
        retriever.search("   ", k=5)
    with pytest.raises(InputError, match="k must be a positive integer"):
        retriever.search("film", k=0)
