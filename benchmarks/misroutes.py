"""Confident downward misroutes on real multi-hop questions, and how many the corrective step catches.

    OMP_NUM_THREADS=1 python benchmarks/misroutes.py [--bench DIR ...]

For every multi_hop question of an `amsrag eval` benchmark (default: the committed runs' caches under
bench-cache/eval — the default mix and the 2WikiMultihopQA second corpus; the classifier never trained on
their questions), `full`'s first pass is classified and routed; a *confident downward* misroute is a
multi_hop question routed as one_hop with alpha >= 0.90. Each is then run with the corrective step: it is
*caught* when the step (tri-state assessment or sufficiency check) escalated it to a wider route or flagged
the evidence as insufficient, and *rescued* when that raised its nDCG@5. Writes docs/benchmarks/misroutes.{md,json}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from amsrag.evaluate.builder import Benchmark
from amsrag.pipeline import Engine
from amsrag.store import EmbeddedIndex
from common import ROOT, ndcg_at

CONFIDENT = 0.90
DEFAULT_BENCHES = ("bench-4ef3c89dc44967b2", "bench-038f69a659225d33")


def run(directory: Path) -> dict[str, Any]:
    bench = Benchmark.load(directory)
    multi = [q for q in bench.queries if q.complexity == "multi_hop"]
    out: dict[str, Any] = {"bench": directory.name, "multi_hop": len(multi), "by_dataset": {}, "examples": []}
    totals = {"confident_downward": 0, "caught": 0, "rescued": 0, "cheaper": 0}
    with Engine(EmbeddedIndex.open(directory / "index")) as engine:
        vectors = engine.index.encoder.encode([q.question for q in multi])
        for q, v in zip(multi, vectors, strict=True):
            first = engine.retrieve(q.question, system="full", query_vector=v, corrective=False)
            c = first.trace["complexity"]
            label, alpha = c["route_label"], c["route_alpha"]
            per = out["by_dataset"].setdefault(q.dataset, {"multi_hop": 0, "confident_downward": 0, "caught": 0})
            per["multi_hop"] += 1
            totals["cheaper"] += label != "multi_hop"
            if label == "multi_hop" or alpha < CONFIDENT:
                continue
            totals["confident_downward"] += 1
            per["confident_downward"] += 1
            checked = engine.retrieve(q.question, system="full", query_vector=v, corrective=True)
            corrective = checked.trace.get("corrective") or {}
            caught = bool(checked.trace.get("escalations")) or bool(corrective.get("insufficient_evidence"))
            before = ndcg_at([p.id for p in first.passages], q.gold, 5)
            after = ndcg_at([p.id for p in checked.passages], q.gold, 5)
            totals["caught"] += caught
            per["caught"] += caught
            totals["rescued"] += caught and after > before
            if len(out["examples"]) < 8:
                out["examples"].append({"question": q.question, "dataset": q.dataset, "alpha": round(alpha, 3),
                                        "action": corrective.get("action"), "caught": caught,
                                        "ndcg@5": [round(before, 3), round(after, 3)]})
    out.update(totals)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", type=Path, nargs="*",
                    default=[ROOT / "bench-cache" / "eval" / b for b in DEFAULT_BENCHES])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    results = [run(d) for d in args.bench if (d / "index").is_dir()]
    (args.out / "misroutes.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    lines = ["# Confident downward misroutes and the corrective step", "",
             "Command: `OMP_NUM_THREADS=1 python benchmarks/misroutes.py` (the benchmarks of the committed `amsrag "
             "eval` runs: docs/benchmarks/eval and docs/benchmarks/eval-2wiki; build them first with those runs' "
             "commands). A multi_hop question is a *confident downward* misroute when `full` routes it as one_hop "
             "with alpha ≥ 0.90; *caught*: the corrective step escalated it or flagged insufficient evidence; "
             "*rescued*: caught and nDCG@5 rose.", "",
             "| benchmark | data set | multi_hop | routed cheaper | confident downward | caught | rescued |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        share = r["confident_downward"] / max(r["multi_hop"], 1)
        caught = r["caught"] / max(r["confident_downward"], 1)
        lines.append(f"| {r['bench']} | all | {r['multi_hop']} | {r['cheaper']} | {r['confident_downward']} "
                     f"({share:.1%}) | {r['caught']} ({caught:.0%}) | {r['rescued']} |")
        for d, m in sorted(r["by_dataset"].items()):
            lines.append(f"| | {d} | {m['multi_hop']} | | {m['confident_downward']} | {m['caught']} | |")
    lines += ["", "Examples:", ""]
    lines += [f"- {e['question']!r} ({e['dataset']}, alpha {e['alpha']}): {e['action']}, caught {e['caught']}, "
              f"nDCG@5 {e['ndcg@5'][0]} → {e['ndcg@5'][1]}" for r in results for e in r["examples"]]
    (args.out / "misroutes.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
