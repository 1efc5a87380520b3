"""The retrieval evaluator: the shipped artifact on real slice questions, inputs, artifact integrity, training."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from amsrag.correct.evaluator import ARTIFACT_JSON, ARTIFACT_NPZ, RetrievalEvaluator, shipped_artifact_dir
from amsrag.correct.features import FEATURE_NAMES, bm25_in_list
from amsrag.errors import InputError
from amsrag.learn.evaluator.data import DataConfig, load_pools, split_of


@pytest.fixture(scope="module")
def evaluator(built_index):
    return RetrievalEvaluator.load(encoder=built_index.encoder)


def _hard_lists(slice_questions, slice_passages, slice_vectors, built_index, negatives=4):
    """Per slice question: its gold passages plus the `negatives` non-gold passages closest in dense space."""
    out = []
    for q in slice_questions:
        qv = built_index.encoder.encode_query(q.question)
        gold = set(q.gold_passage_ids)
        sims = slice_vectors @ qv
        order = [i for i in np.argsort(-sims) if slice_passages[i].id not in gold][:negatives]
        idx = [i for i, p in enumerate(slice_passages) if p.id in gold] + order
        out.append((q, qv, idx))
    return out


def test_gold_outscores_hard_negatives(evaluator, slice_questions, slice_passages, slice_vectors, built_index):
    wins = total = 0
    for q, qv, idx in _hard_lists(slice_questions, slice_passages, slice_vectors, built_index):
        passages = [slice_passages[i] for i in idx]
        scores = evaluator.score(q.question, qv, passages, slice_vectors[idx])
        assert scores.shape == (len(idx),) and np.all((scores >= 0) & (scores <= 1))
        gold = np.array([p.id in q.gold_passage_ids for p in passages])
        for g in scores[gold]:
            wins += int((g > scores[~gold]).sum()) + 0.5 * int((g == scores[~gold]).sum())
            total += int((~gold).sum())
    assert wins / total >= 0.8  # pairwise AUC over the 16 slice questions (hard, same-corpus negatives)


def test_vectors_optional_and_dict_passages(evaluator, slice_questions, slice_passages, slice_vectors, built_index):
    q = slice_questions[6]
    passages = slice_passages[:4]
    with_vectors = evaluator.score(q.question, None, passages, slice_vectors[:4])
    as_dicts = [{"id": p.id, "title": p.title, "text": p.text} for p in passages]
    computed = evaluator.score(q.question, None, as_dicts, None)
    np.testing.assert_allclose(with_vectors, computed, atol=1e-3)
    assert evaluator.score(q.question, None, [], None).shape == (0,)


def test_bad_inputs(evaluator, slice_passages):
    with pytest.raises(InputError, match="empty query"):
        evaluator.score("  ", None, slice_passages[:2])
    with pytest.raises(InputError, match="passage vectors"):
        evaluator.score("who?", None, slice_passages[:2], np.zeros((3, 384)))
    with pytest.raises(InputError, match="query vector"):
        evaluator.score("who?", np.zeros(10), slice_passages[:2])


def test_artifact_roundtrip_and_integrity(evaluator, tmp_path, slice_questions, slice_passages, slice_vectors):
    meta = json.loads((shipped_artifact_dir() / ARTIFACT_JSON).read_text())
    assert meta["features"]["names"] == list(FEATURE_NAMES)
    assert 0 <= meta["thresholds"]["lower"] <= meta["thresholds"]["upper"] <= 1
    assert meta["metrics"]["test_roc_auc"] > 0.8
    copy = evaluator.save(tmp_path / "ev")
    again = RetrievalEvaluator.load(copy, encoder=evaluator.encoder)
    q = slice_questions[0]
    np.testing.assert_array_equal(evaluator.score(q.question, None, slice_passages[:5], slice_vectors[:5]),
                                  again.score(q.question, None, slice_passages[:5], slice_vectors[:5]))
    (copy / ARTIFACT_NPZ).write_bytes((copy / ARTIFACT_NPZ).read_bytes()[:-8] + b"xxxxxxxx")
    with pytest.raises(InputError, match="corrupt"):
        RetrievalEvaluator.load(copy)
    shutil.copy(shipped_artifact_dir() / ARTIFACT_NPZ, copy / ARTIFACT_NPZ)
    spec = json.loads((copy / ARTIFACT_JSON).read_text())
    spec["features"]["version"] = 999
    (copy / ARTIFACT_JSON).write_text(json.dumps(spec))
    with pytest.raises(InputError, match="feature spec"):
        RetrievalEvaluator.load(copy)
    with pytest.raises(InputError, match="not an evaluator artifact"):
        RetrievalEvaluator.load(tmp_path / "missing")


def test_bm25_in_list():
    docs = [["paris", "franc", "capit"], ["berlin", "germani"], ["paris", "paris", "hilton"]]
    s = bm25_in_list(["paris", "capit"], docs)
    assert s[0] > s[2] > s[1] == 0.0
    assert bm25_in_list([], docs).tolist() == [0.0, 0.0, 0.0]


def test_splits_are_stable_and_disjoint(shared_data):
    pools = load_pools(shared_data, DataConfig(per_dataset=40))
    assert {q.dataset for q in pools} == {"hotpotqa", "musique", "nq"}
    for q in pools:
        assert q.split == split_of(q.question)
        assert any(p.gold for p in q.paragraphs) and any(not p.gold for p in q.paragraphs)
        if q.dataset == "nq":  # negatives never contain an answer string
            assert not any(a.lower() in p.text.lower() for p in q.paragraphs if not p.gold for a in q.answers
                           if len(a) > 1)
    assert len({q.key for q in pools}) == len(pools)
    assert {q.split for q in pools} == {"train", "cal", "test"}


@pytest.mark.slow
def test_training_is_reproducible(shared_data, tmp_path, built_index):
    """`train` twice on the same small data gives byte-identical artifacts, and sensible held-out AUC."""
    from amsrag.learn.evaluator.train import EvaluatorTrainConfig, prepare, train

    config = EvaluatorTrainConfig(per_dataset=15)
    prep = prepare(shared_data, config, built_index.encoder, cache_dir=tmp_path / "cache")
    ev1, report = train(prep, config, built_index.encoder.model_id)
    ev2, _ = train(prepare(shared_data, config, built_index.encoder, cache_dir=tmp_path / "cache"), config,
                   built_index.encoder.model_id)
    ev1.save(tmp_path / "a")
    ev2.save(tmp_path / "b")
    for name in (ARTIFACT_JSON, ARTIFACT_NPZ):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert report["test"]["roc_auc"] > 0.6  # a few dozen test rows: loose, but far above chance (0.5)
