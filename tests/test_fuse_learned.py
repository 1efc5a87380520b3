"""The learned fuser (issue 16): BM25 of given rows, candidate features, the shipped artifact and its checks,
the expert weights, and the systems that use them on a real index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from amsrag.config import BM25Config
from amsrag.errors import InputError
from amsrag.fuse import RRF, FusedList
from amsrag.fuse.experts import ExpertMemory, expert_weights, load_memory
from amsrag.fuse.features import FEATURES, QueryInputs, candidate_features
from amsrag.fuse.learned import (
    CARD_FILE,
    MODEL_FILE,
    FusionArtifactError,
    IndexProfile,
    LearnedRanker,
    default_directory,
)
from amsrag.indexes.bm25 import BM25Index
from amsrag.pipeline.signals import IndexSignals, index_profile
from amsrag.types import Hit, PassageRow


def _rows(texts: list[str]) -> list[PassageRow]:
    return [PassageRow(row=3 * i + 1, id=f"p{i}", title="", text=t) for i, t in enumerate(texts)]


TEXTS = ["the film was directed by james cameron in 1997", "cameron was born in kapuskasing ontario",
         "a film about a ship", "ontario is a province of canada", "ships sink; films about ships win awards",
         "directed directed directed film film"]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_of_given_rows_equals_the_full_score_vector(method: str) -> None:
    index = BM25Index.build(_rows(TEXTS), BM25Config(method=method))
    for query in ("film directed by cameron", "ships ships film", "nothing matches here zzz", "canada"):
        full = index.scores(query)
        rows = [16, 1, 4, 999, 7, 13, 10]  # unsorted, one row that is not indexed
        got = index.score_rows(query, rows)
        pos = {int(r): i for i, r in enumerate(index.rows)}
        want = [full[pos[r]] if r in pos else 0.0 for r in rows]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


class _Signals:
    """Hand-set signals for the feature arithmetic (the index-backed ones are tested below)."""

    def vectors(self, rows):
        return np.asarray([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])[: len(rows)]

    def bm25_scores(self, query, rows):
        return np.asarray([2.0, 0.0, 4.0])[: len(rows)]

    def entity_share(self, query, rows):
        return np.asarray([1.0, 0.5, 0.0])[: len(rows)], 2


def test_candidate_features_read_ranks_scores_and_signals() -> None:
    lists = {"bm25": [Hit("a", 8.0, 1), Hit("c", 4.0, 2)], "dense": [Hit("b", 0.9, 1), Hit("a", 0.45, 2)],
             "hop2": [Hit("c", 1.0, 1)]}
    base = RRF().fuse({"bm25": lists["bm25"], "dense": lists["dense"]})
    items = {it.id: it for it in base.items} | {"c": base.items[-1]}
    candidates = [items["a"], items["b"], items["c"]]
    ctx = QueryInputs("Who directed Titanic Film", np.asarray([1.0, 0.0]), 0.7, 0.1, 0.8)
    x = candidate_features(candidates, lists, base, ctx, _Signals())
    f = {name: x[:, i] for i, name in enumerate(FEATURES)}
    assert x.shape == (3, len(FEATURES))
    np.testing.assert_allclose(f["bm25_rrank"], [1.0, 0.0, 0.5])
    np.testing.assert_allclose(f["bm25_score"][[0, 2]], [1.0, 0.5])
    assert np.isnan(f["bm25_score"][1]) and np.isnan(f["graph_score"]).all()
    np.testing.assert_allclose(f["dense_rrank"], [0.5, 1.0, 0.0])
    np.testing.assert_allclose(f["graph_ran"], 0.0)
    np.testing.assert_allclose(f["hop2_rrank"], [0.0, 0.0, 1.0])
    np.testing.assert_allclose(f["n_lists"], [2, 1, 1])
    np.testing.assert_allclose(f["cos"], [1.0, 0.6, 0.0])
    np.testing.assert_allclose(f["bm25_rel"], [0.5, 0.0, 1.0])
    np.testing.assert_allclose(f["bm25_all_rrank"], [0.5, 1 / 3, 1.0])
    np.testing.assert_allclose(f["entity_share"], [1.0, 0.5, 0.0])
    np.testing.assert_allclose(f["p_multi"], 0.7)
    np.testing.assert_allclose(f["query_entities"], 2)


def test_shipped_artifact_loads_with_its_card() -> None:
    ranker = LearnedRanker.load()
    assert tuple(ranker.card["features"]) == FEATURES
    assert ranker.card["data"]["questions"] > 0 and ranker.card["metrics"]["validation"]["all"]["groups"] > 0
    memory = load_memory(ranker.directory, ranker.card)
    assert memory.vectors.shape[0] == ranker.card["experts"]["questions"]


@pytest.fixture()
def artifact_copy(tmp_path: Path) -> Path:
    d = tmp_path / "fusion"
    shutil.copytree(default_directory(), d)
    return d


def test_missing_or_corrupt_artifact_is_named(artifact_copy: Path) -> None:
    (artifact_copy / MODEL_FILE).write_text((artifact_copy / MODEL_FILE).read_text() + "\n# edited\n")
    with pytest.raises(FusionArtifactError, match=f"{MODEL_FILE}: sha256 differs"):
        LearnedRanker.load(artifact_copy)
    (artifact_copy / MODEL_FILE).unlink()
    with pytest.raises(FusionArtifactError, match=f"{MODEL_FILE}: learned fuser file missing"):
        LearnedRanker.load(artifact_copy)
    shutil.copy(default_directory() / MODEL_FILE, artifact_copy / MODEL_FILE)
    (artifact_copy / CARD_FILE).write_text("{not json")
    with pytest.raises(FusionArtifactError, match=f"{CARD_FILE}: not a valid JSON card"):
        LearnedRanker.load(artifact_copy)


def test_card_for_other_features_is_refused(artifact_copy: Path) -> None:
    card = json.loads((artifact_copy / CARD_FILE).read_text())
    card["features"] = card["features"][:-1]
    (artifact_copy / CARD_FILE).write_text(json.dumps(card))
    with pytest.raises(FusionArtifactError, match="made for other features"):
        LearnedRanker.load(artifact_copy)


def test_index_computing_other_features_is_refused(built_index) -> None:
    ranker = LearnedRanker.load()
    profile = index_profile(built_index)
    ranker.check_index(profile, "idx")  # the shipped model fits a default index
    other = IndexProfile(profile.retrievers, "some-other-encoder", profile.bm25)
    with pytest.raises(InputError, match="encoder 'some-other-encoder'"):
        ranker.check_index(other, "idx")
    with pytest.raises(InputError, match=r"bm25.k1 = 0.9"):
        ranker.check_index(IndexProfile(profile.retrievers, profile.encoder, {**profile.bm25, "k1": 0.9}), "idx")
    with pytest.raises(InputError, match=r"retrievers \['graph'\] missing"):
        ranker.check_index(IndexProfile(("bm25", "dense"), profile.encoder, profile.bm25), "idx")


def test_expert_weights_follow_the_neighbours() -> None:
    vectors = np.asarray([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]], dtype=np.float32)
    quality = np.asarray([[0.0, 1.0, 0.0], [0.0, 0.8, 0.2], [1.0, 0.0, 0.0]])
    memory = ExpertMemory(vectors, quality, ("bm25", "dense", "graph"))
    w, lam = expert_weights(memory, np.asarray([1.0, 0.0]), ["bm25", "dense", "graph"], {}, neighbours=2)
    assert lam == 1.0 and w["dense"] > 0.99 and abs(sum(w.values()) - 1) < 1e-9
    soft, _ = expert_weights(memory, np.asarray([1.0, 0.0]), ["bm25", "dense", "graph"], {}, 2, temperature=10.0)
    assert max(soft.values()) - min(soft.values()) < 0.05  # a high temperature is nearly uniform
    w2, _ = expert_weights(memory, np.asarray([0.0, 1.0]), ["bm25", "dense"], {"bm25": 1, "dense": 1}, neighbours=1)
    assert w2["bm25"] == pytest.approx(1.0)
    far, lam_far = expert_weights(memory, np.asarray([-1.0, -1.0]), ["bm25", "dense"], {"bm25": 3, "dense": 1}, 2)
    assert lam_far == 0.0 and far == pytest.approx({"bm25": 0.75, "dense": 0.25})  # no similar query: the prior
    half, lam_half = expert_weights(memory, np.asarray([0.8, 0.6]), ["bm25", "dense"], {}, 1, trust=1.0)
    assert 0.5 < lam_half < 1.0 and half["dense"] > half["bm25"]
    with pytest.raises(InputError, match="temperature and trust"):
        expert_weights(memory, np.asarray([1.0, 0.0]), ["bm25"], {}, 2, temperature=0.0)


def test_index_signals_on_a_real_index(built_index, slice_passages) -> None:
    signals = IndexSignals(built_index)
    p = slice_passages[0]
    rows = built_index.rows_for_ids([p.id])
    share, n = signals.entity_share(f"What is {p.title}?", [rows[p.id]])
    assert n >= 1 and share[0] > 0
    bm = signals.bm25_scores(p.title, [rows[p.id]])
    assert bm[0] > 0


@pytest.mark.parametrize("system", ["learned", "fixed-learned", "experts"])
def test_learned_systems_retrieve_deterministically_with_a_trace(built_index, slice_questions, system) -> None:
    from amsrag.pipeline import Engine

    engine = Engine(built_index)
    multi = [q for q in slice_questions if q.complexity == "multi_hop"][:3]
    for q in multi:
        a = engine.retrieve(q.question, system=system, k=5, explain=2)
        b = engine.retrieve(q.question, system=system, k=5, explain=2)
        assert [p.id for p in a.passages] == [p.id for p in b.passages] and len(a.passages) == 5
        fusion = a.trace.to_dict()["fusion"]
        if system == "experts":
            assert fusion["method"] == "experts" and set(fusion["expert_weights"]) == set(fusion["weights"])
        else:
            assert fusion["method"] == "learned" and fusion["base"] == "ca_rrf"
            assert len(fusion["explain"]) == 2
            assert set(fusion["explain"][0]["top_features"]) <= set(FEATURES)
            assert "rerank" in a.trace.to_dict()["timings_ms"]


def test_learned_fuser_gives_an_empty_list_for_no_candidates() -> None:
    from amsrag.fuse.learned import LearnedFuser

    fused = LearnedFuser(LearnedRanker.load(), FusedList("ca_rrf", [], {}, {}),
                         QueryInputs("q", np.zeros(2), 0, 0, 1), _Signals()).fuse({})
    assert fused.method == "learned" and len(fused) == 0


def test_training_on_real_passes_is_deterministic_and_loads(built_index, slice_questions, tmp_path) -> None:
    """`collect` + `train` + `write_artifact` on the slice: the same model twice, a card the loader accepts,
    and an engine configured with it reranks."""
    from amsrag.evaluate.builder import EvalQuery
    from amsrag.learn.fusion.data import SUBSETS, collect
    from amsrag.learn.fusion.train import TrainSettings, train, write_artifact
    from amsrag.pipeline import Engine

    questions = [EvalQuery(q.id, q.question, q.answers, q.gold_passage_ids, q.dataset, q.complexity)
                 for q in slice_questions if q.gold_passage_ids][:24]
    engine = Engine(built_index)
    collected = collect(engine, questions, pool=30)
    assert len(collected.groups) >= len(questions) * len(SUBSETS)
    assert collected.vectors.shape == (len(questions), 384) and collected.quality.shape == (len(questions), 3)
    settings = TrainSettings(rounds=15, num_leaves=7, min_data_in_leaf=5)
    first, second = train(collected, questions, settings), train(collected, questions, settings)
    assert first.booster.model_to_string() == second.booster.model_to_string()
    out = write_artifact(tmp_path / "fusion", first, settings, index_profile(built_index), {"test": True}, questions)
    ranker = LearnedRanker.load(out)
    assert ranker.card["metrics"]["validation"]["all"]["groups"] > 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["fusion"]  # no staging folder left behind
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(InputError, match="a-file: exists and is not a folder"):
        write_artifact(tmp_path / "a-file", first, settings, index_profile(built_index), {}, questions)
    config = built_index.config.model_copy(deep=True)
    config.fusion.learned = str(out)
    result = Engine(built_index, config=config).retrieve(questions[0].question, system="learned", k=3)
    assert result.trace.to_dict()["fusion"]["model_sha256"] == ranker.card["model_sha256"][:12]


def test_engine_refuses_the_learned_fuser_on_an_index_with_other_bm25(tmp_path, slice_passages) -> None:
    from amsrag.config import AmsragConfig
    from amsrag.pipeline import Engine
    from amsrag.store import EmbeddedIndex

    config = AmsragConfig()
    config.bm25.k1 = 1.2
    index = EmbeddedIndex.create(tmp_path / "idx", config)
    index.add(slice_passages[:12])
    engine = Engine(index)
    assert engine.retrieve(slice_passages[0].title, system="A3", k=3).passages  # CA-RRF systems still work
    with pytest.raises(InputError, match=r"trained on other features.*bm25.k1 = 1.2, trained with 1.5"):
        engine.retrieve(slice_passages[0].title, system="full", k=3)
