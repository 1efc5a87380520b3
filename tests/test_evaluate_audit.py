"""The eval harness audits every answer as `Engine.ask` does and reports, per system, the share flagged, the
mean support, and the flag's precision and recall of wrong answers (issue 22)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from amsrag.evaluate.harness import EvalOptions, run_eval
from amsrag.evaluate.metrics import WRONG_F1, f1_score, flag_quality
from amsrag.evaluate.report import audit_summary
from amsrag.evaluate.runner import SystemResult
from amsrag.evaluate.systems import SystemRow
from amsrag.pipeline import Engine

SLICE = Path(__file__).parent / "fixtures" / "retrieval_slice"


def test_flag_quality_counts_rate_precision_and_recall() -> None:
    q = flag_quality([True, True, False, False, True], [True, False, True, False, False])
    assert (q["n"], q["flagged"], q["target"], q["hits"]) == (5, 3, 2, 1)
    assert (q["flag_rate"], q["precision"], q["recall"]) == (0.6, round(1 / 3, 4), 0.5)
    none = flag_quality([False, False], [False, False])
    assert none["precision"] is None and none["recall"] is None and none["flag_rate"] == 0.0
    assert flag_quality([], [])["flag_rate"] is None
    with pytest.raises(ValueError, match="2 flags for 1"):
        flag_quality([True, False], [True])


def _system(f1, abstained, support, flagged) -> SystemResult:
    n = len(f1)
    values = {"f1": np.array(f1, dtype=float), "em": np.zeros(n)}
    return SystemResult(SystemRow("x", "bm25"), values, np.zeros(n), {}, np.ones(n), ["A"] * n,
                        np.array(abstained, dtype=float), np.zeros(n), support=np.array(support, dtype=float),
                        flagged=np.array(flagged, dtype=float))


def test_audit_summary_leaves_out_abstentions_and_unaudited_answers() -> None:
    nan = math.nan
    s = _system(f1=[1.0, 0.2, 0.0, 0.0, 0.9, nan], abstained=[0, 0, 0, 1, 0, nan],
                support=[0.8, 0.1, 0.6, nan, 0.3, nan], flagged=[0, 1, 0, nan, 1, nan])
    a = audit_summary(s, np.ones(6, dtype=bool))
    assert a == {"answers": 4, "audited": 4, "flagged_share": 0.5, "support_mean": 0.45, "wrong": 2,
                 "flag_precision": 0.5, "wrong_recall": 0.5}
    only_first = audit_summary(s, np.array([True, True, False, False, False, False]))
    assert only_first is not None and only_first["flag_precision"] == 1.0 and only_first["wrong_recall"] == 1.0
    unaudited = _system([1.0], [0], [nan], [nan])
    unaudited.flagged = unaudited.support = None
    assert audit_summary(unaudited, np.ones(1, dtype=bool)) is None


@pytest.mark.slow
def test_eval_audits_answers_as_engine_ask_does(built_index, tmp_path) -> None:
    """The harness's audit of `full` (corrective path) is `Engine.ask`'s; the report aggregates those traces."""
    report = run_eval(EvalOptions(out=tmp_path / "out", index=built_index.path, qa=[SLICE / "questions.jsonl"],
                                  systems="bm25,full", cache_dir=tmp_path / "cache", data_dir=tmp_path / "x",
                                  bootstrap=100, workers=1))
    assert report["config"]["audited"] is True
    questions = [json.loads(line) for line in (SLICE / "questions.jsonl").read_text("utf-8").splitlines()]
    with Engine.open(built_index.path) as engine:
        traces = [engine.ask(q["question"], system="full").to_dict() for q in questions]
    flagged, wrong, supports = [], [], []
    for q, a in zip(questions, traces, strict=True):
        if a["abstained"]:
            assert a["trace"]["audit"]["support"] is None
            continue
        supports.append(a["trace"]["audit"]["support"])
        flagged.append(a["trace"]["audit"]["flagged"])
        wrong.append(f1_score(a["answer"], q["answers"]) < WRONG_F1)
    full = report["systems"]["full"]["audit"]
    expected = flag_quality(flagged, wrong)
    assert full["audited"] == full["answers"] == len(supports) > 0
    assert full["flagged_share"] == expected["flag_rate"] and full["wrong"] == expected["target"]
    assert full["flag_precision"] == expected["precision"] and full["wrong_recall"] == expected["recall"]
    assert full["support_mean"] == pytest.approx(float(np.mean(supports)), abs=1e-3)
    bm25 = report["systems"]["bm25"]["audit"]
    assert 0 < bm25["audited"] <= len(questions) and 0.0 <= bm25["support_mean"] <= 1.0
    assert sum(g["audit"]["audited"] for g in report["systems"]["bm25"]["by_dataset"].values()) == bm25["audited"]
    assert "## Citation-support audit" in (tmp_path / "out" / "report.md").read_text()
    off = run_eval(EvalOptions(out=tmp_path / "off", index=built_index.path, qa=[SLICE / "questions.jsonl"],
                               systems="bm25", cache_dir=tmp_path / "cache", data_dir=tmp_path / "x",
                               bootstrap=100, workers=1, audit=False))
    assert off["config"]["audited"] is False and "audit" not in off["systems"]["bm25"]
