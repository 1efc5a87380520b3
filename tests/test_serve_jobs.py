"""Serve job records outlive the process (embedded store): a job a stopped service left running reads back as
failed ("interrupted"), not unknown; the record file stays bounded and is written atomically."""

from __future__ import annotations

import json
import threading

import httpx

from amsrag.config import ServeConfig
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from amsrag.serve.background import BackgroundServer
from amsrag.serve.file_jobs import FileJobStore
from amsrag.serve.jobs import INTERRUPTED, JOBS_FILE, Writer
from test_serve_api import copy_index


def test_a_job_running_when_the_service_stopped_reads_back_as_failed(tmp_path) -> None:
    store = tmp_path / JOBS_FILE
    entered, release = threading.Event(), threading.Event()

    def slow(progress) -> dict:
        entered.set()
        assert release.wait(30)
        return {"added": 1}

    first_store = FileJobStore(store)
    first = Writer(store=first_store)
    job = first.start_job("add_documents", 3, slow)
    assert entered.wait(30)
    on_disk = {r["id"]: r for r in json.loads(store.read_text(encoding="utf-8"))}
    assert on_disk[job.id]["status"] == "running"  # what a killed process leaves behind
    second = Writer(store=FileJobStore(store))  # another service over the same directory, while the first runs
    seen = second.get(job.id)
    assert seen is not None and seen.status == "running" and seen.error is None
    first_store.close()  # its owner lock goes, as when its process is killed
    again = second.get(job.id)
    assert again is not None and again.status == "failed" and again.finished is not None
    assert again.error == {"code": "interrupted", "message": INTERRUPTED}
    assert again.to_dict()["status_url"] == f"/v1/jobs/{job.id}"
    assert json.loads(store.read_text(encoding="utf-8"))[0]["status"] == "failed"
    restarted = Writer(store=FileJobStore(store))  # a service started after it: the failed record is held in memory
    assert restarted.get(job.id).status == "failed"
    release.set()
    first.close()
    second.close()
    restarted.close()
    assert not list(tmp_path.glob("*.tmp"))


def test_job_records_are_bounded_and_finished_ones_survive(tmp_path) -> None:
    store = tmp_path / JOBS_FILE
    writer = Writer(keep=3, store=FileJobStore(store))
    jobs = [writer.start_job("add_documents", i, lambda progress, i=i: {"added": i}) for i in range(5)]
    writer.submit(lambda: None).result(timeout=60)  # one writer thread: the jobs before it are done
    writer.close()
    records = json.loads(store.read_text(encoding="utf-8"))
    assert [r["id"] for r in records] == [j.id for j in jobs[-3:]]
    reopened = Writer(keep=3, store=FileJobStore(store))
    assert reopened.get(jobs[-1].id).status == "succeeded" and reopened.get(jobs[-1].id).result == {"added": 4}
    assert reopened.get(jobs[0].id) is None
    reopened.close()


def test_a_broken_record_file_does_not_stop_the_service(tmp_path) -> None:
    store = tmp_path / JOBS_FILE
    store.write_text("{not json", encoding="utf-8")
    writer = Writer(store=FileJobStore(store))
    job = writer.start_job("add_documents", 1, lambda progress: {"added": 1})
    writer.submit(lambda: None).result(timeout=60)
    writer.close()
    assert json.loads(store.read_text(encoding="utf-8"))[0]["id"] == job.id


def test_restarted_service_reports_the_interrupted_job_over_http(built_index, tmp_path) -> None:
    index_dir = copy_index(built_index, tmp_path / "index")
    record = {"id": "a" * 32, "kind": "add_documents", "size": 500, "status": "running", "created": 1.0,
              "started": 2.0, "finished": None, "result": None, "error": None}
    (index_dir / JOBS_FILE).write_text(json.dumps([record]), encoding="utf-8")
    service = Service(Engine.open(index_dir), ServeConfig())
    server = BackgroundServer(create_app(service))
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            r = client.get(f"/v1/jobs/{'a' * 32}")
    finally:
        server.stop()
        service.close()
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "failed" and body["error"] == {"code": "interrupted", "message": INTERRUPTED}


def test_postgres_job_records_tell_a_live_service_from_a_stopped_one(pg_url) -> None:
    from amsrag.serve.pg_jobs import PostgresJobStore

    entered, release = threading.Event(), threading.Event()

    def slow(progress) -> dict:
        entered.set()
        assert release.wait(30)
        return {"added": 1}

    first_store = PostgresJobStore(pg_url)
    first = Writer(store=first_store)
    job = first.start_job("add_documents", 3, slow)
    assert entered.wait(30)
    second = Writer(store=PostgresJobStore(pg_url))  # another service on the database, while the first runs
    seen = second.get(job.id)
    assert seen is not None and seen.status == "running" and seen.error is None
    first_store.close()  # the first service's connection goes, as when its process is killed: its lock too
    seen = second.get(job.id)
    assert seen is not None and seen.status == "failed"
    assert seen.error == {"code": "interrupted", "message": INTERRUPTED}
    assert second.get("f" * 32) is None
    release.set()
    first.close()
    second.close()


def test_postgres_job_records_are_bounded(pg_url) -> None:
    from amsrag.serve.pg_jobs import TABLE, PostgresJobStore

    writer = Writer(keep=3, store=PostgresJobStore(pg_url))
    jobs = [writer.start_job("add_documents", i, lambda progress, i=i: {"added": i}) for i in range(5)]
    writer.submit(lambda: None).result(timeout=60)
    writer.close()
    import psycopg

    with psycopg.connect(pg_url) as conn:
        ids = [r[0] for r in conn.execute(f"SELECT id FROM {TABLE} ORDER BY seq")]
    assert ids == [j.id for j in jobs[-3:]]
    reopened = Writer(keep=3, store=PostgresJobStore(pg_url))
    again = reopened.get(jobs[-1].id)
    assert again is not None and again.status == "succeeded" and again.result == {"added": 4}
    assert reopened.get(jobs[0].id) is None
    reopened.close()
