"""`amsrag eval` end to end: every system in one run, report.json per DESIGN §9, report.md, PNGs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amsrag.cli import app
from amsrag.errors import InputError
from amsrag.evaluate.harness import EvalOptions, run_eval
from amsrag.evaluate.metrics import METRICS

SLICE = Path(__file__).parent / "fixtures" / "retrieval_slice"
SYSTEM_KEYS = {"n", "em", "f1", "ndcg@5", "recall@5", "all_gold@5", "mrr@10", "latency_ms",
               "retriever_calls_per_query", "route_mix", "ci95", "p_vs_A0", "by_class", "by_dataset"}


def check_report(out: Path, systems: list[str], n_queries: int) -> dict:
    """The report is complete and consistent: every system, every metric, CIs bracket the estimates."""
    for name in ("report.md", "report.json", "quality_vs_calls.png", "latency_breakdown.png", "reliability.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    report = json.loads((out / "report.json").read_text())
    assert {"config", "n_queries", "n_passages", "systems"} <= set(report)
    assert report["n_queries"] == n_queries and report["n_passages"] > 0
    assert list(report["systems"]) == systems
    for name, s in report["systems"].items():
        assert set(s) >= SYSTEM_KEYS, (name, SYSTEM_KEYS - set(s))
        assert s["n"] == n_queries
        assert set(s["latency_ms"]) == {"mean", "p50", "p95"}
        assert 0 < s["latency_ms"]["p50"] <= s["latency_ms"]["p95"]
        assert s["retriever_calls_per_query"] >= 1 or name.startswith(("full", "A2", "A3", "A4", "adaptive"))
        assert sum(s["route_mix"].values()) == n_queries
        for m in METRICS:
            value, ci = s[m], s["ci95"][m]
            if value is None:
                assert ci is None
                continue
            assert 0.0 <= value <= 1.0
            assert ci[0] - 1e-9 <= value <= ci[1] + 1e-9, (name, m, value, ci)
            p = s["p_vs_A0"][m]
            assert p is not None and 0 < p <= 1
        if name == "A0":
            assert all(p == 1.0 for p in s["p_vs_A0"].values() if p is not None)
        assert sum(g["n"] for g in s["by_dataset"].values()) == n_queries
        assert sum(g["n"] for g in s["by_class"].values()) == n_queries
    text = (out / "report.md").read_text()
    for heading in ("Table 3 form", "Table 4 form", "Table 5 form", "Table 6 form", "zero-hop"):
        assert heading in text
    return report


@pytest.mark.slow
def test_eval_on_the_slice_index(built_index, tmp_path, monkeypatch):
    out = tmp_path / "out"
    systems = ["bm25", "dense", "graph", "A0", "A1", "A3", "full", "full@0.95/0.65", "adaptive-rag"]
    result = CliRunner().invoke(app, [
        "eval", "--index", str(built_index.path), "--qa", str(SLICE / "questions.jsonl"), "--out", str(out),
        "--systems", ",".join(systems), "--cache", str(tmp_path / "cache"), "--data", str(tmp_path / "no-data"),
        "--bootstrap", "300", "--answer-limit", "12"])
    assert result.exit_code == 0, result.output
    report = check_report(out, systems, 16)
    assert all(s["n_scored"]["em"] == 12 for s in report["systems"].values())  # the same answered sample
    assert report["config"]["generator"] == "extractive"
    a0, full = report["systems"]["A0"], report["systems"]["full"]
    assert a0["retriever_calls_per_query"] >= 3  # the fixed pipeline runs every retriever
    assert full["by_class"]["multi_hop"]["n"] == 6 and full["by_dataset"]["nq"]["n"] == 10
    assert a0["n_scored"]["all_gold@5"] == 6  # the multi-hop questions have two gold passages
    assert not math.isnan(report["classifier"]["calibrated"]["three_way"]["accuracy"])
    # the limit takes a seeded sample; bad options are clear errors (exit code 2); without matplotlib (the
    # `plots` extra) the report comes without figures and says how to get them
    with monkeypatch.context() as blocked:
        blocked.setitem(sys.modules, "matplotlib", None)
        result = CliRunner().invoke(app, [
            "eval", "--index", str(built_index.path), "--qa", str(SLICE / "questions.jsonl"), "--out", str(out / "l"),
            "--systems", "A0,full", "--limit", "5", "--cache", str(tmp_path / "cache"), "--data", str(tmp_path / "x"),
            "--bootstrap", "200", "--no-answers", "--sizes", "nq=7,hotpotqa=4", "--tune"])
    assert result.exit_code == 0, result.output
    assert "pip install 'amsrag[plots]'" in result.output and not list((out / "l").glob("*.png"))
    limited = json.loads((out / "l" / "report.json").read_text())
    assert limited["n_queries"] == 5 and limited["systems"]["full"]["em"] is None
    # --tune: route tune in memory on the 5 held-back questions, not on the eval queries
    tuned = limited["config"]["tuned_in_run"]
    assert tuned["calibration_questions"] == 5
    assert (limited["config"]["theta_high"], limited["config"]["theta_low"]) == (tuned["theta_high"],
                                                                                 tuned["theta_low"])
    base = {"out": out / "bad", "index": built_index.path, "qa": [SLICE / "questions.jsonl"],
            "cache_dir": tmp_path / "cache", "data_dir": tmp_path / "x"}
    for kwargs, msg in (({"systems": "nope"}, "unknown system"), ({"noise": 5}, "--noise"),
                        ({"limit": 0}, "--limit"), ({"answer_limit": 0}, "--answer-limit"),
                        ({"qa": [tmp_path / "missing.jsonl"]}, "no such file")):
        with pytest.raises(InputError, match=msg):
            run_eval(EvalOptions(**{**base, **kwargs}))
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "eval", "--index", str(built_index.path), "--qa",
                           str(SLICE / "questions.jsonl"), "--out", str(out / "bad"), "--systems", "nope"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "unknown system" in proc.stderr


@pytest.mark.slow
def test_eval_quick_default_mix(shared_data, tmp_path):
    """`--quick`: the paper-like mix (single-hop, multi-hop, zero-hop) at a small size, complete and consistent."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval", "--quick", "--out", str(out), "--data", str(shared_data),
                                      "--cache", str(tmp_path / "cache"), "--bootstrap", "300"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    check_report(out, list(report["config"]["systems"]), report["n_queries"])
    classes = report["queries"]["by_class"]
    assert classes.get("zero_hop", 0) > 0 and classes.get("one_hop", 0) > 0 and classes.get("multi_hop", 0) > 0
    full = report["systems"]["full"]
    assert full["by_class"]["zero_hop"]["n"] > 0 and full["by_class"]["zero_hop"]["f1"] is not None
    # zero-hop questions without gold passages count in EM/F1, not in the retrieval metrics
    assert full["n_scored"]["ndcg@5"] == report["queries"]["with_gold"] < report["n_queries"]
    assert full["n_scored"]["f1"] == report["n_queries"]


