"""kill -9 of `amsrag serve` while a background job runs: after a restart the job's id reads back as failed
("interrupted"), not 404 — on an embedded index (jobs.json) and on PostgreSQL (the serve_jobs table, where a
second service sharing the database tells a live owner's job from a dead one's)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import faults as F
from amsrag.serve.jobs import INTERRUPTED

pytestmark = pytest.mark.slow

KEY = "kill-nine-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
COPIES = 4  # the slice's 90 passages, each in this many new versions: a job of 360 passages to embed


def _start(index: str, log: Path, timeout: float = 240) -> tuple[subprocess.Popen, str]:
    port = F.free_port()
    with log.open("a") as out:  # the child keeps its own handle
        proc = subprocess.Popen(F.amsrag("serve", "--index", index, "--port", port, "--no-shadow", "--no-review",
                                         "--no-query-log"),
                                env=F.child_env({"AMSRAG_API_KEYS": KEY}), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"amsrag serve exited ({proc.returncode}): {log.read_text()[-3000:]}"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"amsrag serve did not start: {log.read_text()[-3000:]}"
        time.sleep(0.25)


def _job(url: str, job_id: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/jobs/{job_id}", headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _submit_and_wait_running(url: str) -> str:
    records = F.slice_records()
    passages = [{"id": f"{r['id']}~v{c}", "title": r.get("title", ""),
                 "text": f"{r['text']} (version {c} of this passage)"} for c in range(COPIES) for r in records]
    r = httpx.post(f"{url}/v1/documents", json={"passages": passages, "background": True}, headers=AUTH, timeout=120)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    deadline = time.monotonic() + 120
    while (status := _job(url, job_id)["status"]) == "queued":
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.05)
    assert status == "running", f"the job finished before the kill ({status}): make it larger"
    return job_id


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _assert_interrupted(job: dict[str, Any], job_id: str) -> None:
    assert job["id"] == job_id and job["kind"] == "add_documents" and job["size"] == COPIES * 90
    assert job["status"] == "failed", job
    assert job["error"] == {"code": "interrupted", "message": INTERRUPTED}
    assert job["started"] is not None and job["finished"] is not None and job["finished"] >= job["started"]


def test_kill_9_of_serve_on_an_embedded_index(built_index, tmp_path) -> None:
    index = F.copy_index(Path(built_index.path), tmp_path / "index")
    log = tmp_path / "serve.log"
    proc, url = _start(str(index), log)
    try:
        job_id = _submit_and_wait_running(url)
    finally:
        _kill(proc)
    proc, url = _start(str(index), log)
    try:
        _assert_interrupted(_job(url, job_id), job_id)
        missing = httpx.get(f"{url}/v1/jobs/{'0' * 32}", headers=AUTH, timeout=60)
        assert missing.status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert "interrupted when the service stopped" in log.read_text()


def test_kill_9_of_serve_on_postgres(pg_url, built_index, tmp_path) -> None:
    from amsrag.store.open import export_index

    export_index(built_index, pg_url)
    log = tmp_path / "serve.log"
    a, url_a = _start(pg_url, log)
    b, url_b = _start(pg_url, log)  # a second service on the same database, up before and after the kill
    try:
        try:
            job_id = _submit_and_wait_running(url_a)
            seen = _job(url_b, job_id)  # B reads A's record; A is alive, so its job is not interrupted
            assert seen["status"] == "running" and seen["error"] is None, seen
        finally:
            _kill(a)
        deadline = time.monotonic() + 30  # the server notices the dropped connection, and A's lock goes
        while (seen := _job(url_b, job_id))["status"] == "running":
            assert time.monotonic() < deadline, "the killed service's job still reads as running"
            time.sleep(0.2)
        _assert_interrupted(seen, job_id)
        a, url_a = _start(pg_url, log)  # the restarted service reads the stored record
        _assert_interrupted(_job(url_a, job_id), job_id)
        assert httpx.get(f"{url_a}/v1/jobs/{'0' * 32}", headers=AUTH, timeout=60).status_code == 404
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
