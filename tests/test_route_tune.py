"""`route tune`: threshold search by hand-computed cost, beta fitting, persistence in the index config."""

from __future__ import annotations

import json
import shutil

import pytest

from amsrag.config import RouterConfig
from amsrag.errors import InputError
from amsrag.pipeline import Engine
from amsrag.route.tune import CalibrationQuery, evaluate_thresholds, fit_beta, tune_thresholds
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


def test_cli_route_tune_persists_thresholds_and_priors(built_index, tmp_path) -> None:
    import subprocess
    import sys

    from conftest import SLICE

    path = tmp_path / "index"
    shutil.copytree(built_index.path, path)
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "route", "tune", "--index", str(path),
                           "--qa", str(SLICE / "questions.jsonl"), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["queries"] == 16
    with EmbeddedIndex.open(path) as idx:
        assert idx.config.router.theta_high == summary["theta_high"]
        assert idx.config.fusion.beta_by_class == summary["beta_by_class"]
        for per in summary["beta_by_class"].values():
            assert sum(per.values()) == pytest.approx(1.0, abs=1e-5)
        assert json.loads((path / "route-tune.json").read_text())["curve"]
        with Engine(idx) as engine:  # the tuned settings are what the engine now routes by
            assert engine.router.config.theta_low == summary["theta_low"]
