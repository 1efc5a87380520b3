"""The process-wide sentence cache shared by the corrective evaluator and the extractive reader."""

from __future__ import annotations

import numpy as np
import pytest

from amsrag.config import GeneratorConfig
from amsrag.correct.evaluator import RetrievalEvaluator
from amsrag.embed.cache import CachedEncoder, shared_cache
from amsrag.generate.heuristic import HeuristicGenerator
from amsrag.text.sentences import split_sentences

TEXTS = ["Paris. Paris is the capital of France.", "Oak Island. The island lies in Mahone Bay.",
         "Paris. It hosted the 1900 Summer Olympics."]


def test_cached_vectors_equal_the_encoders_and_are_computed_once(built_index) -> None:
    cache = CachedEncoder(built_index.encoder)
    first = cache.encode(TEXTS)
    assert cache.misses == 3 and cache.hits == 0
    again = cache.encode([TEXTS[2], TEXTS[0], TEXTS[0]])
    assert cache.misses == 3 and cache.hits == 3
    np.testing.assert_allclose(again, first[[2, 0, 0]])
    np.testing.assert_allclose(first, built_index.encoder.encode(TEXTS), atol=1e-5)
    assert cache.encode([]).shape == (0, cache.dim)


def test_lru_bound_keeps_the_most_recent(built_index) -> None:
    cache = CachedEncoder(built_index.encoder, max_items=2)
    cache.encode(TEXTS[:2])
    cache.encode([TEXTS[0]])  # TEXTS[0] is now the most recent
    cache.encode([TEXTS[2]])  # evicts TEXTS[1]
    assert len(cache) == 2
    misses = cache.misses
    cache.encode([TEXTS[0], TEXTS[2]])
    assert cache.misses == misses
    cache.encode([TEXTS[1]])
    assert cache.misses == misses + 1
    with pytest.raises(ValueError, match="max_items"):
        CachedEncoder(built_index.encoder, max_items=0)


def test_save_and_load_round_trip_and_refuse_another_model(built_index, tmp_path) -> None:
    cache = CachedEncoder(built_index.encoder)
    vectors = cache.encode(TEXTS)
    path = tmp_path / "sentences.npz"
    cache.save(path)
    fresh = CachedEncoder(built_index.encoder)
    assert fresh.load(path) == 3 and fresh.load(tmp_path / "missing.npz") == 0
    np.testing.assert_array_equal(fresh.encode(TEXTS), vectors)
    assert fresh.misses == 0

    class OtherModel:
        dim, model_id = built_index.encoder.dim, "another-model"

    assert CachedEncoder(OtherModel()).load(path) == 0


def test_evaluator_and_reader_share_one_cache(built_index, slice_questions, slice_passages) -> None:
    encoder = built_index.encoder
    cache = shared_cache(encoder)
    assert shared_cache(encoder) is cache and shared_cache(cache) is cache
    evaluator = RetrievalEvaluator.load(encoder=encoder)
    reader = HeuristicGenerator(encoder, GeneratorConfig(abstain_threshold=0.0))
    assert evaluator.encoder is cache and reader.encoder is cache

    by_id = {p.id: p for p in slice_passages}
    q = next(q for q in slice_questions if len(q.gold_passage_ids) >= 2)
    passages = [by_id[i] for i in q.gold_passage_ids]
    evaluator.score(q.question, None, passages)
    misses = cache.misses
    reader.generate(q.question, passages)  # the evaluator embedded every sentence already
    assert cache.misses == misses


def test_reader_embeds_only_its_sentence_budget(built_index, slice_questions, slice_passages) -> None:
    by_id = {p.id: p for p in slice_passages}
    q = next(q for q in slice_questions if q.gold_passage_ids)
    passages = [by_id[i] for i in q.gold_passage_ids] + [p for p in slice_passages[:6]
                                                          if p.id not in q.gold_passage_ids]
    n_sentences = sum(len(split_sentences(p.text)) for p in passages)
    assert n_sentences > 5
    reader = HeuristicGenerator(CachedEncoder(built_index.encoder),
                                 GeneratorConfig(abstain_threshold=0.0, embed_sentences=5))
    reader.generate(q.question, passages)
    assert reader.encoder.misses == 5