@pytest.mark.slow
def test_answer_workers_give_the_in_process_answers(built_index, tmp_path):
    """The answer phase in 2 worker processes answers exactly as in-process (and the corrective path too)."""
    from amsrag.evaluate.answering import CHUNK

    reports = {}
    for workers in (1, 2):
        reports[workers] = run_eval(EvalOptions(
            out=tmp_path / f"w{workers}", index=built_index.path, qa=[SLICE / "questions.jsonl"],
            systems="bm25,A0,full", cache_dir=tmp_path / f"cache{workers}", data_dir=tmp_path / "x",
            bootstrap=200, workers=workers))
    assert reports[2]["n_queries"] > CHUNK  # so the worker path really ran
    assert reports[2]["config"]["answer_workers"] == 2
    for name in ("bm25", "A0", "full"):
        one, two = reports[1]["systems"][name], reports[2]["systems"][name]
        assert (one["em"], one["f1"], one["abstain_rate"]) == (two["em"], two["f1"], two["abstain_rate"]), name
        assert one["ndcg@5"] == two["ndcg@5"]
        assert one["audit"] == two["audit"] and one["audit"]["audited"] > 0, name  # audited in the workers too
    path1, path2 = reports[1]["systems"]["full"]["answer_path"], reports[2]["systems"]["full"]["answer_path"]
    assert path1["n"] == path2["n"] == reports[2]["n_queries"]
    assert path1["corrective_actions"] == path2["corrective_actions"]
    assert set(path2["corrective_actions"]) <= {"reader-accepted", "reader-escalated", "reader-kept"}
    with pytest.raises(InputError, match="--workers"):
        run_eval(EvalOptions(out=tmp_path / "bad", index=built_index.path, qa=[SLICE / "questions.jsonl"],
                             cache_dir=tmp_path / "cache1", data_dir=tmp_path / "x", workers=0))


@pytest.mark.slow
def test_sentence_vectors_embedded_in_workers_reach_the_parent(built_index, tmp_path):
    """The heuristic reader embeds evidence sentences in the worker processes; the parent keeps them."""
    import numpy as np

    report = run_eval(EvalOptions(
        out=tmp_path / "w2", index=built_index.path, qa=[SLICE / "questions.jsonl"], systems="bm25",
        cache_dir=tmp_path / "cache", data_dir=tmp_path / "x", bootstrap=100, workers=2, generator="heuristic"))
    assert report["config"]["answer_workers"] == 2 and report["config"]["generator"] == "heuristic"
    with np.load(tmp_path / "cache" / "sentence-vectors.npz") as z:
        assert len(z["texts"]) > 0
