"""`amsrag train route tune`: thresholds by hand-computed cost, the prior, route and MMR-gate fits, persistence in
the index."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from amsrag.config import AmsragConfig, FusionConfig, RouterConfig
from amsrag.errors import InputError
from amsrag.learn.router import (
    CalibrationQuery,
    PoolOutcome,
    RankedList,
    beta_grid,
    choose_routes,
    evaluate_thresholds,
    fit_beta,
    fit_mmr,
    fit_priors,
    list_key,
    tune,
    tune_thresholds,
)
from amsrag.pipeline import Engine
from amsrag.store import EmbeddedIndex

ROUTER = RouterConfig()


def _q(true, pred, alpha, ndcg=None):
    return CalibrationQuery(true, pred, alpha, ndcg or {})


def test_loss_and_miss_rate_by_hand() -> None:
    qs = [_q("one_hop", "one_hop", 0.95), _q("multi_hop", "one_hop", 0.92), _q("multi_hop", "multi_hop", 0.5),
          _q("multi_hop", "multi_hop", 0.97)]
    p = evaluate_thresholds(qs, ROUTER, 0.90, 0.60)
    # routes A (dense: 1.0 + 0.2), A (dense for a multi_hop: single path, a miss, 12 + 0.2),
    # C (linked, 3 calls: 1.0 + 0.6), A (graph: linked, 1.0 + 0.2)
    assert p.loss == pytest.approx(16.2 / 4) and p.miss_rate == pytest.approx(1 / 3)
    assert p.route_mix == {"A": 3, "C": 1}
    grid = [(0.90, 0.60), (0.93, 0.60), (0.99, 0.95)]
    best, curve = tune_thresholds(qs, ROUTER, miss_cap=0.0, grid=grid)
    # (0.93, 0.60) sends the 0.92 one to B = dense + bm25, still a single path; (0.99, 0.95) routes
    # B (1.0 + 0.4), C (1.6), C (1.6), B = dense + graph for the multi_hop (linked, 1.0 + 0.4)
    assert (best.theta_high, best.theta_low) == (0.99, 0.95)
    assert best.loss == pytest.approx(6.0 / 4) and best.miss_rate == 0.0 and len(curve) == 3
    assert curve[1].loss == pytest.approx(16.4 / 4) and curve[1].miss_rate == pytest.approx(1 / 3)
    best, _ = tune_thresholds(qs, ROUTER, miss_cap=0.5, grid=grid)
    assert (best.theta_high, best.theta_low) == (0.99, 0.95)  # still the least loss
    with pytest.raises(InputError, match="no calibration queries"):
        tune_thresholds([], ROUTER)


def test_beta_is_normalised_per_class() -> None:
    qs = [_q("multi_hop", "multi_hop", 0.5, {"bm25": 0.2, "dense": 0.2, "graph": 0.6}),
          _q("multi_hop", "multi_hop", 0.5, {"bm25": 0.0, "dense": 0.4, "graph": 0.4})]
    beta = fit_beta(qs)
    # mean nDCG 0.1 / 0.3 / 0.5, normalised by 0.9
    assert beta["multi_hop"] == pytest.approx({"bm25": 0.1 / 0.9, "dense": 0.3 / 0.9, "graph": 0.5 / 0.9}, abs=1e-5)
    assert sum(beta["multi_hop"].values()) == pytest.approx(1.0)
    assert beta["zero_hop"] == pytest.approx({"bm25": 1 / 3, "dense": 1 / 3, "graph": 1 / 3})


# ---------------------------------------------------------------- priors, routes, MMR gate (offline fits)

# alpha 0.99 under thresholds 1.0 / 0.995: every query takes Strategy C, so both objectives fuse all three
WIDE = RouterConfig(theta_high=1.0, theta_low=0.995)


def _ranked(*ids: str) -> RankedList:
    return RankedList(tuple(ids), tuple(range(len(ids))))


def _lists(bm25: RankedList, dense: RankedList, graph: RankedList) -> dict[str, RankedList]:
    return {"bm25": bm25, "dense": dense, "graph": graph, "graph<bm25": graph, "graph<dense": graph}


def _bm25_best(n: int = 4) -> list[CalibrationQuery]:
    """bm25 ranks the gold first; dense and graph agree on five distractors and never list it."""
    out = []
    for i in range(n):
        gold = f"g{i}"
        noise = _ranked(*(f"d{i}-{j}" for j in range(8)))
        lists = _lists(_ranked(gold, *(f"b{i}-{j}" for j in range(7))), noise, noise)
        out.append(CalibrationQuery("one_hop", "one_hop", 0.99, {}, (gold,), lists))
    return out


def test_prior_grid_finds_the_clearly_best_retriever() -> None:
    fit = fit_priors(_bm25_best(), WIDE, FusionConfig())["one_hop"]
    # uniform: the distractors listed by two retrievers outscore the gold (nDCG@5 = 0); bm25's weight
    # must exceed dense + graph together
    assert fit.before["objective"] == 0.0 and fit.after["objective"] == 1.0
    assert fit.queries == 4 and fit.beta["bm25"] > fit.beta["dense"] + fit.beta["graph"]
    assert sum(fit.beta.values()) == pytest.approx(1.0)
    assert fit.k == FusionConfig().k_by_class["one_hop"]  # the beta alone suffices: k stays at the default


def test_prior_ties_go_to_uniform_and_default_k() -> None:
    same = _ranked("g", "x", "y")
    qs = [CalibrationQuery("one_hop", "one_hop", 0.99, {}, ("g",), _lists(same, same, same))]
    fits = fit_priors(qs, WIDE, FusionConfig())
    assert fits["one_hop"].beta == pytest.approx({"bm25": 1 / 3, "dense": 1 / 3, "graph": 1 / 3})
    assert fits["one_hop"].k == FusionConfig().k_by_class["one_hop"]
    assert fits["multi_hop"].queries == 0  # unseen class: uniform too
    assert fits["multi_hop"].beta == pytest.approx({"bm25": 1 / 3, "dense": 1 / 3, "graph": 1 / 3})


def test_beta_grid_uniform_first_and_on_the_simplex() -> None:
    g = beta_grid(0.1)
    assert g[0] == pytest.approx([1 / 3] * 3) and len(g) == 1 + 66
    assert np.allclose(g.sum(axis=1), 1.0) and (g >= 0).all()
    with pytest.raises(InputError, match="divide 1"):
        beta_grid(0.3)


def test_route_choice_picks_the_better_retriever() -> None:
    routes = choose_routes(_bm25_best(), WIDE, FusionConfig())
    one = routes["one_hop"]
    assert one.best_retriever == "bm25" and one.single == {"bm25": 1.0, "dense": 0.0, "graph": 0.0}
    # with uniform priors only a pair without the agreeing dense + graph keeps the gold on top
    assert one.pairs["dense+graph"] == 0.0 and sorted(one.strategy_b) in (["bm25", "dense"], ["bm25", "graph"])
    assert routes["multi_hop"].queries == 0
    assert routes["multi_hop"].best_retriever == WIDE.best_retriever["multi_hop"]  # no data: unchanged


def test_seeded_list_key() -> None:
    assert list_key("graph", ("dense", "graph")) == "graph<dense"
    assert list_key("graph", ("graph",)) == "graph"
    assert list_key("graph", ("bm25", "dense", "graph")) == "graph"
    assert list_key("dense", ("dense", "graph")) == "dense"


def _outcome(pred: str, red: float, plain: float, with_mmr: float) -> PoolOutcome:
    return PoolOutcome(pred, red, (plain, float("nan"), red), tuple((with_mmr, float("nan"), red - 0.1)
                                                                     for _ in range(10)))


def test_mmr_fit_gates_on_redundancy() -> None:
    # MMR helps the redundant pools (0.9) and hurts the others (0.2)
    outcomes = [_outcome("one_hop", 0.9, 0.5, 1.0) for _ in range(10)] + \
        [_outcome("multi_hop", 0.2, 1.0, 0.5) for _ in range(10)]
    fit = fit_mmr(outcomes)
    assert fit.gate == "redundant" and 0.2 < fit.threshold <= 0.9 and fit.lam == 0.5  # lambda: ties -> default
    assert fit.chosen["ndcg@5"] == 1.0 and fit.without["ndcg@5"] == 0.75 and fit.always["ndcg@5"] == 0.75
    assert fit.chosen["mmr_share"] == 0.5
    # a gate firing on fewer queries than the support floor is not trusted: MMR never helps -> off
    assert fit_mmr(outcomes[:3] + outcomes[10:], min_support=10).gate == "off"
    assert fit_mmr([_outcome("one_hop", 0.5, 1.0, 1.0)]).gate == "off"  # no gain: fewer MMR runs


def test_tune_sets_every_fitted_field() -> None:
    t = tune(AmsragConfig(), [CalibrationQuery("multi_hop", "one_hop", 0.99, {}, q.gold, q.lists)
                              for q in _bm25_best()])
    cfg = t.config
    assert cfg.router.best_retriever["one_hop"] == "bm25"
    assert cfg.fusion.beta_by_class["one_hop"] == t.priors["one_hop"].beta
    s = t.summary()
    assert s["routes_fit"]["one_hop"]["single"]["bm25"] == 1.0 and "mmr_fit" not in s  # no vectors: no MMR fit
    assert s["priors_fit"]["one_hop"]["after"]["objective"] >= s["priors_fit"]["one_hop"]["before"]["objective"]


def test_cli_route_tune_persists_thresholds_and_priors(built_index, tmp_path) -> None:
    import subprocess
    import sys

    from conftest import SLICE

    path = tmp_path / "index"
    shutil.copytree(built_index.path, path)
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "route", "tune", "--index", str(path),
                           "--qa", str(SLICE / "questions.jsonl"), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["queries"] == 16
    with EmbeddedIndex.open(path) as idx:
        assert idx.config.router.theta_high == summary["theta_high"]
        assert idx.config.fusion.beta_by_class == summary["beta_by_class"]
        assert idx.config.fusion.k_by_class == summary["k_by_class"]
        assert idx.config.router.best_retriever == summary["best_retriever"]
        assert idx.config.router.strategy_b == summary["strategy_b"]
        assert (idx.config.fusion.mmr_gate, idx.config.fusion.mmr_redundancy, idx.config.fusion.mmr_lambda) == (
            summary["mmr_gate"], summary["mmr_redundancy"], summary["mmr_lambda"])
        assert set(summary["priors_fit"]["one_hop"]) >= {"beta", "k", "before", "after"}
        assert summary["mmr_fit"]["queries"] > 0 and "redundancy" in summary["mmr_fit"]["without"]
        assert json.loads((path / "route-tune.json").read_text())["tuning"]["routes_fit"]
        for per in summary["beta_by_class"].values():
            assert sum(per.values()) == pytest.approx(1.0, abs=1e-5)
        assert json.loads((path / "route-tune.json").read_text())["curve"]
        with Engine(idx) as engine:  # the tuned settings are what the engine now routes by
            assert engine.router.config.theta_low == summary["theta_low"]
