"""The embedding token budget (`embedding.batch_tokens`): passages per second and peak memory of `encode()` for
several budgets, and whether the vectors differ. Writes docs/benchmarks/embed-batch.json and prints the table of
docs/benchmarks/embed-batch.md.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/embed_batch.py [--budgets 8192,4096,2048,1024,512]

Texts: the bundled demo corpus (196 Wikipedia paragraphs, `title. text`), repeated to `--n`; and the same
paragraphs joined three at a time, so nearly every text reaches the encoder's 256-token cap (the widest
batches: the memory worst case). `encode()` runs with the default settings otherwise (the bulk session, two
intra-op threads, the memory arena on).

- speed: one process, every budget encodes the whole set once per round, the order reversed every other round
  (the machine is shared: compare the budgets within a round); median passages/s over `--rounds`;
- memory: each (budget, set) in a fresh process, peak RSS (VmHWM) after loading the encoder and after
  encoding the set;
- identity: the largest absolute difference between a budget's vectors and the first budget's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DEMO = ROOT / "src" / "amsrag" / "data" / "demo" / "passages.jsonl.gz"
OUT = ROOT / "docs" / "benchmarks" / "embed-batch.json"


def texts(kind: str, n: int) -> list[str]:
    with gzip.open(DEMO, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    paragraphs = [f"{r['title']}. {r['text']}" for r in rows]
    if kind == "long":
        paragraphs = [" ".join(paragraphs[i:i + 3]) for i in range(0, len(paragraphs) - 2)]
    return (paragraphs * (n // len(paragraphs) + 1))[:n]


def encoder(budget: int):  # -> amsrag.embed.encoder.MiniLMEncoder
    from amsrag.config import AmsragConfig
    from amsrag.embed.factory import encoder_for

    cfg = AmsragConfig().embedding
    cfg.batch_tokens = budget
    return encoder_for(cfg)


def peak_mb() -> int:
    """This process's peak RSS: VmHWM (Linux keeps `ru_maxrss` across exec, so a child started by a large
    parent would report the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def child(budget: int, kind: str, n: int) -> dict[str, float]:
    """In a fresh process: peak RSS after loading the encoder and after encoding the set."""
    enc = encoder(budget)
    data = texts(kind, n)
    loaded = peak_mb()
    enc.encode(data)
    return {"loaded_mb": loaded, "peak_mb": peak_mb()}


def speed(budgets: list[int], kind: str, n: int, rounds: int) -> dict[int, dict[str, object]]:
    enc = encoder(budgets[0])
    data = texts(kind, n)
    tokens = [len(e.ids) for e in enc.tokenizer.encode_batch(data)]
    enc.encode(data[:64])  # warm
    rates: dict[int, list[float]] = {b: [] for b in budgets}
    vectors: dict[int, np.ndarray] = {}
    for r in range(rounds):
        for b in budgets if r % 2 == 0 else budgets[::-1]:
            enc.config.batch_tokens = b
            t = time.perf_counter()
            vectors[b] = enc.encode(data)
            rates[b].append(len(data) / (time.perf_counter() - t))
    return {b: {"passages_per_s": round(statistics.median(rates[b]), 1), "rounds": [round(x, 1) for x in rates[b]],
                "max_abs_diff": float(np.abs(vectors[b] - vectors[budgets[0]]).max()),
                "mean_tokens": round(statistics.mean(tokens), 1),
                "share_at_cap": round(sum(t >= 256 for t in tokens) / len(tokens), 3)} for b in budgets}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budgets", default="8192,4096,2048,1024,512")
    ap.add_argument("--n", type=int, default=600, help="texts per set")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=3, metavar=("BUDGET", "KIND", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], int(args.child[2]))))
        return
    budgets = [int(b) for b in args.budgets.split(",")]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    results: dict[str, dict[str, dict[str, object]]] = {}
    for kind in ("paragraphs", "long"):
        rows = {str(b): dict(v) for b, v in speed(budgets, kind, args.n, args.rounds).items()}
        for b in budgets:
            print(f"{kind} budget {b}: {rows[str(b)]['passages_per_s']} passages/s", file=sys.stderr)
            out = subprocess.run([sys.executable, __file__, "--child", str(b), kind, str(args.n)], check=True,
                                 capture_output=True, text=True, timeout=1800, env=dict(os.environ))
            rows[str(b)].update(json.loads(out.stdout.strip().splitlines()[-1]))
        results[kind] = rows
    report = {"command": "python benchmarks/embed_batch.py " + " ".join(sys.argv[1:]), "started": started,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
              "load_avg": round(os.getloadavg()[0], 2), "results": results}
    OUT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print("| texts | budget (tokens) | passages/s | × 8192 | peak RSS MB (encoder loaded → after encoding) | "
          "max |Δ| vs first |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, rows in results.items():
        base = float(rows[str(budgets[0])]["passages_per_s"])  # type: ignore[arg-type]
        for b in budgets:
            r = rows[str(b)]
            print(f"| {kind} ({r['mean_tokens']} tokens mean) | {b} | {r['passages_per_s']} | "
                  f"{float(r['passages_per_s']) / base:.2f} | {r['loaded_mb']} → {r['peak_mb']} | "  # type: ignore[arg-type]
                  f"{r['max_abs_diff']:.1e} |")


if __name__ == "__main__":
    main()
