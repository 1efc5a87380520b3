"""Load test of `amsrag serve`: N concurrent clients for T seconds, retrieve and ask mixed.

    python benchmarks/load.py --url http://127.0.0.1:8000 [--clients 32] [--seconds 60] [--ask-share 0.5]
    python benchmarks/load.py --index DIR ...     # starts `amsrag serve` on a free port for the run
    python benchmarks/load.py ... --think-ms 800  # each client waits ~0.8 s (exponential) between requests

Each client sends one request at a time (closed loop): POST /v1/ask with probability --ask-share,
else POST /v1/retrieve, cycling through the questions of --questions. Reports throughput, latency
p50/p99 per endpoint, and every non-200 (by status and error code). Exits 1 if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_QUESTIONS = ROOT / "tests" / "fixtures" / "retrieval_slice" / "questions.jsonl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index: Path, port: int, extra_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> subprocess.Popen:
    """`amsrag serve` over `index` on `port` (`extra_args`: more serve options), once it answers /healthz."""
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "serve", "--index", str(index), "--port", str(port),
                             *extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"amsrag serve exited ({proc.returncode}): {proc.stderr.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    proc.kill()
    raise SystemExit("amsrag serve did not become healthy within 180 s")


async def client(n: int, http: httpx.AsyncClient, questions: list[str], ask_share: float, until: float,
                 out: dict[str, list], failures: Counter, think_s: float = 0.0) -> None:
    rng = random.Random(1000 + n)
    i = n
    while time.monotonic() < until:
        if think_s > 0:
            await asyncio.sleep(rng.expovariate(1 / think_s))
            if time.monotonic() >= until:
                break
        endpoint = "/v1/ask" if rng.random() < ask_share else "/v1/retrieve"
        body = {"question": questions[i % len(questions)]}
        i += 1
        t = time.perf_counter()
        try:
            r = await http.post(endpoint, json=body)
            ms = (time.perf_counter() - t) * 1000
            if r.status_code == 200:
                out[endpoint].append(ms)
            else:
                try:
                    code = r.json()["error"]["code"]
                except (ValueError, KeyError, TypeError):
                    code = "?"
                failures[f"{endpoint} {r.status_code} {code}"] += 1
        except httpx.HTTPError as exc:
            failures[f"{endpoint} {type(exc).__name__}"] += 1


async def run(url: str, key: str | None, clients: int, seconds: float, ask_share: float,
              questions: list[str], think_s: float = 0.0, raw: bool = False) -> dict:
    """The report; `raw`: with every successful request's latency (`latencies_ms` by endpoint)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:
        out: dict[str, list] = defaultdict(list)
        failures: Counter = Counter()
        start = time.monotonic()
        await asyncio.gather(*(client(n, http, questions, ask_share, start + seconds, out, failures, think_s)
                               for n in range(clients)))
        elapsed = time.monotonic() - start
    report = {"url": url, "clients": clients, "seconds": round(elapsed, 1), "ask_share": ask_share,
              "think_ms": round(think_s * 1000),
              "requests": sum(len(v) for v in out.values()) + sum(failures.values()),
              "errors": sum(failures.values()), "failures": dict(failures), "endpoints": {}}
    report["throughput_rps"] = round(report["requests"] / elapsed, 2)
    if raw:
        report["latencies_ms"] = {endpoint: [round(ms, 1) for ms in v] for endpoint, v in out.items()}
    every = [ms for v in out.values() for ms in v]
    if every:
        a = np.asarray(every)
        report["all"] = {"ok": len(a), "mean_ms": round(float(a.mean()), 1),
                         "p50_ms": round(float(np.percentile(a, 50)), 1),
                         "p99_ms": round(float(np.percentile(a, 99)), 1)}
    for endpoint, ms in sorted(out.items()):
        a = np.asarray(ms)
        report["endpoints"][endpoint] = {"ok": len(a), "rps": round(len(a) / elapsed, 2),
                                         "mean_ms": round(float(a.mean()), 1),
                                         "p50_ms": round(float(np.percentile(a, 50)), 1),
                                         "p99_ms": round(float(np.percentile(a, 99)), 1),
                                         "max_ms": round(float(a.max()), 1)}
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running server")
    where.add_argument("--index", type=Path, help="start `amsrag serve` over this index for the run")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--ask-share", type=float, default=0.5, help="share of requests that are /v1/ask")
    ap.add_argument("--think-ms", type=float, default=0, help="mean pause of a client between requests "
                    "(exponential; 0: closed loop, the next request as soon as the last returns)")
    ap.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS, help="JSONL with a `question` field")
    ap.add_argument("--api-key", default=os.environ.get("AMSRAG_API_KEY"), help="default: $AMSRAG_API_KEY")
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args()
    lines = args.questions.read_text("utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    proc = None
    url = args.url
    if args.index:
        port = free_port()
        proc = start_server(args.index, port)
        url = f"http://127.0.0.1:{port}"
    try:
        report = asyncio.run(run(url, args.api_key, args.clients, args.seconds, args.ask_share, questions,
                                 args.think_ms / 1000))
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {args.api_key}"} if args.api_key else {},
                          timeout=30) as http:
            report["server_config"] = http.get("/v1/config").json().get("limits")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    sys.exit(1 if report["errors"] else 0)


if __name__ == "__main__":
    main()
