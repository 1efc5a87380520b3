"""Answer generation on ../shared/data: the extractive reader, the local LLM, the TARG gate.

    python benchmarks/generation.py extractive [--per-dataset 200 --calibration 100]
    python benchmarks/generation.py llm [--per-dataset 40]
    python benchmarks/generation.py targ [--n 300]

`extractive`: EM/F1 (SQuAD normalisation) given the gold passages (the reader's ceiling) and given
the passages the engine retrieves from bench-cache/corpus-index (system `full`, k = 5). The
abstention threshold is calibrated on `--calibration` questions per data set disjoint from the
evaluated ones: the confidence cut that maximises the share of right decisions (answer when right,
abstain when wrong; "right" = token F1 >= 0.5). The result is the `generator.abstain_threshold`
default. `llm`: SmolLM2-135M (llamacpp) on gold passages. `targ`: closed-book SmolLM2 answers with
logprob confidence on the silver-labelled questions; gate threshold calibrated on half, reported on
the other half. Results merge into docs/benchmarks/generation.json; generation.md is rendered from it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import defaultdict

import numpy as np
from tqdm import tqdm

from amsrag.config import GeneratorConfig
from amsrag.generate import exact_match, token_f1
from amsrag.types import Passage
from common import CACHE, ROOT, SHARED_DATA, load_benchmark, percentiles

OUT = ROOT / "docs" / "benchmarks"
DATASETS = ("hotpotqa", "musique", "nq", "squad")
SQUAD_FILE = "squad/squad_v1.1_subset_20articles.json"
RIGHT_F1 = 0.5
KEEP_RIGHT = 0.9  # the abstention threshold keeps 90 % of the right answers


def _key(seed: int, text: str) -> str:
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()


def questions_and_passages(index=None) -> tuple[dict[str, list], dict[str, Passage]]:
    """Questions with gold passages per data set (seeded order) and the passages by id."""
    from amsrag.ingest import load_qa

    passages, questions = load_benchmark()
    squad = load_qa(SHARED_DATA / SQUAD_FILE)
    by_id = {p.id: Passage(id=p.id, title=p.title, text=p.text) for p in [*passages, *squad.passages]}
    by_ds: dict[str, list] = defaultdict(list)
    for q in [*questions, *squad.questions]:
        usable = q.dataset in DATASETS and q.gold_passage_ids and all(g in by_id for g in q.gold_passage_ids)
        if usable and (index is None or all(index.get(g) is not None for g in q.gold_passage_ids)):
            by_ds[q.dataset].append(q)
    for ds in by_ds:
        by_ds[ds].sort(key=lambda q: _key(11, q.id))
    return by_ds, by_id


def score(prediction: str, abstained: bool, answers: list[str]) -> tuple[float, float]:
    if abstained:
        return 0.0, 0.0
    return exact_match(prediction, answers), token_f1(prediction, answers)


def calibrate_abstention(confidences: list[float], right: list[bool], keep: float = KEEP_RIGHT
                         ) -> tuple[float, float]:
    """The highest threshold that still answers `keep` of the questions the reader gets right (so abstaining
    costs at most 1 - keep of the right answers), and the share of right answer/abstain decisions there.

    Maximising right decisions alone abstains on almost everything when the reader is right less than
    half the time; this keeps the reader useful and removes the least confident answers."""
    conf = np.asarray(confidences)
    ok = np.asarray(right, dtype=bool)
    if not ok.any():
        return 0.0, round(float((~ok).mean()), 4)
    t = float(np.floor(np.quantile(conf[ok], 1.0 - keep, method="lower") * 1000) / 1000)
    answered = conf >= t
    return round(t, 3), round(float(((answered & ok) | (~answered & ~ok)).mean()), 4)


def run_extractive(args) -> dict:
    from amsrag.generate.heuristic import HeuristicGenerator
    from amsrag.pipeline import Engine
    from amsrag.store import EmbeddedIndex

    engine = Engine(EmbeddedIndex.open(CACHE / "corpus-index"))
    by_ds, by_id = questions_and_passages(engine.index)
    reader = HeuristicGenerator(engine.index.encoder, GeneratorConfig(abstain_threshold=0.0))
    records = []
    for ds in DATASETS:
        qs = by_ds.get(ds, [])
        chosen = [("eval", q) for q in qs[: args.per_dataset]]
        chosen += [("cal", q) for q in qs[args.per_dataset: args.per_dataset + args.calibration]]
        for split, q in tqdm(chosen, desc=f"extractive {ds}", file=sys.stderr):
            qv = engine.index.encoder.encode_query(q.question)
            gold = [by_id[g] for g in q.gold_passage_ids]
            t = time.perf_counter()
            retrieved = engine.retrieve(q.question, system="full", query_vector=qv).passages
            retrieve_ms = (time.perf_counter() - t) * 1000
            for setting, passages in (("gold", gold), ("retrieved", retrieved)):
                g = reader.generate(q.question, passages, query_vector=qv)
                answer = g.answer if not g.abstained else (g.details.get("candidate") or "")
                em, f1 = score(answer, not answer, q.answers)
                records.append({"dataset": ds, "split": split, "setting": setting, "em": em, "f1": f1,
                                "confidence": g.confidence or 0.0, "type": g.details.get("answer_type"),
                                "ms": g.ms, "retrieve_ms": retrieve_ms if setting == "retrieved" else None,
                                "gold_retrieved": len(set(q.gold_passage_ids) & {p.id for p in retrieved})
                                / len(q.gold_passage_ids) if setting == "retrieved" else 1.0})
    CACHE.mkdir(exist_ok=True)
    (CACHE / "generation-extractive-records.json").write_text(json.dumps(records))
    cal = [r for r in records if r["split"] == "cal"]
    threshold, decision_acc = calibrate_abstention([r["confidence"] for r in cal], [r["f1"] >= RIGHT_F1 for r in cal])
    ev = [r for r in records if r["split"] == "eval"]
    table: dict = {}
    for setting in ("gold", "retrieved"):
        for ds in (*DATASETS, "all"):
            rows = [r for r in ev if r["setting"] == setting and (ds == "all" or r["dataset"] == ds)]
            if not rows:
                continue
            answered = [r for r in rows if r["confidence"] >= threshold]
            table[f"{setting}/{ds}"] = {
                "n": len(rows), "em": round(float(np.mean([r["em"] for r in rows])), 4),
                "f1": round(float(np.mean([r["f1"] for r in rows])), 4),
                "answered": round(len(answered) / len(rows), 4),
                "em_abstaining": round(sum(r["em"] for r in answered) / len(rows), 4),
                "f1_answered": round(float(np.mean([r["f1"] for r in answered])), 4) if answered else None,
                "gold_in_passages": round(float(np.mean([r["gold_retrieved"] for r in rows])), 4),
                "reader_ms": percentiles([r["ms"] for r in rows]),
            }
    by_type: dict = defaultdict(list)
    for r in ev:
        if r["setting"] == "gold":
            by_type[r["type"]].append(r)
    return {"date": time.strftime("%Y-%m-%d"), "passages": len(engine.index),
            "command": f"python benchmarks/generation.py extractive --per-dataset {args.per_dataset} "
                       f"--calibration {args.calibration}",
            "abstain_threshold": threshold, "calibration_decision_accuracy": decision_acc,
            "calibration_questions": len(cal) // 2, "results": table,
            "gold_by_answer_type": {t: {"n": len(v), "em": round(float(np.mean([r["em"] for r in v])), 4),
                                        "f1": round(float(np.mean([r["f1"] for r in v])), 4)}
                                    for t, v in sorted(by_type.items())}}


def run_llm(args) -> dict:
    from amsrag.generate.llamacpp import LlamaCppGenerator

    by_ds, by_id = questions_and_passages()
    gen = LlamaCppGenerator(GeneratorConfig(name="llamacpp"))
    table: dict = {}
    allrows = []
    for ds in DATASETS:
        rows = []
        for q in tqdm(by_ds.get(ds, [])[: args.per_dataset], desc=f"llamacpp {ds}", file=sys.stderr):
            g = gen.generate(q.question, [by_id[i] for i in q.gold_passage_ids])
            em, f1 = score(g.answer, g.abstained, q.answers)
            rows.append({"em": em, "f1": f1, "abstained": g.abstained, "cited": bool(g.citations),
                         "cited_gold": bool(set(g.citations) & set(q.gold_passage_ids)),
                         "model_cited": g.details.get("citation_source") == "model", "ms": g.ms,
                         "prompt_tokens": g.prompt_tokens, "output_tokens": g.output_tokens})
        allrows += rows
        for name, rs in ((ds, rows), *((("all", allrows),) if ds == DATASETS[-1] else ())):
            table[name] = {"n": len(rs), "em": round(float(np.mean([r["em"] for r in rs])), 4),
                           "f1": round(float(np.mean([r["f1"] for r in rs])), 4),
                           "abstained": round(float(np.mean([r["abstained"] for r in rs])), 4),
                           "cites_a_gold_passage": round(float(np.mean([r["cited_gold"] for r in rs])), 4),
                           "model_wrote_citation": round(float(np.mean([r["model_cited"] for r in rs])), 4),
                           "ms": percentiles([r["ms"] for r in rs]),
                           "prompt_tokens_mean": round(float(np.mean([r["prompt_tokens"] for r in rs])), 1),
                           "output_tokens_mean": round(float(np.mean([r["output_tokens"] for r in rs])), 1)}
    return {"date": time.strftime("%Y-%m-%d"), "model": gen.model_path.name, "n_ctx": gen.n_ctx,
            "command": f"python benchmarks/generation.py llm --per-dataset {args.per_dataset}", "results": table}


def run_targ(args) -> dict:
    from amsrag.generate.llamacpp import LlamaCppGenerator
    from amsrag.generate.targ import calibrate_threshold, gate_stats
    from amsrag.ingest import load_qa
    from amsrag.ingest.datasets import SILVER3_FILE, load_silver3

    gen = LlamaCppGenerator(GeneratorConfig(name="llamacpp"))
    silver = sorted(load_silver3(SHARED_DATA / SILVER3_FILE), key=lambda r: _key(5, r.key))[: args.n]
    trivia = load_qa(SHARED_DATA / "triviaqa" / "flashrag_triviaqa_test_sub1000.jsonl").questions
    trivia = sorted(trivia, key=lambda q: _key(5, q.id))[: args.n]
    out: dict = {"date": time.strftime("%Y-%m-%d"), "model": gen.model_path.name,
                 "command": f"python benchmarks/generation.py targ --n {args.n}", "target_precision": args.precision}
    for name, items in (("silver_zero_hop", [(r.question, r.three == "zero_hop") for r in silver]),
                        ("triviaqa_closed_book_correct", [(q.question, q.answers) for q in trivia])):
        confs, labels = [], []
        for question, label in tqdm(items, desc=f"closed book {name}", file=sys.stderr):
            g = gen.closed_book(question)
            confs.append(None if g.abstained else g.confidence)
            labels.append(bool(label) if isinstance(label, bool) else token_f1(g.answer, label) >= RIGHT_F1)
        half = len(items) // 2
        rng = random.Random(3)
        order = list(range(len(items)))
        rng.shuffle(order)
        cal_i, ev_i = order[:half], order[half:]
        cal = calibrate_threshold([confs[i] for i in cal_i], [labels[i] for i in cal_i], args.precision)
        stats = gate_stats([confs[i] for i in ev_i], [labels[i] for i in ev_i], cal.threshold)
        valid = [c for c in confs if c is not None]
        out[name] = {"n": len(items), "threshold": cal.threshold, "calibration": {
            "fire_rate": round(cal.fire_rate, 4), "precision": cal.precision, "n": cal.n},
            "held_out": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in stats.items()},
            "confidence_quantiles": [round(float(x), 4) for x in np.quantile(valid, [0.1, 0.5, 0.9])] if valid
            else None,
            "labels_positive": round(float(np.mean(labels)), 4)}
        if name == "silver_zero_hop":  # the gate's precision if it fired at several fixed thresholds
            out[name]["by_threshold"] = {str(t): gate_stats(confs, labels, t) for t in (0.5, 0.7, 0.8, 0.9)}
    return out


def render(data: dict) -> str:
    lines = ["# Answer generation", ""]
    ex = data.get("extractive")
    if ex:
        lines += ["## Extractive reader (default, no LLM)", "", f"Command: `{ex['command']}` ({ex['date']}). "
                  f"Retrieved = engine system `full`, k = 5, over bench-cache/corpus-index ({ex['passages']} "
                  "passages). EM/F1 with SQuAD normalisation, abstentions count 0 in `EM (abstaining)`; `EM`/`F1` "
                  "are the reader's answer without abstention.", "",
                  f"Abstention threshold calibrated on {ex['calibration_questions']} disjoint questions (both "
                  f"settings): **{ex['abstain_threshold']}**, the highest confidence cut that still answers 90 % of "
                  "the questions the reader gets right (F1 >= 0.5); share of right answer/abstain decisions there "
                  f"{ex['calibration_decision_accuracy']}. It is the `generator.abstain_threshold` default.", "",
                  "| passages | data set | n | EM | F1 | answered | EM (abstaining) | F1 of answered "
                  "| gold in passages | reader p50 ms |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key, r in ex["results"].items():
            setting, ds = key.split("/")
            f1a = "–" if r["f1_answered"] is None else f"{r['f1_answered']:.3f}"
            lines.append(f"| {setting} | {ds} | {r['n']} | {r['em']:.3f} | {r['f1']:.3f} | {r['answered']:.2f} | "
                         f"{r['em_abstaining']:.3f} | {f1a} | {r['gold_in_passages']:.2f} | {r['reader_ms']['p50']} |")
        lines += ["", "Gold passages, by expected answer type: " + ", ".join(
            f"{t} {v['n']} q EM {v['em']:.2f} F1 {v['f1']:.2f}" for t, v in ex["gold_by_answer_type"].items()), ""]
    llm = data.get("llm")
    if llm:
        lines += ["## Local LLM (llamacpp, gold passages)", "", f"Command: `{llm['command']}` ({llm['date']}); "
                  f"model {llm['model']}, n_ctx {llm['n_ctx']}, n_threads 1, temperature 0.", "",
                  "| data set | n | EM | F1 | abstained | cites a gold passage | wrote a [n] citation | p50 ms | "
                  "prompt tokens | output tokens |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for ds, r in llm["results"].items():
            lines.append(f"| {ds} | {r['n']} | {r['em']:.3f} | {r['f1']:.3f} | {r['abstained']:.2f} | "
                         f"{r['cites_a_gold_passage']:.2f} | {r['model_wrote_citation']:.2f} | {r['ms']['p50']} | "
                         f"{r['prompt_tokens_mean']} | {r['output_tokens_mean']} |")
        lines.append("")
    tg = data.get("targ")
    if tg:
        lines += ["## TARG gate (closed-book confidence → skip retrieval)", "", f"Command: `{tg['command']}` "
                  f"({tg['date']}); model {tg['model']}; confidence = exp(mean token logprob) of the closed-book "
                  f"answer; threshold = the lowest whose fired set is right >= {tg['target_precision']} of the "
                  "time on a calibration half (>= 10 fired), else 1.0 (never fires); reported on the other half.", "",
                  "| label | n | positives | threshold | fire rate (held out) | accuracy when fired | "
                  "confidence p10/p50/p90 |", "|---|---:|---:|---:|---:|---:|---|"]
        for name in ("silver_zero_hop", "triviaqa_closed_book_correct"):
            r = tg[name]
            h = r["held_out"]
            lines.append(f"| {name} | {r['n']} | {r['labels_positive']:.2f} | {r['threshold']} | "
                         f"{h['fire_rate']:.3f} | {h['accuracy_when_fired']} | {r['confidence_quantiles']} |")
        if "by_threshold" in tg["silver_zero_hop"]:
            lines += ["", "Silver zero_hop labels, all questions, at fixed thresholds: " + "; ".join(
                f"t={t}: fires {v['fire_rate']:.3f}, right {v['accuracy_when_fired']:.3f}"
                for t, v in tg["silver_zero_hop"]["by_threshold"].items())]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["extractive", "llm", "targ", "render"])
    ap.add_argument("--per-dataset", type=int, default=None)
    ap.add_argument("--calibration", type=int, default=100)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--precision", type=float, default=0.8, help="TARG: required accuracy when the gate fires")
    args = ap.parse_args()
    path = OUT / "generation.json"
    part = {"extractive": run_extractive, "llm": run_llm, "targ": run_targ}.get(args.part)
    if part is not None:
        if args.part == "extractive":
            args.per_dataset = args.per_dataset or 200
        elif args.part == "llm":
            args.per_dataset = args.per_dataset or 40
        result = part(args)
        CACHE.mkdir(exist_ok=True)  # each part also kept alone: parts may run at the same time
        (CACHE / f"generation-{args.part}.json").write_text(json.dumps(result, indent=2, default=float) + "\n")
    data = json.loads(path.read_text()) if path.exists() else {}  # read late: another part may have written
    for name in ("extractive", "llm", "targ"):
        saved = CACHE / f"generation-{name}.json"
        if name not in data and saved.exists():
            data[name] = json.loads(saved.read_text())
    if part is not None:
        data[args.part] = result
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=float) + "\n")
    (OUT / "generation.md").write_text(render(data) + "\n")
    print(render(data))


if __name__ == "__main__":
    main()
