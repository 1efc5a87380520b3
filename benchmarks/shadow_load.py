"""Shadow probes under load: load.py's test against `amsrag serve` with shadow probes off and on.

    python benchmarks/shadow_load.py --index /tmp/benchidx --json docs/benchmarks/shadow.json

Two servers over copies of one index run side by side, `off` (no probes) and `on` (`--shadow`), with the same
[shadow] settings otherwise (a gray band widened with --gray-high so the slice's questions produce probes).
Load windows alternate between them (off/on, then on/off, ...) so machine noise falls on both; after each
`on` window the script waits until the on-server's probes have settled (its /metrics), so no probe runs in
an `off` window. Two load shapes:

- closed: load.py's closed loop (32 clients, each sends its next request when the last returns): the server
  is never idle, so probes wait for a gap that comes only after the window;
- light: a few clients that pause between requests (--think-ms): the server is idle between requests, so
  probes run then, and a request that arrives during a probe competes with it for the 2 cores.

Per shape: mean / p50 / p99 latency of every successful request of each server pooled over its windows, the
on/off ratios, probes by outcome, failed requests. Exits 1 if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
import tomli_w

from amsrag.config import AmsragConfig, ShadowConfig
from load import DEFAULT_QUESTIONS, ROOT, free_port, run, start_server

SETTLED = ("dropped_busy", "agreed", "disagreed", "timeout", "failed")


def probe_counts(url: str) -> Counter:
    """The probes by outcome, and the probes' total seconds (as `seconds`, in ms) from the server's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    counts = Counter({m[1]: int(float(m[2])) for m in
                      re.finditer(r'^amsrag_shadow_probes_total\{outcome="(\w+)"\} (\S+)$', text, re.M)})
    total = re.search(r"^amsrag_shadow_probe_duration_seconds_sum (\S+)$", text, re.M)
    counts["probe_ms"] = round(float(total[1]) * 1000) if total else 0
    return counts


def wait_settled(url: str, timeout_s: float) -> tuple[Counter, float]:
    """The probe counts once every queued probe has settled (or after `timeout_s`), and the seconds waited."""
    t = time.monotonic()
    while True:
        counts = probe_counts(url)
        if counts["queued"] <= sum(counts[o] for o in SETTLED) or time.monotonic() - t > timeout_s:
            return counts, round(time.monotonic() - t, 1)
        time.sleep(0.5)


def index_copy(src: Path, dest: Path, gray_high: float) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*-shm", "*-wal", ".write.lock", "querylog.sqlite*"))
    config = AmsragConfig.load(dest / "config.toml")
    config.monitor.gray_zone_high = gray_high
    config.save(dest / "config.toml")
    return dest


def summary(ms: list[float]) -> dict:
    a = np.asarray(ms)
    return {"ok": len(a), "mean_ms": round(float(a.mean()), 1), "p50_ms": round(float(np.percentile(a, 50)), 1),
            "p99_ms": round(float(np.percentile(a, 99)), 1)} if len(a) else {"ok": 0}


async def window(url: str, shape: dict, seconds: float, questions: list[str]) -> tuple[dict, list[float]]:
    """One load window; the report, and the latency of every successful request."""
    report = await run(url, None, shape["clients"], seconds, shape["ask_share"], questions, shape["think_ms"] / 1000,
                       raw=True)
    return report, [ms for v in report.pop("latencies_ms").values() for ms in v]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True, help="an index (copied twice; the copies are deleted)")
    ap.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    ap.add_argument("--gray-high", type=float, default=0.9, help="[monitor] gray_zone_high of the served copies")
    ap.add_argument("--random-share", type=float, default=0.1)
    ap.add_argument("--per-minute", type=int, default=20)
    ap.add_argument("--closed-pairs", type=int, default=2, help="off/on window pairs of the closed loop")
    ap.add_argument("--closed-seconds", type=float, default=40)
    ap.add_argument("--light-pairs", type=int, default=3)
    ap.add_argument("--light-seconds", type=float, default=60)
    ap.add_argument("--light-clients", type=int, default=2)
    ap.add_argument("--think-ms", type=float, default=1000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    questions = [json.loads(line)["question"] for line in args.questions.read_text("utf-8").splitlines()
                 if line.strip()]
    shadow = ShadowConfig(gray_share=1.0, random_share=args.random_share, per_minute=args.per_minute)
    shapes = [{"name": "closed", "clients": 32, "think_ms": 0, "ask_share": 0.5, "pairs": args.closed_pairs,
               "seconds": args.closed_seconds},
              {"name": "light", "clients": args.light_clients, "think_ms": args.think_ms, "ask_share": 0.5,
               "pairs": args.light_pairs, "seconds": args.light_seconds}]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out: dict = {"command": " ".join(["python", "benchmarks/shadow_load.py", *sys.argv[1:]]),
                 "shadow": shadow.model_dump(), "gray_zone_high": args.gray_high,
                 "load_average_start": os.getloadavg(), "shapes": {}}
    with tempfile.TemporaryDirectory(prefix="shadow-load-") as tmp:
        settings = Path(tmp) / "serve.toml"
        settings.write_text(tomli_w.dumps({"shadow": shadow.model_dump()}), "utf-8")
        servers = {}
        try:
            for name, extra in (("off", ()), ("on", ("--shadow",))):
                port = free_port()
                copy = index_copy(args.index, Path(tmp) / name, args.gray_high)
                servers[name] = (start_server(copy, port, ("--config", str(settings), *extra), env),
                                 f"http://127.0.0.1:{port}")
            for shape in shapes:
                pooled: dict[str, list[float]] = {"off": [], "on": []}
                windows, failed, pair_ratios = [], Counter(), []
                before = probe_counts(servers["on"][1])
                for pair in range(shape["pairs"]):
                    means = {}
                    for name in (("off", "on") if pair % 2 == 0 else ("on", "off")):
                        url = servers[name][1]
                        report, ms = asyncio.run(window(url, shape, shape["seconds"], questions))
                        pooled[name] += ms
                        failed.update({f"{name} {k}": v for k, v in report["failures"].items()})
                        entry = {"server": name, "requests": report["requests"], "errors": report["errors"],
                                 **report.get("all", {})}
                        if name == "on":
                            entry["drain_s"] = wait_settled(url, 120)[1]
                        windows.append(entry)
                        means[name] = entry.get("mean_ms")
                        print(json.dumps({"shape": shape["name"], **entry}), flush=True)
                    if means.get("on") and means.get("off"):
                        pair_ratios.append(means["on"] / means["off"])
                probes = probe_counts(servers["on"][1])
                probes.subtract(before)
                off, on = summary(pooled["off"]), summary(pooled["on"])
                out["shapes"][shape["name"]] = {
                    **{k: v for k, v in shape.items() if k != "name"}, "off": off, "on": on,
                    "ratio_mean": round(on["mean_ms"] / off["mean_ms"], 3),
                    "ratio_p50": round(on["p50_ms"] / off["p50_ms"], 3),
                    "ratio_p99": round(on["p99_ms"] / off["p99_ms"], 3),
                    # each pair's on/off ratio of mean latency: adjacent windows share the machine's load
                    "pair_ratios": [round(r, 3) for r in pair_ratios],
                    "pair_ratio_geomean": round(float(np.exp(np.mean(np.log(pair_ratios)))), 3),
                    "pair_ratio_median": round(float(np.median(pair_ratios)), 3),
                    "windows": windows, "probes": dict(probes), "failed_requests": dict(failed)}
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=30)
    out["load_average_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    sys.exit(1 if any(s["failed_requests"] for s in out["shapes"].values()) else 0)


if __name__ == "__main__":
    main()
