"""Answers of `full` (chains on) against `full-plain` (the plain reader alone) from one `amsrag eval` run's
`predictions.jsonl`: by data set, by the source's question type (HotpotQA bridge/comparison, 2Wiki
comparison/bridge_comparison/compositional/inference, MuSiQue hops), multi-hop abstention and precision, and a
paired bootstrap of the F1 difference per data set (the same questions, the same run).

    python benchmarks/compose_answers.py --report DIR --out DIR/summary.json
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

from amsrag.ingest.datasets import default_data_dir

TYPE_FILES = {  # file -> (id field, type field)
    "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl": ("id", "type"),
    "hotpotqa/rpt_hotpot_distractor_validation_train.jsonl": ("id", "type"),
    "hotpotqa/migres_hotpot_200.jsonl": ("_id", "type"),
    "hotpotqa/hipporag_hotpotqa_train_100.json": ("_id", "type"),
    "2wikimultihopqa/migres_2wiki_train_500_decomp.json": ("_id", "type"),
}
MULTI = ("hotpotqa", "musique", "2wikimultihopqa")
COMPARISON_TYPES = ("comparison", "bridge_comparison")


def source_types(data: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for rel, (id_key, type_key) in TYPE_FILES.items():
        path = data / rel
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        rows = json.loads(text) if path.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x.strip()]
        for r in rows:
            if r.get(id_key) and r.get(type_key):
                out[str(r[id_key])] = str(r[type_key])
    return out


def qtype(row: dict, types: dict[str, str]) -> str:
    if row["dataset"] == "musique":
        return row["id"].split("__")[0] if "__" in row["id"] else "musique"
    return types.get(row["id"], "unknown")


def mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def summary(rows: list[dict]) -> dict:
    answered = [r for r in rows if not r["abstained"]]
    return {"n": len(rows), "em": mean([r["em"] for r in rows]), "f1": mean([r["f1"] for r in rows]),
            "abstain_rate": mean([float(r["abstained"]) for r in rows]),
            "precision_answered": mean([float(r["f1"] >= 0.5) for r in answered]),
            "chain_used": sum(bool((r.get("chain") or {}).get("used")) for r in rows)}


def paired(a: list[float], b: list[float], seed: int = 13, b_iter: int = 1000) -> dict:
    rng = random.Random(seed)
    n = len(a)
    diffs = []
    for _ in range(b_iter):
        idx = [rng.randrange(n) for _ in range(n)]
        diffs.append(sum(b[i] - a[i] for i in idx) / n)
    diffs.sort()
    d = sum(y - x for x, y in zip(a, b, strict=True)) / n
    p = 2 * min(sum(x <= 0 for x in diffs), sum(x >= 0 for x in diffs)) / b_iter
    return {"diff": round(d, 4), "ci95": [round(diffs[int(0.025 * b_iter)], 4), round(diffs[int(0.975 * b_iter)], 4)],
            "p": round(min(1.0, p), 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", type=Path, required=True, help="an `amsrag eval` output folder")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--base", default="full-plain")
    ap.add_argument("--system", default="full")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    types = source_types(args.data or default_data_dir())
    by_system: dict[str, dict[str, dict]] = defaultdict(dict)
    for line in (args.report / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        r["qtype"] = qtype(r, types)
        by_system[r["system"]][r["id"]] = r
    out: dict = {"report": str(args.report), "systems": {}}
    for name in (args.base, args.system):
        rows = list(by_system[name].values())
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            groups[r["dataset"]].append(r)
            groups[f"{r['dataset']}:{r['qtype']}"].append(r)
            if r["dataset"] in MULTI:
                groups["multi_hop"].append(r)
            if r["qtype"] in COMPARISON_TYPES:
                groups["comparison_types"].append(r)
        out["systems"][name] = {"all": summary(rows), **{g: summary(v) for g, v in sorted(groups.items())}}
    ids = sorted(set(by_system[args.base]) & set(by_system[args.system]))
    tests = {}
    for ds in [*sorted({by_system[args.base][i]["dataset"] for i in ids}), "all"]:
        sel = [i for i in ids if ds == "all" or by_system[args.base][i]["dataset"] == ds]
        tests[ds] = paired([by_system[args.base][i]["f1"] for i in sel], [by_system[args.system][i]["f1"] for i in sel])
    out["paired_f1"] = tests
    chains = [r["chain"] for r in by_system[args.system].values() if r.get("chain") and r["chain"].get("steps")]
    two_hop = sorted(c["ms"] for c in chains if c["plan"]["kind"] == "bridge" and len(c["steps"]) == 2)
    out["chains"] = {"ran": len(chains), "used": sum(bool(c.get("used")) for c in chains),
                     "failed": sum(c.get("failed_step") is not None for c in chains),
                     "retriever_calls_per_chain": mean([float(c["retriever_calls"]) for c in chains]),
                     "two_hop_bridges": len(two_hop),
                     "two_hop_ms_p50": round(two_hop[len(two_hop) // 2], 1) if two_hop else None}
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
