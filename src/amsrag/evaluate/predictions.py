"""Every question's prediction beside the report (`predictions.jsonl`), and answers per plan type."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.evaluate.runner import RunResult

PREDICTIONS_FILE = "predictions.jsonl"


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


def write_predictions(result: RunResult, path: Path) -> int:
    """One JSON line per (question, system) that was answered: the question, gold answers and passages, the
    prediction, EM/F1, abstention, the answer it would have given had it not abstained (`candidate`) and the
    generator's confidence in it, citations, the plan and the chain. Returns the lines written."""
    lines = 0
    with path.open("w", encoding="utf-8") as f:
        for name, sys_result in result.systems.items():
            for i, q in enumerate(result.queries):
                if i >= len(sys_result.details) or sys_result.details[i] is None:
                    continue
                d = sys_result.details[i] or {}
                row = {"id": q.id, "dataset": q.dataset, "complexity": q.complexity, "question": q.question,
                       "answers": q.answers, "gold_passages": q.gold, "system": name,
                       "prediction": sys_result.answers[i], "abstained": bool(sys_result.abstained[i] == 1.0),
                       "candidate": d.get("candidate", ""), "confidence": _num(d.get("confidence")),
                       "em": _num(sys_result.values["em"][i]), "f1": _num(sys_result.values["f1"][i]),
                       "citations": d.get("citations", []), "plan": d.get("plan", ""), "chain": d.get("chain")}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                lines += 1
    return lines


def by_plan(result: RunResult) -> dict[str, dict[str, dict[str, Any]]]:
    """Per system and plan type: n, EM, F1, abstention, how often the chain's answer stood, and its EM/F1
    where it did."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, sys_result in result.systems.items():
        groups: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(sys_result.details):
            if d is not None and d.get("plan"):
                groups[d["plan"]].append(i)
        if not groups:
            continue
        table: dict[str, dict[str, Any]] = {}
        for plan, idx in sorted(groups.items()):
            em = sys_result.values["em"][idx]
            f1 = sys_result.values["f1"][idx]
            abst = sys_result.abstained[idx]
            used = [i for i in idx if ((sys_result.details[i] or {}).get("chain") or {}).get("used")]
            answered = [i for i, a in zip(idx, abst, strict=False) if a == 0.0]
            table[plan] = {"n": len(idx), "em": round(float(np.nanmean(em)), 4), "f1": round(float(np.nanmean(f1)), 4),
                           "abstain_rate": round(float(np.nanmean(abst)), 4),
                           "precision_answered": round(float(np.nanmean(sys_result.values["f1"][answered])), 4)
                           if answered else None,
                           "chain_used": len(used),
                           "chain_em": round(float(np.nanmean(sys_result.values["em"][used])), 4) if used else None}
        out[name] = table
    return out


def plan_markdown(table: dict[str, dict[str, dict[str, Any]]]) -> str:
    if not table:
        return ""
    lines = ["## Answers per plan type (the decomposer's plan of each question)", "",
             "| system | plan | n | EM | F1 | abstained | F1 of answered | chain's answer stood | its EM |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, plans in table.items():
        for plan, m in plans.items():
            prec = "-" if m["precision_answered"] is None else f"{m['precision_answered']:.3f}"
            cem = "-" if m["chain_em"] is None else f"{m['chain_em']:.3f}"
            lines.append(f"| {name} | {plan} | {m['n']} | {m['em']:.3f} | {m['f1']:.3f} | {m['abstain_rate']:.3f} | "
                         f"{prec} | {m['chain_used']} | {cem} |")
    lines += ["", f"Every question's prediction, plan, chain and citations: `{PREDICTIONS_FILE}` beside this report."]
    return "\n".join(lines)
