"""Wall time of the command line from a cold process: `amsrag --help`, `amsrag ask` to its answer in the process
itself, and `amsrag ask` through a running `amsrag serve` (the benchmark starts one on the same index).

    python benchmarks/cli_start.py --index $AMSRAG_HOME/demo-index [--runs 7] [--src OLD/src] [--no-server]

Every run is a new interpreter (the operating system's file cache stays warm, as it is for a user asking
twice); the questions rotate through the demo's showcase kinds. Reported per command: p50 and p95 wall
seconds and the mean CPU seconds (user + system) of the process, with the load average before and after:
on a shared machine the wall time grows with the load, the CPU time much less. `--src`: run another
source tree (the before numbers). Results: docs/benchmarks/cli-start.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ["Who founded the Sacred Heart school?",
             "The band who released the debut album \"Tinted Windows\" had their first performance in what city?",
             "when is the last time the philadelphia won the superbowl"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `cmd`; a failed run stops the benchmark with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary(samples: list[tuple[float, float]]) -> dict[str, Any]:
    walls = sorted(w for w, _ in samples)
    p95 = walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))]
    return {"runs": len(walls), "p50_s": round(statistics.median(walls), 3), "p95_s": round(p95, 3),
            "cpu_mean_s": round(statistics.mean(c for _, c in samples), 3), "walls_s": [round(w, 3) for w in walls]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(index: str, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "serve", "--index", index, "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    sys.exit("the service did not become ready within 600 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the source tree to run (PYTHONPATH)")
    ap.add_argument("--no-server", action="store_true", help="skip `ask --server` (a tree without it)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve()), "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "amsrag.cli"]
    load_before = os.getloadavg()
    results: dict[str, Any] = {"src": str(args.src), "index": args.index, "cpus": os.cpu_count()}
    results["help"] = summary([timed([*cli, "--help"], env) for _ in range(args.runs)])
    print("help", results["help"], flush=True)
    # --no-log: a local answer in either tree (the query log's option makes `ask` answer in its own process)
    results["ask_local"] = summary([timed([*cli, "ask", QUESTIONS[i % len(QUESTIONS)], "--index", args.index,
                                           "--no-log"], env) for i in range(args.runs)])
    print("ask_local", results["ask_local"], flush=True)
    if not args.no_server:
        port = free_port()
        server = start_server(args.index, env, port)
        try:
            url = f"http://127.0.0.1:{port}"
            timed([*cli, "ask", QUESTIONS[0], "--server", url], env)  # the service's own first answer
            results["ask_server"] = summary([timed([*cli, "ask", QUESTIONS[i % len(QUESTIONS)], "--server", url],
                                                   env) for i in range(args.runs)])
            print("ask_server", results["ask_server"], flush=True)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
    results["load_before"] = [round(x, 2) for x in load_before]
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
