"""`amsrag train classifier predict` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from amsrag.types import COMPLEXITIES


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "classifier", "predict", *args],
                          capture_output=True, text=True, timeout=120)


def _check(obj: dict, question: str) -> None:
    assert set(obj) == {"question", "label", "probs", "alpha", "decided_by"} and obj["decided_by"] == "classifier"
    assert obj["question"] == question and obj["label"] in COMPLEXITIES
    assert set(obj["probs"]) == set(COMPLEXITIES)
    assert abs(sum(obj["probs"].values()) - 1) < 1e-9 and obj["alpha"] == max(obj["probs"].values())


def test_predict_json_schema() -> None:
    q = "Who was the father of the director of Titanic?"
    proc = _run("--json", q)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    _check(json.loads(lines[0]), q)


def test_predict_input_file(tmp_path: Path) -> None:
    qs = ["who sang hotel california", "When was the publisher of Crux launched?"]
    f = tmp_path / "q.jsonl"
    f.write_text("".join(json.dumps({"question": q}) + "\n" for q in qs), encoding="utf-8")
    proc = _run("--json", "--input", str(f))
    assert proc.returncode == 0, proc.stderr
    for line, q in zip(proc.stdout.strip().splitlines(), qs, strict=True):
        _check(json.loads(line), q)


def test_predict_errors_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"question": "ok?"}\n{"q": 1}\n', encoding="utf-8")
    proc = _run("--json", "--input", str(f))
    assert proc.returncode == 2 and f"{f}:2:" in proc.stderr
    proc = _run("--json", "   ")
    assert proc.returncode == 2 and "empty question" in proc.stderr
