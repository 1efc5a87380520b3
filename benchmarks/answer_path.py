"""`Engine.ask` end to end: answer quality and latency of the ways to check the evidence, in one run.

    python benchmarks/answer_path.py [--limit 300]     # the eval benchmark's index (`amsrag eval` builds it)

Policies, each an `Engine.ask` on the same index (system `full`, the extractive span reader):
- `evaluator`: the corrective step always runs (retrieval evaluator over every evidence sentence), as
  before the reader gate existed (`corrective.reader_gate = 1`);
- `reader gate` (the default): the reader reads the first pass; at confidence >= `reader_gate` the
  evidence stands, below it the route widens once and the reader reads again;
- `reader gate + evaluator`: the same gate, the evaluator's corrective step below it;
- `no check`: the corrective step off.

Part 1 picks `reader_gate` on the benchmark's calibration questions (disjoint from the evaluated ones):
per question it records the first read, the widened read and the evaluator's read, and sweeps the gate.
Part 2 times the policies on a seeded sample of the evaluated questions, interleaved per question
(one query at a time, 1 onnxruntime thread each), so their latencies are ratios measured in the same run.
Results: docs/benchmarks/answer-path.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.generate.metrics import exact_match, token_f1
from amsrag.pipeline import Engine
from common import ROOT, SHARED_DATA

DOCS = ROOT / "docs" / "benchmarks"
GATES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 1.0)
POLICIES = ("evaluator", "reader gate", "reader gate + evaluator", "no check")


def bench_dir(data: Path) -> Path:
    from amsrag.evaluate.builder import BenchmarkSpec, load_or_build

    return load_or_build(BenchmarkSpec(data_dir=data))[1]


def policy_config(base: AmsragConfig, policy: str, gate: float | None = None) -> AmsragConfig:
    cfg = base.model_copy(deep=True)
    c = cfg.corrective
    if policy == "evaluator":
        c.reader_gate = 1.0
    elif policy == "reader gate":
        c.below_gate = "escalate"
    elif policy == "reader gate + evaluator":
        c.below_gate = "evaluate"
    elif policy == "no check":
        c.enabled = False
    else:
        raise ValueError(policy)
    if gate is not None:
        c.reader_gate = gate
    return cfg


def scored(answer: str, answers: list[str]) -> tuple[float, float]:
    return float(exact_match(answer, answers)), float(token_f1(answer, answers))


def sweep(index: Any, queries: list[dict[str, Any]], log: Any) -> dict[str, Any]:
    """Per calibration question: the first read, the widened read and the evaluator's read; the gate swept."""
    base = index.config
    first = Engine(index, config=policy_config(base, "no check"))
    wide = Engine(index, config=policy_config(base, "reader gate", gate=1.0 - 1e-9))  # always widen
    check = Engine(index, config=policy_config(base, "evaluator"))
    recs = []
    for i, q in enumerate(queries):
        qv = index.encoder.encode_query(q["question"])
        rows = {}
        for name, engine in (("first", first), ("widened", wide), ("evaluator", check)):
            t = time.perf_counter()
            a = engine.answer(q["question"], "full", engine.generator, qv)  # a reader (and its cache) per engine
            ms = (time.perf_counter() - t) * 1000
            em, f1 = scored(a.generation.answer, q["answers"])
            rows[name] = {"em": em, "f1": f1, "ms": ms, "conf": a.generation.confidence or 0.0}
        recs.append({"dataset": q["dataset"], **rows})
        if (i + 1) % 50 == 0:
            log(f"calibration {i + 1}/{len(queries)}")
    table = []
    for gate in GATES:
        row: dict[str, Any] = {"gate": gate}
        for below in ("widened", "evaluator"):
            em, f1, ms = [], [], []
            for r in recs:
                keep = r["first"]["conf"] >= gate
                pick = r["first"] if keep else r[below]
                em.append(pick["em"])
                f1.append(pick["f1"])
                ms.append(r["first"]["ms"] + (0.0 if keep else max(0.0, r[below]["ms"] - r["first"]["ms"])))
            row[below] = {"em": round(float(np.mean(em)), 4), "f1": round(float(np.mean(f1)), 4),
                          "est_p50_ms": round(float(np.percentile(ms, 50)), 1),
                          "est_p95_ms": round(float(np.percentile(ms, 95)), 1)}
        row["accepted"] = round(float(np.mean([r["first"]["conf"] >= gate for r in recs])), 4)
        table.append(row)
    return {"n": len(recs), "sweep": table,
            "always_evaluator_f1": round(float(np.mean([r["evaluator"]["f1"] for r in recs])), 4)}


