"""The learned fuser's cost: features + LightGBM scoring of 60 candidates, against the CA-RRF fusion it reorders.

    OMP_NUM_THREADS=1 python benchmarks/learned_fusion.py [--limit 300]   # the eval benchmark's index

On the evaluation benchmark's index (`amsrag eval` builds it) and a seeded sample of its eval questions:
per question the three retrievers run once (depth 100, the widest route), the second hop expands the
CA-RRF fusion for multi-hop questions, then, timed one query at a time, interleaved:
- `ca-rrf`: CA-RRF of the three lists;
- `rerank`: the learned fuser over CA-RRF's top 60 (features — stored vectors, BM25 of every candidate,
  entities — and the model), without the traced explanation;
- `explain`: the SHAP contributions of the top passage, which `amsrag retrieve --json` adds.
Target (issue 16): rerank <= 2 ms p50 for 60 candidates. Results: docs/benchmarks/learned-fusion.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.fuse import CARRF
from amsrag.fuse.features import HOP_LIST, QueryInputs
from amsrag.fuse.learned import LearnedFuser, LearnedRanker
from amsrag.pipeline import Engine
from amsrag.pipeline.multihop import expand
from amsrag.pipeline.signals import IndexSignals
from amsrag.retrievers import retriever_for
from amsrag.types import Hit
from common import ROOT, SHARED_DATA

DOCS = ROOT / "docs" / "benchmarks"


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.median(a)), 3), "p95_ms": round(float(np.percentile(a, 95)), 3),
            "mean_ms": round(float(a.mean()), 3)}


def card_section(card: dict[str, Any]) -> list[str]:
    """The shipped model's card: its data, and base vs learned order on its validation questions."""
    data, val = card["data"], card["metrics"]["validation"]
    lines = ["## The shipped model (`src/amsrag/data/fusion/fusion.json`)", "",
             f"Trained by `{card['rebuild']}` on {data['questions']} questions {data['by_dataset']} of "
             f"`../shared/data`, none of them {data['excluded'].replace('every', 'an')}; "
             f"{data['train_questions']} for training and {data['valid_questions']} held out, from real passes over "
             f"the {data['corpus_passages']}-passage evaluation corpus, one group per retriever subset a route can "
             "activate (and the second hop where the question is routed as multi_hop). Features by gain: "
             + ", ".join(f"{k} {v:.2f}" for k, v in list(card["feature_importance_gain"].items())[:6]) + ".", "",
             "Held-out questions: nDCG@5 and all-gold@5 of the base fusion (CA-RRF, second hop) and of the model's "
             "order of the same candidates.", "",
             "| retrievers (/hop: with the second hop) | groups | base nDCG@5 | learned nDCG@5 | base all-gold@5 | "
             "learned all-gold@5 |", "|---|---:|---:|---:|---:|---:|"]
    for kind, m in val.items():
        lines.append(f"| {kind} | {m['groups']} | {m['base_ndcg@5']} | {m['learned_ndcg@5']} | "
                     f"{m['base_all_gold@5']} | {m['learned_all_gold@5']} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=SHARED_DATA)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--out", type=Path, default=DOCS)
    a = ap.parse_args()
    from amsrag.evaluate.builder import BenchmarkSpec, load_or_build

    _, directory = load_or_build(BenchmarkSpec(data_dir=a.data))
    queries = [json.loads(line) for line in (directory / "queries.jsonl").read_text("utf-8").splitlines()]
    queries = sorted(random.Random(13).sample(queries, min(a.limit, len(queries))), key=lambda q: q["id"])
    ranker = LearnedRanker.load()
    times: dict[str, list[float]] = {"ca-rrf": [], "rerank": [], "explain": []}
    candidates: list[int] = []
    with Engine.open(str(directory / "index")) as engine:
        signals = IndexSignals(engine.index)
        engine.retrieve("warm up question about a film director", system="learned")
        for q in queries:
            vector = engine.index.encoder.encode_query(q["question"])
            cx = engine.complexity_of(q["question"], vector, generator_knows=False)
            label, alpha = cx.routed
            lists: dict[str, list[Hit]] = {r: retriever_for(engine.index, r).search(q["question"], 100, vector)
                                           for r in ("bm25", "dense", "graph")}
            t = time.perf_counter()
            base = CARRF(label, alpha, engine.config.fusion).fuse(lists)
            times["ca-rrf"].append((time.perf_counter() - t) * 1000)
            given: dict[str, list[Hit]] = dict(lists)
            if label == "multi_hop":
                hop = expand(engine.index, q["question"], base, engine.config.router.second_hop, 100)
                base, given[HOP_LIST] = hop.fused, hop.hits
            context = QueryInputs(q["question"], vector, float(cx.probs.get("multi_hop", 0.0)),
                                   float(cx.probs.get("zero_hop", 0.0)), float(alpha))
            t = time.perf_counter()
            fused = LearnedFuser(ranker, base, context, signals).fuse(given)
            times["rerank"].append((time.perf_counter() - t) * 1000)
            candidates.append(int(fused.params["candidates"]))
            t = time.perf_counter()
            LearnedFuser(ranker, base, context, signals, explain=1).fuse(given)
            times["explain"].append((time.perf_counter() - t) * 1000 - times["rerank"][-1])
    res: dict[str, Any] = {
        "command": f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python benchmarks/learned_fusion.py "
                   f"--limit {a.limit}",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared)", "queries": len(queries),
        "candidates_mean": round(float(np.mean(candidates)), 1), "trees": ranker.booster.num_trees(),
        **{name: percentiles(ms) for name, ms in times.items()},
    }
    res["target_met"] = res["rerank"]["p50_ms"] <= 2.0
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "learned-fusion.json").write_text(json.dumps(res, indent=2) + "\n")
    lines = [
        "# Learned fuser: cost per query", "", f"Command: `{res['command']}`  ", f"Machine: {res['machine']}; "
        f"{res['queries']} eval questions of the benchmark, one at a time; {res['candidates_mean']} candidates "
        f"per query on average (CA-RRF's top 60, with the second hop's for multi-hop questions); "
        f"{res['trees']} trees.", "",
        "| stage | p50 ms | p95 ms | mean ms |", "|---|---:|---:|---:|",
        *(f"| {name} | {res[name]['p50_ms']} | {res[name]['p95_ms']} | {res[name]['mean_ms']} |"
          for name in times),
        "", f"Target: the reranker adds <= 2 ms p50 for 60 candidates: {'met' if res['target_met'] else 'missed'}. "
        "`explain` (SHAP contributions of the top passage, in `amsrag retrieve --json` only) is extra.",
        "", *card_section(ranker.card), "",
        "The systems it makes (`full`, `learned`, `fixed-learned`) against CA-RRF with fitted priors, the expert "
        "weights, A0 and the single retrievers, on the eval benchmark and on two data sets it never saw: "
        "[eval/README.md](eval/README.md).",
    ]
    (a.out / "learned-fusion.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
