"""Two-part questions on real documentation (issue 37, Deliver 2 and its target: >= 60 % with both parts right).

`benchmarks/docs_qa/two_part.jsonl` holds 24 questions on the MkDocs and Cargo documentation, each asking two
things, with each part's gold answers and file, written before the engine was asked. Every question is asked
twice in the same run over the same index (`Engine.ask`, system `full`, the extractive reader, audit on):
with `decompose.split_parts` on (each part retrieved, read and cited on its own) and off (the question read
whole, as before). A part is right when the answer given for it holds one of its gold forms as whole words
(`doc_answers.contains`); unsplit, both golds must be in the one answer.

    python benchmarks/two_part_answers.py            # indexes from benchmarks/doc_answers.py --build

Writes docs/benchmarks/two-part.json and prints the table of docs/benchmarks/two-part.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

from doc_answers import QA_DIR, contains  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "two-part.json"


def confidence(a: Any) -> float | None:
    """The generator's confidence in an answer of `Engine.ask`."""
    return a.trace.generator.confidence if a.trace.generator else None


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (QA_DIR / "two_part.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def ask_all(index: Path, questions: list[dict[str, Any]], split: bool) -> list[dict[str, Any]]:
    from amsrag.pipeline import Engine

    rows = []
    with Engine.open(index) as engine:
        engine.config.decompose.split_parts = split
        for q in questions:
            t = time.perf_counter()
            r = engine.ask(q["question"])
            ms = (time.perf_counter() - t) * 1000
            golds = [p["answers"] for p in q["parts"]]
            if r.parts:
                given = [{"question": p.query, "answer": p.answer, "abstained": p.abstained,
                          "citations": p.citations, "confidence": confidence(p),
                          "flagged": p.flagged} for p in r.parts]
                right = [len(given) == len(golds) and not given[i]["abstained"] and contains(given[i]["answer"], g)
                         for i, g in enumerate(golds)]
            else:
                given = [{"question": r.query, "answer": r.answer, "abstained": r.abstained, "citations": r.citations,
                          "confidence": confidence(r), "flagged": r.flagged}]
                right = [not r.abstained and contains(r.answer, g) for g in golds]
            rows.append({"id": q["id"], "set": q["set"], "question": q["question"], "split": len(r.parts),
                         "parts": given, "gold": golds, "right": right, "both": all(right), "ms": round(ms, 1)})
            print(f"{q['id']} split={split}: {r.answer!r} right={right}", flush=True)
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {"n": n, "both_right": sum(r["both"] for r in rows), "parts_right": sum(sum(r["right"]) for r in rows),
            "parts": sum(len(r["gold"]) for r in rows), "split": sum(1 for r in rows if r["split"] > 1),
            "both_rate": round(sum(r["both"] for r in rows) / n, 3) if n else None,
            "ms_p50": sorted(r["ms"] for r in rows)[n // 2] if n else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--indexes", type=Path, default=Path("/work/docs_idx"))
    args = ap.parse_args()
    questions = load()
    result: dict[str, Any] = {"command": "python " + " ".join(sys.argv),
                              "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
                              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": {}}
    for split in (False, True):
        rows = []
        for name in dict.fromkeys(q["set"] for q in questions):
            rows += ask_all(args.indexes / name, [q for q in questions if q["set"] == name], split)
        label = "parts" if split else "whole"
        result["runs"][label] = {"rows": rows, "by_set": {s: summarise([r for r in rows if r["set"] == s])
                                                          for s in dict.fromkeys(r["set"] for r in rows)},
                                 "all": summarise(rows)}
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print("| run | set | both parts right | parts right | split | ms p50 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, run in result["runs"].items():
        for s, m in [*run["by_set"].items(), ("all", run["all"])]:
            print(f"| {label} | {s} | {m['both_right']}/{m['n']} | {m['parts_right']}/{m['parts']} | {m['split']} | "
                  f"{m['ms_p50']} |")


if __name__ == "__main__":
    main()