def timed(index: Any, queries: list[dict[str, Any]], log: Any) -> dict[str, Any]:
    engines = {p: Engine(index, config=policy_config(index.config, p)) for p in POLICIES}
    for e in engines.values():  # load every model before timing
        e.ask(queries[0]["question"])
    acc: dict[str, dict[str, list[Any]]] = {p: defaultdict(list) for p in POLICIES}
    for i, q in enumerate(queries):
        for p, engine in engines.items():
            t = time.perf_counter()
            a = engine.ask(q["question"])
            ms = (time.perf_counter() - t) * 1000
            em, f1 = scored(a.answer, q["answers"])
            r = acc[p]
            r["ms"].append(ms)
            r["em"].append(em)
            r["f1"].append(f1)
            r["ds"].append(q["dataset"])
            r["abstained"].append(a.abstained)
            r["action"].append(a.trace["corrective"]["action"])
            r["calls"].append(a.trace["retriever_calls"])
        if (i + 1) % 25 == 0:
            log(f"timed {i + 1}/{len(queries)}")
    out: dict[str, Any] = {}
    for p, r in acc.items():
        ms = np.array(r["ms"])
        by_ds = defaultdict(list)
        for ds, f in zip(r["ds"], r["f1"], strict=True):
            by_ds[ds].append(f)
        actions: dict[str, int] = defaultdict(int)
        for a in r["action"]:
            actions[a] += 1
        out[p] = {"n": len(ms), "em": round(float(np.mean(r["em"])), 4), "f1": round(float(np.mean(r["f1"])), 4),
                  "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
                  "abstained": round(float(np.mean(r["abstained"])), 4),
                  "retriever_calls": round(float(np.mean(r["calls"])), 3),
                  "f1_by_dataset": {k: round(float(np.mean(v)), 4) for k, v in sorted(by_ds.items())},
                  "actions": dict(actions)}
    base = acc["evaluator"]
    for p in POLICIES:
        ratio = np.array(acc[p]["ms"]) / np.maximum(np.array(base["ms"]), 1e-6)
        out[p]["median_time_ratio_vs_evaluator"] = round(float(np.median(ratio)), 3)
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = ["# The answer path: checking the evidence, at what cost", "",
             f"Command: `{res['command']}` ({res['date']}). Machine: {res['machine']}.", "",
             "Index: the default `amsrag eval` benchmark (25,473 passages). System `full`, extractive span reader "
             "(1 onnxruntime thread), one query at a time. See the script's docstring for the policies.", "",
             f"## Choosing `corrective.reader_gate` ({res['calibration']['n']} calibration questions, disjoint "
             "from the evaluated ones)", "",
             "Below the gate the route widens (default) or the evaluator runs. Latencies are estimates from the "
             "recorded per-question times of the reads and checks.", "",
             "| gate | accepted | widen: EM | widen: F1 | widen: p50 / p95 ms | evaluator: EM | evaluator: F1 "
             "| evaluator: p50 / p95 ms |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["calibration"]["sweep"]:
        w, e = r["widened"], r["evaluator"]
        lines.append(f"| {r['gate']} | {r['accepted']:.2f} | {w['em']:.3f} | {w['f1']:.3f} | {w['est_p50_ms']:.0f} / "
                     f"{w['est_p95_ms']:.0f} | {e['em']:.3f} | {e['f1']:.3f} | {e['est_p50_ms']:.0f} / "
                     f"{e['est_p95_ms']:.0f} |")
    t = res["timed"]
    lines += ["", f"## Timed on {t['evaluator']['n']} evaluated questions (seeded sample, policies interleaved per "
              "question)", "",
              "| policy | EM | F1 | abstained | p50 ms | p95 ms | median time ratio vs evaluator | retriever calls "
              "| F1 by data set | actions |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for p in POLICIES:
        r = t[p]
        lines.append(f"| {p} | {r['em']:.3f} | {r['f1']:.3f} | {r['abstained']:.2f} | {r['p50_ms']:.0f} | "
                     f"{r['p95_ms']:.0f} | {r['median_time_ratio_vs_evaluator']:.2f} | {r['retriever_calls']:.2f} | "
                     + ", ".join(f"{k} {v:.3f}" for k, v in r["f1_by_dataset"].items()) + " | "
                     + ", ".join(f"{k} {v}" for k, v in sorted(r["actions"].items())) + " |")
    lines += ["", res.get("notes", ""), ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=SHARED_DATA)
    ap.add_argument("--limit", type=int, default=300, help="evaluated questions timed (seeded sample)")
    ap.add_argument("--calibration-limit", type=int, default=None, help="calibration questions swept (default all)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--notes", type=Path, default=None, help="a Markdown file appended to the report")
    a = ap.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    d = bench_dir(a.data)
    queries = [json.loads(line) for line in (d / "queries.jsonl").read_text("utf-8").splitlines() if line]
    cal = [json.loads(line) for line in (d / "calibration.jsonl").read_text("utf-8").splitlines() if line]
    random.Random(a.seed).shuffle(queries)
    index = Engine.open(d / "index").index
    res: dict[str, Any] = {"command": "python benchmarks/answer_path.py " + " ".join(sys.argv[1:]),
                           "date": time.strftime("%Y-%m-%d")}
    res["calibration"] = sweep(index, cal[: a.calibration_limit], log)
    res["timed"] = timed(index, queries[: a.limit], log)
    res["machine"] = (f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs, load average "
                      f"{os.getloadavg()[0]:.1f} at the end")
    res["notes"] = a.notes.read_text("utf-8") if a.notes else ""
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "answer-path.json").write_text(json.dumps(res, indent=1) + "\n")
    (DOCS / "answer-path.md").write_text(markdown(res))
    print(json.dumps(res["timed"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
