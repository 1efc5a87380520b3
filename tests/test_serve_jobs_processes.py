"""Two services (separate processes) on one embedded index directory share its `jobs.json`: jobs both add at
the same time are all kept, each service's records merged under the file lock rather than overwritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from amsrag.serve.jobs import JOBS_FILE

JOBS = 40
ADD_JOBS = """
import json, sys, time
from pathlib import Path
from amsrag.serve.file_jobs import FileJobStore
from amsrag.serve.jobs import Writer

path, go, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
writer = Writer(keep=1000, store=FileJobStore(path))
while not go.exists():  # both processes start adding together
    time.sleep(0.005)
jobs = [writer.start_job("add_documents", i, lambda progress, i=i: {"added": i}) for i in range(n)]
writer.submit(lambda: None).result(timeout=120)
writer.close()
print(json.dumps([j.id for j in jobs]))
"""


def test_two_services_adding_jobs_at_once_lose_none(tmp_path: Path) -> None:
    store, go = tmp_path / JOBS_FILE, tmp_path / "go"
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    procs = [subprocess.Popen([sys.executable, "-c", ADD_JOBS, str(store), str(go), str(JOBS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    added = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    records = {r["id"]: r for r in json.loads(store.read_text(encoding="utf-8"))}
    assert len(added[0]) == len(added[1]) == JOBS
    assert set(records) == set(added[0]) | set(added[1])  # none lost
    assert all(r["status"] == "succeeded" for r in records.values())
    assert len({r["owner"] for r in records.values()}) == 2
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob(".*.owner"))  # closed owners tidy up
