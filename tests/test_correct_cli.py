"""`amsrag train evaluator score|train` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "evaluator", *args], capture_output=True,
                          text=True, timeout=300)


def test_score_json(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    rows = [{"id": "a", "title": "Wilhelm Röntgen", "text": "Wilhelm Röntgen received the first Nobel Prize in "
                                                          "Physics in 1901 for his discovery of X-rays."},
            {"id": "b", "title": "Banana", "text": "A banana is an elongated, edible fruit grown in the tropics."}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc = _run("score", "--json", "--passages", str(f), "who got the first nobel prize in physics")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout.strip())
    assert obj["action"] in ("correct", "ambiguous", "incorrect") and 0 <= obj["score"] <= 1
    scores = {p["id"]: p["score"] for p in obj["per_passage"]}
    assert scores["a"] > scores["b"] and obj["score"] == scores["a"]


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    proc = _run("score", "--passages", str(tmp_path / "missing.jsonl"), "q")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    proc = _run("score", "--passages", str(bad), "q")
    assert proc.returncode == 2 and "bad.jsonl:1" in proc.stderr
    proc = _run("train", "--calibration", "magic", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "unknown calibration method" in proc.stderr
    proc = _run("evaluate", "--model", str(tmp_path))
    assert proc.returncode == 2 and "not an evaluator artifact" in proc.stderr
