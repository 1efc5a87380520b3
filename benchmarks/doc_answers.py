"""Answers on real documentation (issue 37): the factual questions of benchmarks/docs_qa over their doc sets.

    python benchmarks/doc_answers.py --label baseline [--build] [--sets mkdocs,cargo]

For each documentation set (benchmarks/docs_qa/README.md says how to fetch it) an index is built once
(`--build`, or when missing) with the default configuration, and every question goes through `Engine.ask`
(system `full`, the extractive span reader, the citation audit on). Per question it records the answer, its
quote, confidence, abstention, the audit flag, and whether the gold file is among the top 5 passages.

An answer is judged by
- `exact`: the answer equals a gold form (SQuAD normalisation, or lower case with quotes / backticks
  stripped, which keeps `--frozen` and regular expressions intact);
- `contains`: a gold form occurs in the answer as whole words (same light normalisation);
- `judged`: benchmarks/docs_qa/judged.csv (id, answer, verdict, note) where a person read the answer; for an
  answer not in that file, `contains`.
An abstention is wrong. The audit flag is scored as a detector of wrong answers among the non-abstained
ones: precision = wrong among flagged, recall = flagged among wrong.

Results go to docs/benchmarks/doc-answers.json (one entry per `--label`, replaced when run again) and the
table in docs/benchmarks/doc-answers.md is printed from it (`--report`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from amsrag.generate.metrics import normalize_answer
from common import ROOT

QA_DIR = ROOT / "benchmarks" / "docs_qa"
DOCS = ROOT / "docs" / "benchmarks"
RESULTS = DOCS / "doc-answers.json"
SETS = {"mkdocs": "mkdocs/docs", "cargo": "cargo/doc/book/src", "poetry": "poetry/docs"}


def light(s: str) -> str:
    """Lower case, quotes and backticks stripped, white space collapsed: option names and regexes survive."""
    s = re.sub(r"[`\"“”‘’]", "", s.lower())
    s = re.sub(r"(^|\s)'|'($|\s)", r"\1\2", s)
    return " ".join(s.split()).strip(" .,;:")


def exact(answer: str, golds: list[str]) -> bool:
    a, na = light(answer), normalize_answer(answer)
    return any(a == light(g) or (na and na == normalize_answer(g)) for g in golds)


def contains(answer: str, golds: list[str]) -> bool:
    a = light(answer)
    return any(re.search(rf"(?<![\w-]){re.escape(light(g))}(?![\w-])", a) is not None for g in golds if light(g))


def load_questions(name: str) -> list[dict[str, Any]]:
    path = QA_DIR / f"{name}.jsonl"
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            for key in ("id", "question", "answers", "file"):
                if key not in row:
                    raise SystemExit(f"{path}:{n}: no `{key}`")
            rows.append(row)
    return rows


def load_judgements() -> dict[tuple[str, str], bool]:
    path = QA_DIR / "judged.csv"
    if not path.exists():
        return {}
    out = {}
    with path.open(newline="") as f:
        for n, row in enumerate(csv.DictReader(f), 2):
            verdict = row.get("verdict", "").strip()
            if verdict not in ("right", "wrong"):
                raise SystemExit(f"{path}:{n}: verdict must be right or wrong, got {verdict!r}")
            out[(row["id"], light(row["answer"]))] = verdict == "right"
    return out


def build_index(corpus: Path, index: Path, name: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    subprocess.run([sys.executable, "-m", "amsrag.cli", "index", "build", f"{name}={corpus}", "--index", str(index),
                    "-q"], check=True, env=env)


def open_engine(index: Path, audit_artifact: Path | None) -> Any:
    """The engine over `index` with its own configuration; `audit_artifact`: audit with that artifact instead."""
    from amsrag.pipeline import Engine
    from amsrag.store.open import open_index

    if audit_artifact is None:
        return Engine.open(index)
    opened = open_index(index)
    audit = opened.config.audit.model_copy(update={"artifact": str(audit_artifact)})
    return Engine(opened, config=opened.config.model_copy(update={"audit": audit}))


def run_set(name: str, index: Path, questions: list[dict[str, Any]],
            audit_artifact: Path | None = None) -> list[dict[str, Any]]:
    rows = []
    with open_engine(index, audit_artifact) as engine:
        for q in questions:
            t = time.perf_counter()
            r = engine.ask(q["question"])
            ms = (time.perf_counter() - t) * 1000
            trace = r.trace.to_dict()
            evidence = trace.get("evidence") or []
            files = [pid.split("#", 1)[0].split("/", 1)[-1] for pid in evidence]
            audit = trace.get("audit") or {}
            gen = trace.get("generator") or {}
            quote = getattr(r, "quote", None)
            rows.append({"set": name, "id": q["id"], "kind": q.get("kind", ""), "question": q["question"],
                         "gold": q["answers"], "file": q["file"], "answer": r.answer, "abstained": r.abstained,
                         "candidate": gen.get("candidate", ""), "confidence": gen.get("confidence"),
                         "answer_type": gen.get("answer_type"), "flagged": bool(audit.get("flagged")),
                         "support": audit.get("support"), "citations": r.citations,
                         "gold_in_top5": q["file"] in files[:5], "gold_rank": files.index(q["file"]) + 1
                         if q["file"] in files else None, "quote": quote.to_dict() if quote is not None else None,
                         "ms": round(ms, 1)})
            print(f"{q['id']}: {r.answer!r} ({'abstained, ' if r.abstained else ''}gold {q['answers'][0]!r})",
                  flush=True)
    return rows


def score(rows: list[dict[str, Any]], judgements: dict[tuple[str, str], bool]) -> list[dict[str, Any]]:
    for r in rows:
        r["exact"] = not r["abstained"] and exact(r["answer"], r["gold"])
        r["contains"] = not r["abstained"] and contains(r["answer"], r["gold"])
        manual = judgements.get((r["id"], light(r["answer"])))
        r["judged"] = not r["abstained"] and (manual if manual is not None else r["contains"])
        r["manual"] = manual is not None
    return rows


def fit_defaults(name: str, index: Path, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """P(right) of the default statement `default_answers` picks from the passages the engine retrieves, per
    match level, over the questions of `name` that ask for a default: (right + 1) / (n + 2)."""
    from amsrag.generate.doc_cues import DEFAULT_QUESTION, default_answers
    from amsrag.pipeline import Engine

    counts: dict[str, list[int]] = {}
    rows = []
    with Engine.open(index) as engine:
        for q in questions:
            if not DEFAULT_QUESTION.search(q["question"]):
                continue
            found = default_answers(q["question"], engine.retrieve(q["question"]).passages)
            if not found or not found[0].level:
                rows.append({"id": q["id"], "level": "", "value": None})
                continue
            right = exact(found[0].value, q["answers"])
            c = counts.setdefault(found[0].level, [0, 0])
            c[0] += int(right)
            c[1] += 1
            rows.append({"id": q["id"], "level": found[0].level, "value": found[0].value, "right": right})
    return {"default_confidence": {k: round((r + 1) / (n + 2), 4) for k, (r, n) in counts.items()},
            "counts": {k: {"right": r, "read": n} for k, (r, n) in counts.items()}, "rows": rows}


def confidence_quality(answered: list[dict[str, Any]]) -> dict[str, Any]:
    """ROC-AUC of the answer confidence and of the audit's support for right answers, and the confidence's ECE
    (10 equal-width bins), over the answers given."""
    from sklearn.metrics import roc_auc_score

    y = [int(r["judged"]) for r in answered]
    out: dict[str, Any] = {"confidence_auc": None, "support_auc": None, "confidence_ece": None}
    conf = [float(r["confidence"] or 0.0) for r in answered]
    if len(set(y)) == 2:
        out["confidence_auc"] = round(float(roc_auc_score(y, conf)), 3)
        sup = [(float(r["support"]), yi) for r, yi in zip(answered, y, strict=True) if r["support"] is not None]
        if len({yi for _, yi in sup}) == 2:
            out["support_auc"] = round(float(roc_auc_score([yi for _, yi in sup], [v for v, _ in sup])), 3)
    if answered:
        bins: dict[int, list[tuple[float, int]]] = {}
        for c, yi in zip(conf, y, strict=True):
            bins.setdefault(min(int(c * 10), 9), []).append((c, yi))
        out["confidence_ece"] = round(sum(len(b) / len(conf) * abs(sum(c for c, _ in b) / len(b) -
                                                                   sum(yi for _, yi in b) / len(b))
                                          for b in bins.values()), 3)
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    answered = [r for r in rows if not r["abstained"]]
    wrong = [r for r in answered if not r["judged"]]
    flagged = [r for r in answered if r["flagged"]]
    flagged_wrong = [r for r in flagged if not r["judged"]]
    unflagged = [r for r in answered if not r["flagged"]]
    return {"questions": n, "exact": sum(r["exact"] for r in rows), "contains": sum(r["contains"] for r in rows),
            "judged": sum(r["judged"] for r in rows), "gold_in_top5": sum(r["gold_in_top5"] for r in rows),
            "abstained": n - len(answered), "flagged": len(flagged),
            "flag_precision": round(len(flagged_wrong) / len(flagged), 3) if flagged else None,
            "flag_recall": round(len(flagged_wrong) / len(wrong), 3) if wrong else None,
            "wrong_rate_unflagged": round(sum(not r["judged"] for r in unflagged) / len(unflagged), 3)
            if unflagged else None,
            "with_quote": sum(r["quote"] is not None for r in rows),
            "sentence_answers": sum(r.get("answer_type") == "sentence" for r in rows),
            "default_answers": sum(r.get("answer_type") == "default" for r in rows),
            **confidence_quality(answered),
            "ms_p50": sorted(r["ms"] for r in rows)[n // 2] if n else None}


def report(results: dict[str, Any]) -> str:
    lines = ["| run | set | right (judged) | exact | contains | gold file in top 5 | abstained | flagged | "
             "flag precision | flag recall | wrong when unflagged | confidence AUC / ECE | audit support AUC | "
             "with quote | default / sentence answers | ms p50 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, run in results.items():
        for name, s in run["sets"].items():
            lines.append(f"| {label} | {name} | {s['judged']}/{s['questions']} | {s['exact']} | {s['contains']} | "
                         f"{s['gold_in_top5']} | {s['abstained']} | {s['flagged']} | {s['flag_precision']} | "
                         f"{s['flag_recall']} | {s['wrong_rate_unflagged']} | {s['confidence_auc']} / "
                         f"{s['confidence_ece']} | {s['support_auc']} | {s['with_quote']} | "
                         f"{s['default_answers']} / {s['sentence_answers']} | {s['ms_p50']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="run", help="the name this run is stored under")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--corpora", type=Path, default=Path("/work/docs_corpora"))
    ap.add_argument("--indexes", type=Path, default=Path("/work/docs_idx"))
    ap.add_argument("--build", action="store_true", help="rebuild the indexes")
    ap.add_argument("--audit-artifact", type=Path, help="audit with this artifact instead of the shipped one")
    ap.add_argument("--fit-defaults", metavar="SET", help="calibrate the reader's default statements on SET's "
                    "questions and write the confidence into the card of the reader in src/ (doc_cues)")
    ap.add_argument("--report", action="store_true", help="rescore the stored runs (judged.csv) and print the table")
    args = ap.parse_args()
    if args.fit_defaults:
        from amsrag.generate.span_reader import CARD_FILE, default_directory

        fit = fit_defaults(args.fit_defaults, args.indexes / args.fit_defaults, load_questions(args.fit_defaults))
        print(json.dumps(fit, indent=1))
        card_file = default_directory() / CARD_FILE
        card = json.loads(card_file.read_text(encoding="utf-8"))
        card["doc_cues"] = {"default_confidence": fit["default_confidence"], "counts": fit["counts"],
                            "fitted_on": f"the questions asking for a default in benchmarks/docs_qa/"
                                         f"{args.fit_defaults}.jsonl (hand-written; the other set checks)",
                            "command": f"python benchmarks/doc_answers.py --fit-defaults {args.fit_defaults}"}
        card_file.write_text(json.dumps(card, indent=1), encoding="utf-8")
        return
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    judgements = load_judgements()
    if not args.report:
        run: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "machine": f"{platform.machine()}, "
                               f"{os.cpu_count()} cores (shared)", "when": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                        time.gmtime()),
                               "rows": [], "sets": {}}
        names = args.sets.split(",")
        earlier = results.get(args.label, {}).get("rows", [])
        run["rows"] = [r for r in earlier if r["set"] not in names]  # a run of some sets keeps the others'
        for name in names:
            index = args.indexes / name
            if args.build or not (index / "manifest.json").exists():
                build_index(args.corpora / SETS[name], index, name)
            run["rows"] += run_set(name, index, load_questions(name), args.audit_artifact)
        if earlier:
            run["command"] = results[args.label]["command"] + "; " + run["command"]
        results[args.label] = run
    for run in results.values():
        score(run["rows"], judgements)
        names = dict.fromkeys(r["set"] for r in run["rows"])
        run["sets"] = {name: summary([r for r in run["rows"] if r["set"] == name]) for name in names}
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(report(results))


if __name__ == "__main__":
    main()
