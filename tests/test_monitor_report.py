"""`amsrag ops monitor report|baseline` (issue 22 items 2 and 4) on a query log of real answers."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amsrag.cli.main import app
from amsrag.monitor.drift import REFERENCE_FILE, DriftReference
from amsrag.pipeline import Engine
from amsrag.querylog import SqliteQueryLog, entry_from_answer
from amsrag.querylog.sqlite import FILE

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FIGURES = {"signals_over_time.png", "citation_support_by_route.png", "alpha_vs_reference.png", "route_mix.png",
           "drift_psi.png"}


def _copy(built_index, dest: Path) -> Path:
    shutil.copytree(built_index.path, dest, ignore=shutil.ignore_patterns("*-shm", ".write.lock", FILE + "*"))
    return dest


@pytest.fixture(scope="module")
def logged(built_index, slice_questions, tmp_path_factory) -> Path:
    """A copy of the index whose log holds real answers: the NQ questions twice (09:00–09:19), then the
    HotpotQA questions four times over (09:20–09:43), then one `amsrag ask --log` answer (now)."""
    index_dir = _copy(built_index, tmp_path_factory.mktemp("monitor") / "index")
    nq = [q.question for q in slice_questions if q.dataset == "nq"]
    hotpot = [q.question for q in slice_questions if q.dataset == "hotpotqa"]
    (index_dir.parent / "nq.jsonl").write_text("".join(json.dumps({"question": q}) + "\n" for q in nq))
    with Engine.open(index_dir) as engine:
        answers = {q: engine.ask(q) for q in nq + hotpot}
    stream = nq * 2 + hotpot * 4
    with SqliteQueryLog(index_dir / FILE) as log:
        for i, q in enumerate(stream):
            log.append(entry_from_answer(answers[q], source="api", now=T0 + timedelta(minutes=i)))
    r = CliRunner().invoke(app, ["ask", nq[0], "--index", str(index_dir), "--log", "--json"])
    assert r.exit_code == 0, r.output
    return index_dir


def _report(index_dir: Path, out: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["ops", "monitor", "report", "--index", str(index_dir), "--out", str(out), "--json",
                                 "-q", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output.splitlines()[-1])


@pytest.mark.slow
def test_report_over_real_answers_writes_the_markdown_and_figures(logged, tmp_path) -> None:
    report = _report(logged, tmp_path / "out")
    assert report["entries"] == report["routed"] == 10 * 2 + 6 * 4 + 1
    written = {Path(f).name for f in report["files"]}
    assert written == {"report.md"} | FIGURES - {"drift_psi.png"}  # no full window of 200 yet: no PSI to draw
    for name in written - {"report.md"}:
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Verdict: no verdict yet" in md and "the one shipped with amsrag" in md  # 45 answers < window 200
    assert "![route_mix.png](route_mix.png)" in md and "| escalation rate |" in md
    assert sum(b["answers"] for b in report["buckets"]) == 45
    assert set(report["totals"]) == {"escalated", "gray_zone", "flagged", "disagreement", "sufficiency_failed"}


@pytest.mark.slow
def test_without_matplotlib_the_report_is_written_and_says_how_to_draw_its_figures(logged, tmp_path,
                                                                                   monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # how Python blocks an import: as if not installed
    report = _report(logged, tmp_path / "out")
    assert {Path(f).name for f in report["files"]} == {"report.md"}
    md = (tmp_path / "out" / "report.md").read_text()
    assert "![" not in md and "pip install 'amsrag[plots]'" in md and "| escalation rate |" in md


@pytest.mark.slow
def test_baseline_then_report_finds_the_drift_of_multi_hop_traffic(logged, tmp_path) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["ops", "monitor", "baseline", "--index", str(logged), "--questions",
                            str(logged.parent / "nq.jsonl"), "--json", "-q"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output.splitlines()[-1])
    assert summary["n"] == 10 and Path(summary["path"]) == logged / REFERENCE_FILE
    try:
        until = (T0 + timedelta(minutes=44)).isoformat()
        report = _report(logged, tmp_path / "out", "--window", "20", "--until", until)
        assert report["entries"] == 44 and not report["reference_note"]
        # the first full window is the reference's own questions, twice: no drift; the HotpotQA questions
        # that follow move the route mix until the window alarms
        first = report["drift"]["first_alarm"]
        assert first is not None and first["entry"] > 20 and "route" in first["signals"]
        assert report["verdict"]["alarm"] and report["verdict"]["route_mix"]["multi_hop"] > 0.5
        assert "amsrag train classifier calibrate" in report["verdict"]["recommendation"]
        md = (tmp_path / "out" / "report.md").read_text()
        assert "## Verdict: DRIFT" in md and "![drift_psi.png](drift_psi.png)" in md
        assert {Path(f).name for f in report["files"]} == {"report.md"} | FIGURES
        calm = _report(logged, tmp_path / "calm", "--window", "20", "--until", (T0 + timedelta(minutes=20)).isoformat())
        assert calm["verdict"]["ready"] and not calm["verdict"]["alarm"]
        assert max(calm["verdict"]["psi"].values()) < 0.05  # only the smoothing of 10 vs 20 answers
        r = runner.invoke(app, ["ops", "monitor", "baseline", "--index", str(logged), "--from-log", "--until", until,
                                "-q"])
        assert r.exit_code == 0 and "44 routed answers" in r.output
        assert DriftReference.load(logged / REFERENCE_FILE).n == 44
    finally:
        (logged / REFERENCE_FILE).unlink(missing_ok=True)


def test_an_empty_log_says_so(built_index, tmp_path) -> None:
    index_dir = _copy(built_index, tmp_path / "index")
    SqliteQueryLog(index_dir / FILE).close()
    report = _report(index_dir, tmp_path / "out")
    assert report["entries"] == 0 and [Path(f).name for f in report["files"]] == ["report.md"]
    assert "no entries" in (tmp_path / "out" / "report.md").read_text()
    r = CliRunner().invoke(app, ["ops", "monitor", "report", "--index", str(index_dir), "--out", str(tmp_path / "o2")])
    assert r.exit_code == 0 and "no entries" in r.output


def test_bad_input_is_named(built_index, tmp_path) -> None:
    index_dir = _copy(built_index, tmp_path / "index")
    runner = CliRunner()
    r = runner.invoke(app, ["ops", "monitor", "report", "--index", str(index_dir), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "[query_log] enabled = true" in r.output
    SqliteQueryLog(index_dir / FILE).close()
    r = runner.invoke(app, ["ops", "monitor", "report", "--index", str(index_dir), "--out", str(tmp_path / "o"),
                            "--since", "last tuesday"])
    assert r.exit_code == 2 and "not an ISO 8601 date or time: 'last tuesday'" in r.output
    r = runner.invoke(app, ["ops", "monitor", "report", "--index", str(index_dir), "--out", str(tmp_path / "o"),
                            "--since", "2026-03-02", "--until", "2026-03-01"])
    assert r.exit_code == 2 and "is not before --until" in r.output
    r = runner.invoke(app, ["ops", "monitor", "baseline", "--index", str(index_dir)])
    assert r.exit_code == 2 and "--questions FILE or --from-log" in r.output
    r = runner.invoke(app, ["ops", "monitor", "baseline", "--index", str(index_dir), "--from-log"])
    assert r.exit_code == 2 and "no routed answers" in r.output
    (tmp_path / "empty.txt").write_text("\n")
    r = runner.invoke(app, ["ops", "monitor", "baseline", "--index", str(index_dir), "--questions",
                            str(tmp_path / "empty.txt")])
    assert r.exit_code == 2 and "no questions found" in r.output
