"""Tuning the multi-hop second hop on questions disjoint from the systems benchmark.

    python benchmarks/second_hop.py        # needs bench-cache/corpus-index (benchmarks/retrieval.py)

HotpotQA and MuSiQue questions 251-400 of each data set's seeded order (benchmarks/pipeline.py
evaluates the first 250), `full` with the second hop on every multi_hop route, over a grid of its
settings; nDCG@5 and all-gold@5 (every gold passage in the top 5).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from amsrag.pipeline import Engine
from amsrag.store import EmbeddedIndex
from common import CACHE, ROOT, load_benchmark, ndcg_at
from pipeline import sample

GRID = {"weight": (0.3, 0.5, 0.7, 1.0), "bridges": (2, 4, 6), "per_bridge": (1, 3, 5)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    _, questions = load_benchmark()
    index = EmbeddedIndex.open(CACHE / "corpus-index")
    by = defaultdict(list)
    for q in sample(questions, 400, index):
        by[q.dataset].append(q)
    qs = [q for ds in ("hotpotqa", "musique") for q in by[ds][250:400]]
    engines: dict[str, Engine] = {}
    off = index.config.model_copy(deep=True)
    off.router.expand_strategies = []
    engines["no second hop"] = Engine(index, config=off)
    for w, b, pb in itertools.product(*GRID.values()):
        cfg = index.config.model_copy(deep=True)
        cfg.router.expand_strategies = ["A", "B", "C"]
        cfg.router.second_hop = cfg.router.second_hop.model_copy(update={"weight": w, "bridges": b, "per_bridge": pb})
        engines[f"weight {w}, bridges {b}, per bridge {pb}"] = Engine(index, config=cfg)
    vectors = index.encoder.encode([q.question for q in qs])
    scores = defaultdict(lambda: defaultdict(list))
    for q, v in zip(qs, vectors, strict=True):
        for name, engine in engines.items():
            r = engine.retrieve(q.question, system="full", query_vector=v)
            ids = [p.id for p in r.passages]
            scores[name]["ndcg@5"].append(ndcg_at(ids, q.gold_passage_ids, 5))
            scores[name]["all_gold@5"].append(float(set(q.gold_passage_ids) <= set(ids[:5])))
            scores[name]["expanded"].append(float(bool(r.trace["second_hop"])))
    table = {n: {m: round(float(np.mean(v)), 4) for m, v in s.items()} for n, s in scores.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "second_hop.json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "questions": len(qs),
                                                          "results": table}, indent=1))
    lines = ["# Second hop: settings on tuning questions", "", "Command: `python benchmarks/second_hop.py`  ",
             f"{len(qs)} HotpotQA/MuSiQue questions (251st-400th of each data set's seeded order, disjoint from "
             "benchmarks/pipeline.py's), system `full`, k = 5, 25,473-passage benchmark corpus.", "",
             "| setting | nDCG@5 | all-gold@5 | share expanded |", "|---|---:|---:|---:|"]
    for n, s in sorted(table.items(), key=lambda kv: -kv[1]["ndcg@5"]):
        lines.append(f"| {n} | {s['ndcg@5']:.3f} | {s['all_gold@5']:.3f} | {s['expanded']:.2f} |")
    (args.out / "second_hop.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
