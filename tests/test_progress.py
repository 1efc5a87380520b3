"""Progress reporting: LogProgress lines (format, interval, rate, ETA) on a fake clock, progress_for's choice,
the service's background jobs and the CLI's --quiet."""

from __future__ import annotations

import io
import logging
import shutil
import threading
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from amsrag.progress import (
    LogProgress,
    NullProgress,
    RichProgress,
    format_duration,
    format_rate,
    progress_for,
)
from amsrag.serve.jobs import Writer


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def tick(self, seconds: float) -> None:
        self.t += seconds


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_format_duration() -> None:
    assert format_duration(0) == "0s"
    assert format_duration(45.4) == "45s"
    assert format_duration(1740) == "29m00s"
    assert format_duration(7509) == "2h05m09s"
    assert format_duration(-3) == "0s"


def test_line_format_rate_and_eta() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = LogProgress(stream=out, interval=10, clock=clock)
    with progress.task("dense: embed", 40000) as advance:
        assert lines(out) == ["dense: embed 0/40000 (0.0%) started"]
        clock.tick(150)
        advance(3000)  # 20 passages/s; 37000 left: 1850 s
        assert lines(out)[-1] == "dense: embed 3000/40000 (7.5%) 20.0/s ETA 30m50s"
        snap = progress.snapshot()
        assert snap is not None
        assert snap.to_dict() == {"task": "dense: embed", "state": "running", "done": 3000, "total": 40000,
                                  "rate": 20.0, "eta_s": 1850.0, "elapsed_s": 150.0}
        clock.tick(1850)
        advance(37000)  # the total is reached: the end line says it, no running line
        assert len(lines(out)) == 2
    assert lines(out)[-1] == "dense: embed 40000/40000 (100.0%) 20.0/s done in 33m20s"
    snap = progress.snapshot()
    assert snap is not None and snap.state == "done" and snap.eta_s == 0.0


def render_bars(progress: RichProgress, console: Console) -> str:
    with console.capture() as cap:
        console.print(progress._progress.make_tasks_table(progress._progress.tasks))
    return cap.get()


def test_rich_bars_show_the_rate_and_eta() -> None:
    assert format_rate(21.34) == "21.3/s" and format_rate(None) == "?/s"
    clock = FakeClock()
    console = Console(file=io.StringIO(), width=160, color_system=None, force_terminal=False)
    progress = RichProgress(console=console, clock=clock)
    with progress.task("dense: embed", 40000) as advance:
        assert "?/s" in render_bars(progress, console)  # nothing done yet: no rate
        for _ in range(10):  # 300 passages every 15 s: 20 passages/s; 37000 left after 150 s -> 1850 s
            clock.tick(15)
            advance(300)
        shown = render_bars(progress, console)
        assert "dense: embed" in shown and "3000/40000" in shown
        assert "20.0/s" in shown
        assert "ETA 0:30:50" in shown
        assert "0:02:30" in shown  # elapsed
        clock.tick(1850)
        advance(37000)
    done = render_bars(progress, console)
    assert "40000/40000" in done and "ETA 0:00:00" in done
    assert "/s" in done and "?/s" not in done  # the finished bar keeps a rate


def test_one_line_per_interval() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = LogProgress(stream=out, interval=10, clock=clock)
    with progress.task("bm25: tokenise", 1000) as advance:
        for _ in range(95):  # 95 s of 1 item/s: lines at 10, 20, ..., 90 s after the start line
            clock.tick(1)
            advance(1)
    running = lines(out)[1:-1]
    assert len(running) == 9
    assert running[0] == "bm25: tokenise 10/1000 (1.0%) 1.0/s ETA 16m30s"
    assert running[-1] == "bm25: tokenise 90/1000 (9.0%) 1.0/s ETA 15m10s"
    assert lines(out)[-1] == "bm25: tokenise 95/1000 (9.5%) 1.0/s done in 1m35s"


