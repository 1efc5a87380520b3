"""Span reader benchmark → docs/benchmarks/reader.{json,md}.

Held-out test split of the reader's training data (never trained on; SQuAD by article/paragraph):
EM/F1 given the gold passage(s), gold + 3 distractors read jointly, 4 distractors only (abstention),
precision of answered questions at the card's threshold, int8 vs fp32, latency for 5 passages (~600 words)
on 1 thread, load time; the heuristic reader on the same items and passages.

    PYTHONPATH=src OMP_WAIT_POLICY=PASSIVE nice -n 19 /work/venv/bin/python benchmarks/reader.py \
        --model src/amsrag/data/reader --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
TARGETS = {"gold": {"nq": 0.55, "hotpotqa": 0.45, "squad": 0.72}, "mixed": {"hotpotqa": 0.38}}


def baseline(records: list[dict[str, Any]], per_dataset: int) -> dict[str, Any]:
    """The heuristic reader (amsrag.generate.heuristic) on the first items of each dataset."""
    from amsrag.config import GeneratorConfig
    from amsrag.embed.encoder import MiniLMEncoder
    from amsrag.generate.heuristic import HeuristicGenerator
    from amsrag.generate.metrics import exact_match, token_f1
    from amsrag.types import Passage

    enc = MiniLMEncoder()
    gen = HeuristicGenerator(enc, GeneratorConfig(abstain_threshold=0.0))
    answers = _answers(records)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    out: dict[tuple[str, str], list[tuple[float, float, float, float, float]]] = defaultdict(list)
    for r in records:
        key = (r["setting"], r["dataset"])
        if r["setting"] == "none" or counts[key] >= per_dataset or not r.get("passages"):
            continue
        counts[key] += 1
        ps = [Passage(id=i, title=t, text=x) for i, t, x in r["passages"]]
        g = gen.generate(r["question"], ps, query_vector=enc.encode_query(r["question"]))
        a = g.answer if not g.abstained else (g.details.get("candidate") or "")
        gold = answers[r["id"]]
        out[key].append((exact_match(a, gold), token_f1(a, gold), g.ms,
                         r["em"], r["f1"]))
    res: dict[str, Any] = {}
    for (s, ds), rows in sorted(out.items()):
        arr = np.array(rows)
        res.setdefault(s, {})[ds] = {"n": len(rows), "extractive_em": round(float(arr[:, 0].mean()), 4),
                                     "extractive_f1": round(float(arr[:, 1].mean()), 4),
                                     "extractive_p50_ms": round(float(np.median(arr[:, 2])), 1),
                                     "span_em": round(float(arr[:, 3].mean()), 4),
                                     "span_f1": round(float(arr[:, 4].mean()), 4)}
    return res


_ITEMS: dict[str, Any] = {}


def _answers(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {it.id: it.answers for it in _ITEMS.values()}


def fmt(x: Any) -> str:
    return "–" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def markdown(res: dict[str, Any], card: dict[str, Any], command: str) -> str:
    g, m, n = res["int8"]["gold"], res["int8"]["mixed"], res["int8"]["none"]
    lines = ["# Span reader (trained MiniLM span/yes-no reader, int8 ONNX)", "",
             f"Command: `{command}` ({res['date']}). Machine: {res['machine']}.", "",
             "Held-out test split of the reader's own training data (never trained on: SQuAD by article or "
             "paragraph, NQ and HotpotQA by question; every question of the default `amsrag eval` benchmark and "
             "the demo was excluded from all splits). Right = token F1 ≥ 0.5. Up to "
             f"{res['n_per_dataset']} questions per dataset. Artifact: `src/amsrag/data/reader/reader.onnx` "
             f"({res['artifact_bytes'] / 2**20:.1f} MiB, sha256 `{res['artifact_sha256'][:16]}…`).", "",
             "## Given the gold passage(s)", "",
             "| dataset | n | EM | F1 | target F1 | yes/no EM (n) | int8 − fp32 F1 |",
             "|---|---:|---:|---:|---:|---|---:|"]
    fp = res.get("fp32_gold", {})
    for ds in ("squad", "nq", "hotpotqa", "all"):
        if ds not in g:
            continue
        r = g[ds]
        t = TARGETS["gold"].get(ds)
        yn = f"{fmt(r.get('yesno_em'))} ({r.get('yesno_n', 0)})" if r.get("yesno_n") else "–"
        d = r["f1"] - fp[ds]["f1"] if ds in fp else None
        mark = "" if t is None else (" ✓" if r["f1"] >= t else f" ✗ ({r['f1'] - t:+.3f})")
        lines.append(f"| {ds} | {r['n']} | {fmt(r['em'])} | {fmt(r['f1'])} | {fmt(t)}{mark} | {yn} | {fmt(d)} |")
    lines += ["", "## Gold + 3 distractors, read jointly (every window of every passage; one joint context "
              "when they fit in 384 tokens)", "",
              "| dataset | n | EM | F1 | target F1 | cited a gold passage |", "|---|---:|---:|---:|---:|---:|"]
    for ds in ("squad", "nq", "hotpotqa", "all"):
        if ds in m:
            r = m[ds]
            t = TARGETS["mixed"].get(ds)
            mark = "" if t is None else (" ✓" if r["f1"] >= t else f" ✗ ({r['f1'] - t:+.3f})")
            lines.append(f"| {ds} | {r['n']} | {fmt(r['em'])} | {fmt(r['f1'])} | {fmt(t)}{mark} "
                         f"| {fmt(r['cited_gold'])} |")
    cal = card.get("calibration", {})
    lines += ["", f"## Abstention at the card's threshold ({fmt(res['threshold'])})", "",
              f"Confidence = logistic regression on the reader's features ({', '.join(cal.get('features', []))}), "
              f"fitted on the calibration split; threshold maximises {cal.get('objective', '?')}. On the calibration "
              f"reads: answered {fmt(cal.get('coverage_answerable'))} of the answerable, abstained on "
              f"{fmt(cal.get('abstain_rate_unanswerable'))} of the unanswerable.", "",
              "| dataset | gold: answered | gold: precision of answered | mixed: answered | mixed: precision "
              "| no answer in passages: abstained |", "|---|---:|---:|---:|---:|---:|"]
    for ds in ("squad", "nq", "hotpotqa", "all"):
        if ds in g:
            lines.append(f"| {ds} | {fmt(g[ds]['answered'])} | {fmt(g[ds]['precision_answered'])} "
                         f"| {fmt(m.get(ds, {}).get('answered'))} | {fmt(m.get(ds, {}).get('precision_answered'))} "
                         f"| {fmt(n.get(ds, {}).get('abstained'))} |")
    lat = res["latency_5_passages"]
    lines += ["", "## Cost", "",
              f"- 5 passages (mean {lat['mean_words']} words), 1 onnxruntime thread, {lat['n']} questions: "
              f"p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms (targets 150 / 300 ms).",
              f"- Load (`SpanReader.load`, best of 3): {res['load_seconds']} s (target ≤ 1 s).", ""]
    if res.get("baseline"):
        lines += ["## Against the heuristic reader (same items, same passages)", "",
                  "| setting | dataset | n | heuristic EM / F1 | span reader EM / F1 | heuristic p50 ms |",
                  "|---|---|---:|---|---|---:|"]
        for s, per in res["baseline"].items():
            for ds, r in per.items():
                lines.append(f"| {s} | {ds} | {r['n']} | {fmt(r['extractive_em'])} / {fmt(r['extractive_f1'])} "
                             f"| {fmt(r['span_em'])} / {fmt(r['span_f1'])} | {r['extractive_p50_ms']} |")
        lines.append("")
    tr = card.get("training", {})
    lines += ["## Training", "",
              f"`amsrag train reader train --data ../shared/data --out DIR --minutes "
              f"{tr.get('train_minutes')}` (seed {tr.get('seed')}): {tr.get('steps')} steps of batch "
              f"{tr.get('batch_size')}, {tr.get('windows_seen')} windows seen = {tr.get('epochs')} epochs, lr "
              f"{tr.get('lr')} ({tr.get('schedule')}), bf16 autocast {tr.get('bf16_autocast')}, "
              f"{tr.get('threads')} threads at nice 19; {tr.get('machine')}.", "",
              f"Windows: {json.dumps(tr.get('windows', {}))}.", "",
              "Learning curve:", ""]
    curve = card.get("learning_curve", [])
    if isinstance(curve, dict):  # this run: training loss only (see the note)
        lines += [curve.get("note", ""), "", "| minutes | windows seen | train loss (last 50 steps) |",
                  "|---:|---:|---:|"]
        pts = curve.get("train_loss", [])
        for c in pts[:: max(1, len(pts) // 12)] + pts[-1:]:
            lines.append(f"| {c['minutes']} | {c['windows_seen']} | {c['train_loss_50']} |")
    else:
        lines += ["| minutes | windows seen | epochs | F1 given the gold passages (150 calibration questions) |",
                  "|---:|---:|---:|---|"]
        for c in curve:
            lines.append(f"| {c['minutes']} | {c['windows_seen']} | {c['epochs']} | "
                         f"{', '.join(f'{k} {v:.3f}' for k, v in c['f1_gold_cal150'].items())} |")
    lines += ["", "## Misses and what would close them", "", res.get("notes", "(see the report)"), ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=ROOT / "src" / "amsrag" / "data" / "reader")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--per-dataset", type=int, default=200)
    ap.add_argument("--baseline-per-dataset", type=int, default=60)
    ap.add_argument("--items", type=Path, default=None, help="items.pkl of the training run (else rebuilt)")
    ap.add_argument("--notes", type=Path, default=None, help="a Markdown file for the misses section")
    ap.add_argument("--fp32-model", type=Path, default=None,
                    help="the un-quantised graph to compare with (default: MODEL/reader-fp32.onnx)")
    a = ap.parse_args()
    import hashlib
    import pickle

    from amsrag.evaluate.builder import held_out_questions
    from amsrag.learn.reader.run import evaluate

    if a.items is not None and a.items.is_file():
        items = pickle.loads(a.items.read_bytes())
    else:
        from amsrag.learn.reader.data import load_all

        items = load_all(a.data, 13, held_out_questions(a.data))[0]
    _ITEMS.update({it.id: it for it in items})
    fp32_file = a.fp32_model or a.model / "reader-fp32.onnx"
    res = evaluate(a.model, a.data, 13, a.per_dataset, None, fp32=fp32_file.is_file(), keep=True, all_items=items,
                   fp32_model=fp32_file)
    for r in res["records"]:
        r["question"] = _ITEMS[r["id"]].question
    res["baseline"] = baseline(res["records"], a.baseline_per_dataset) if a.baseline_per_dataset else {}
    onnx = a.model / "reader.onnx"
    res["artifact_bytes"] = onnx.stat().st_size
    res["artifact_sha256"] = hashlib.sha256(onnx.read_bytes()).hexdigest()
    res["date"] = time.strftime("%Y-%m-%d")
    res["machine"] = (f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs, load average "
                      f"{os.getloadavg()[0]:.1f} at the end, nice 19")
    res["notes"] = a.notes.read_text() if a.notes else ""
    card = json.loads((a.model / "reader.json").read_text())
    DOCS.mkdir(parents=True, exist_ok=True)
    slim = {k: v for k, v in res.items() if k != "records"}
    (DOCS / "reader.json").write_text(json.dumps(slim, indent=1))
    cmd = "PYTHONPATH=src nice -n 19 python benchmarks/reader.py " + " ".join(sys.argv[1:])
    (DOCS / "reader.md").write_text(markdown(res, card, cmd))
    print(json.dumps(slim, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