def test_unknown_total_failures_and_the_logger(caplog) -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = LogProgress(stream=out, interval=5, clock=clock, prefix="job 1: ")
    with progress.task("graph: ner", None) as advance:
        clock.tick(10)
        advance(250)
    assert lines(out) == ["job 1: graph: ner 0 started", "job 1: graph: ner 250 25.0/s",
                          "job 1: graph: ner 250 25.0/s done in 10s"]
    snap = progress.snapshot()
    assert snap is not None and snap.total is None and snap.eta_s is None

    caplog.set_level(logging.INFO, logger="amsrag.progress")
    logged = LogProgress(clock=clock)  # no stream: the amsrag.progress logger
    with pytest.raises(RuntimeError), logged.task("dense: embed", 10) as advance:
        clock.tick(2)
        advance(4)
        raise RuntimeError("boom")
    messages = [r.getMessage() for r in caplog.records if r.name == "amsrag.progress"]
    assert messages == ["dense: embed 0/10 (0.0%) started", "dense: embed 4/10 (40.0%) 2.0/s failed after 2s"]


def test_thread_safe() -> None:
    out = io.StringIO()
    progress = LogProgress(stream=out, interval=0)  # a line on every advance: the most contention
    with progress.task("embed", 8000) as advance:
        threads = [threading.Thread(target=lambda: [advance(1) for _ in range(1000)]) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    snap = progress.snapshot()
    assert snap is not None and snap.done == 8000
    assert all(line.startswith("embed ") for line in lines(out))  # whole lines, never interleaved
    assert lines(out)[-1].startswith("embed 8000/8000 (100.0%)")


def test_progress_for_picks_by_console() -> None:
    assert isinstance(progress_for(Console(file=io.StringIO()), quiet=True), NullProgress)
    assert isinstance(progress_for(Console(file=io.StringIO(), force_terminal=True)), RichProgress)
    stream = io.StringIO()
    chosen = progress_for(Console(file=stream), interval=3)
    assert isinstance(chosen, LogProgress) and chosen.interval == 3 and chosen.stream is stream
    with chosen as p, p.task("x", 2) as advance:
        advance(2)
    assert "x 0/2 (0.0%) started" in stream.getvalue() and "x 2/2 (100.0%)" in stream.getvalue()
    with NullProgress() as p, p.task("nothing", 3) as advance:
        advance(3)


def test_a_background_job_reports_its_progress() -> None:
    clock = FakeClock()
    writer = Writer(progress_interval=10, clock=clock)
    halfway, resume = threading.Event(), threading.Event()

    def job_fn(progress) -> dict:
        with progress.task("dense: embed", 400) as advance:
            clock.tick(20)
            advance(100)
            halfway.set()
            assert resume.wait(30)
            advance(300)
        return {"added": 400}

    job = writer.start_job("add_documents", 400, job_fn)
    try:
        assert halfway.wait(30)
        status = job.to_dict()
        assert status["status"] == "running"
        assert status["progress"] == {"task": "dense: embed", "state": "running", "done": 100, "total": 400,
                                      "rate": 5.0, "eta_s": 60.0, "elapsed_s": 20.0}
    finally:
        resume.set()
    deadline = time.monotonic() + 30
    while job.status in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.01)
    final = job.to_dict()
    assert final["status"] == "succeeded" and final["result"] == {"added": 400}
    assert final["progress"]["state"] == "done" and final["progress"]["done"] == 400
    writer.close()


@pytest.fixture()
def private_index(built_index, tmp_path):
    dest = tmp_path / "index"
    shutil.copytree(built_index.path, dest, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    return dest


def test_cli_progress_lines_off_a_terminal_and_quiet(private_index, tmp_path) -> None:
    from amsrag.cli.main import app

    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "Where is Tulsa?", "hop": "one_hop"}\n'
                      '{"question": "Who founded anthroposophy?", "hop": "one_hop"}\n', "utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["train", "route", "learn", str(labels), "--index", str(private_index)])
    assert res.exit_code == 0, res.output
    assert "library: embed 0/2 (0.0%) started" in res.stderr
    assert "library: embed 2/2 (100.0%)" in res.stderr and "done in" in res.stderr
    quiet = runner.invoke(app, ["train", "route", "learn", str(labels), "--index", str(private_index), "-q"])
    assert quiet.exit_code == 0, quiet.output
    assert "library: embed" not in quiet.stderr and "learned 2" in quiet.stdout
