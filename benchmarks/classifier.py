"""Complexity classifier benchmark: does the hop decision hold up on data it has not seen?

Leave-one-data-set-out (the primary report) beside the random split, ECE and reliability per data set,
recalibration on a deployment's own labelled questions, the query library's learning curve, a templated
stress set of surface-simple multi-hop questions, and speed (classification plus the library's kNN).

    OMP_NUM_THREADS=1 python benchmarks/classifier.py

evaluates the shipped artifact `src/amsrag/data/classifier/` on the same labelled data it was trained from
(rebuilt with `amsrag train classifier train --data ../shared/data --out src/amsrag/data/classifier`) and writes
docs/benchmarks/classifier.{md,json} and classifier_*.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.classify.model import ComplexityClassifier, shipped_artifact_dir
from amsrag.embed.encoder import MiniLMEncoder
from amsrag.ingest.datasets import MULTI_HOP_DATASETS
from amsrag.learn.classifier.data import build_labelled_data
from amsrag.learn.classifier.evaluate import evaluate_classifier
from amsrag.learn.classifier.lodo import (
    base_rows,
    library_curve,
    library_of,
    lodo_models,
    lodo_report,
    recalibration,
    sample_rows,
)
from amsrag.learn.classifier.stress import stress_set
from amsrag.learn.classifier.train import CONFIDENT, MULTI, Prepared, TrainConfig, confident_downward, prepare
from amsrag.learn.common import embed_questions
from amsrag.types import COMPLEXITIES

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "docs" / "benchmarks"
COMMAND = "OMP_NUM_THREADS=1 python benchmarks/classifier.py"
TARGET_MULTI, TARGET_ONE, TARGET_RANDOM, TARGET_ECE = 0.80, 0.95, 0.90, 0.05


def stress_eval(clf: ComplexityClassifier, data_dir: Path, encoder: MiniLMEncoder) -> dict[str, Any]:
    items = stress_set(data_dir)
    qs = [s.question for s in items]
    preds = clf.predict_batch(qs, embed_questions(qs, encoder))
    label = np.array([COMPLEXITIES.index(p.label) for p in preds])
    alpha = np.array([p.alpha for p in preds])
    out: dict[str, Any] = {}
    for kind in [*sorted({s.kind for s in items}), "all"]:
        m = np.array([kind in ("all", s.kind) for s in items])
        out[kind] = {"n": int(m.sum()), "predicted_multi_hop": float(np.mean(label[m] == MULTI)),
                     "confident_downward": confident_downward(label[m], alpha[m], np.ones(int(m.sum()), int))}
    out["examples_confident_downward"] = [
        {"kind": s.kind, "question": s.question, "label": p.label, "alpha": round(p.alpha, 3)}
        for s, p in zip(items, preds, strict=True) if p.label != "multi_hop" and p.alpha >= CONFIDENT][:10]
    return out


def speed(clf: ComplexityClassifier, prep: Prepared, encoder: MiniLMEncoder, config: TrainConfig) -> dict[str, Any]:
    test = np.flatnonzero(prep.mask("test"))[:1000]
    qs = [prep.rows[i].question for i in test]
    vecs = prep.embeddings[test]
    library = library_of(prep, sample_rows(prep, prep.mask("train"), 2000, config.seed, "speed"), "speed")
    out: dict[str, Any] = {"n": len(qs), "library_size": len(library)}
    for name, lib in (("no_library", None), ("library_2000", library)):
        for q, v in zip(qs[:50], vecs[:50], strict=True):  # warm-up
            clf.predict(q, v, library=lib)
        per = []
        for q, v in zip(qs, vecs, strict=True):
            t = time.perf_counter()
            clf.predict(q, v, library=lib)
            per.append((time.perf_counter() - t) * 1000)
        out[name] = {"mean_ms": statistics.fmean(per), "p50_ms": float(np.percentile(per, 50)),
                     "p95_ms": float(np.percentile(per, 95))}
    emb = []
    for q in qs[:200]:
        t = time.perf_counter()
        encoder.encode_query(q)
        emb.append((time.perf_counter() - t) * 1000)
    out["embed_query_ms_p50"] = float(np.percentile(emb, 50))
    return out


def plots(lodo: dict[str, Any], random_split: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, per, title in (("lodo", lodo, "left out of training"), ("random", random_split, "random split test")):
        fig, axes = plt.subplots(2, 4, figsize=(15, 7.2))
        for ax, (d, m) in zip(axes.flat, sorted(per.items()), strict=False):
            rel = m["reliability"]
            conf = np.array([np.nan if c is None else c for c in rel["confidence"]], dtype=float)
            acc = np.array([np.nan if a is None else a for a in rel["accuracy"]], dtype=float)
            ok = np.isfinite(conf)
            ax.bar(conf[ok], acc[ok], width=1 / 15, edgecolor="black", alpha=0.7)
            ax.plot([0.5, 1], [0.5, 1], "k--")
            ax.set_xlim(0.45, 1.0)
            ax.set_ylim(0, 1.02)
            ax.set_title(f"{d} ({title})\nacc {m['accuracy']:.3f}, ECE {m['ece']:.3f}, n={m['n']}", fontsize=9)
            ax.set_xlabel("hop confidence")
            ax.set_ylabel("hop accuracy")
        for ax in list(axes.flat)[len(per):]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(OUT / f"classifier_reliability_{name}.png", dpi=100)
        plt.close(fig)


def _p(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def write_report(r: dict[str, Any]) -> None:
    lodo, rnd, recal, curve = r["lodo"], r["random_split"], r["recalibration"], r["library_curve"]
    L = ["# Complexity classifier benchmark", "",
         f"Command: `{COMMAND}` (evaluates the shipped artifact `src/amsrag/data/classifier/`; retrain it with "
         "`amsrag train classifier train --data ../shared/data --out src/amsrag/data/classifier`, ~2 min).", "",
         f"Training data sha256 `{r['data_sha256']}` ({r['rows']} labelled questions from {len(lodo)} data sets; "
         f"{r['held_out']} evaluated / demo / stress-source questions left out; the artifact records the same "
         f"hash: {r['artifact_matches_data']}). Machine: 2 shared cores, BLAS on 1 thread. Numbers in %.", "",
         "## Targets", "",
         "| target | measured | met |", "|---|---|---|"]
    for d in sorted(lodo):
        goal = TARGET_MULTI if d in MULTI_HOP_DATASETS else TARGET_ONE
        L.append(f"| LODO hop accuracy on {d} ≥ {_p(goal)} | {_p(lodo[d]['accuracy'])} | "
                 f"{_met(lodo[d]['accuracy'] >= goal)} |")
    worst_random = min(rnd.items(), key=lambda kv: kv[1]["accuracy"])
    L.append(f"| random split hop accuracy ≥ 90 on every data set | lowest: {worst_random[0]} "
             f"{_p(worst_random[1]['accuracy'])} | {_met(worst_random[1]['accuracy'] >= TARGET_RANDOM)} |")
    worst_ece = max(lodo.items(), key=lambda kv: kv[1]["ece"])
    L.append(f"| hop ECE ≤ 5 on every held-out data set (shipped calibration) | worst: {worst_ece[0]} "
             f"{_p(worst_ece[1]['ece'])} | {_met(worst_ece[1]['ece'] <= TARGET_ECE)} |")
    worst_recal = max(recal.items(), key=lambda kv: kv[1]["after"]["ece"])
    L.append(f"| … after `train classifier calibrate --qa` on up to {RECAL_ROWS} labelled questions of the data set | "
             f"worst: {worst_recal[0]} {_p(worst_recal[1]['after']['ece'])} "
             f"(fitted on {recal[worst_recal[0]]['rows']}); "
             f"{sum(r['after']['ece'] <= TARGET_ECE for r in recal.values())} of {len(recal)} within | "
             f"{_met(worst_recal[1]['after']['ece'] <= TARGET_ECE)} |")
    multi_down = max(lodo[d]["confident_downward"] for d in lodo if d in MULTI_HOP_DATASETS)
    rnd_down = max(rnd[d]["confident_downward"] for d in rnd if d in MULTI_HOP_DATASETS)
    L.append(f"| confident-downward ≤ 3 on real multi-hop data | random split worst {_p(rnd_down)}; LODO worst "
             f"{_p(multi_down)} | {_met(rnd_down <= 0.03)} (random) / {_met(multi_down <= 0.03)} (LODO) |")
    mis = r.get("misroutes")
    if mis:
        real = [m for m in mis if m["multi_hop"]]
        n_multi, n_down = sum(m["multi_hop"] for m in real), sum(m["confident_downward"] for m in real)
        n_caught = sum(m["caught"] for m in real)
        L.append(f"| … on the evaluated benchmarks' multi_hop questions, `full`'s route (misroutes.md) | "
                 f"{_p(n_down / max(n_multi, 1))} of {n_multi} | {_met(n_down <= 0.03 * n_multi)} |")
        L.append(f"| the sufficiency check catches ≥ half of what remains | {n_caught} of {n_down} | "
                 f"{_met(2 * n_caught >= n_down)} |")
    s = r["stress"]["all"]
    L.append(f"| confident-downward ≤ 8 on the stress set | {_p(s['confident_downward'])} of {s['n']} | "
             f"{_met(s['confident_downward'] <= 0.08)} |")
    gains = {d: c["own"]["500"]["accuracy"] - c["own"]["0"]["accuracy"] for d, c in curve.items()}
    L.append("| a 500-query library of a held-out data set: +5 points | "
             + ", ".join(f"{d} {100 * g:+.1f}" for d, g in sorted(gains.items()))
             + f" | {_met(all(g >= 0.05 for g in gains.values()))} ({sum(g >= 0.05 for g in gains.values())} of "
             f"{len(gains)}) |")
    sp = r["speed"]
    L.append(f"| classification ≤ 1 ms beyond the shared embedding, with the kNN | {sp['library_2000']['mean_ms']:.3f} "
             f"ms mean, {sp['library_2000']['p95_ms']:.3f} p95 with a {sp['library_size']}-query library "
             f"({sp['no_library']['mean_ms']:.3f} without) | {_met(sp['library_2000']['p95_ms'] <= 1.0)} |")
    L += ["", "## Design", "",
          "- **hop head**: logistic regression (C = 0.2, balanced classes, every data set weighing the same) over "
          "the shared MiniLM query embedding and 30 structural features (comparisons, relative clauses, "
          "possessives, relation chains \"the director of …\", \"of … of\" nesting, entities described instead "
          "of named, name counts, a two-entity-comparison flag). Its target is the data sets' hop structure; "
          "silver labels never override it (they described FLAN-T5-XL, not the question).",
          f"- **calibration**: temperature on the calibration mix ({r['calibration']['hop_rows']} cal rows, at "
          f"most {r['train_config']['calibration_rows_per_dataset']} per data set): T = "
          f"{r['calibration']['hop_params'].get('temperature', ['?'])[0]:.3f}.",
          "- **zero_hop belongs to the generator**: the shipped artifact has no knowledge head (the default "
          "generator is extractive and cannot answer closed-book), so p(zero_hop) = 0 and the label is one_hop "
          "or multi_hop. `amsrag train classifier label --generator G` then `train classifier train --silver FILE "
          "--generator G` trains one from that generator's own answers; two-entity comparisons never pass "
          "its gate.",
          f"- **query library**: an index's labelled queries (`amsrag train route learn`, `POST /v1/route/library`) "
          f"vote over the k = {r['library_settings']['k']} nearest; neighbours at cosine ≥ "
          f"{r['library_settings']['threshold']} count, each weighing "
          + ("its margin over the threshold, (cos − t) / (1 − t)" if r['library_settings'].get('weighting') == "margin"
             else "its cosine")
          + f"; w = S / (S + {r['library_settings']['strength']}) (S: the summed weights), p = (1 − w) "
          "p_classifier + w p_library. The settings (threshold, k, strength, cosine or margin weighting) were "
          "fitted leave-one-data-set-out on cal rows: the hop accuracy with a library of mixed traffic (500 of "
          "the held-out data set's train questions plus the other data sets' calibration mix, so that both "
          "labels compete) minus the harm of a library of only 20 unrelated questions; the trace shows the vote "
          "and whether it decided the label.", ""]
    L += ["## Leave-one-data-set-out (primary)", "",
          "A hop head trained on the train rows of the other data sets and calibrated on their calibration "
          "mix, judged on every row of the held-out one; then its temperature refitted on up to "
          f"{RECAL_ROWS} labelled questions of the held-out data set (its cal rows: "
          + ", ".join(f"{d} {m['rows']}" for d, m in sorted(recal.items()) if m["rows"] < RECAL_ROWS)
          + " have fewer; what `amsrag train classifier calibrate --qa` does) and judged on that data set's test rows.",
          "",
          "| held-out data set | n | hop accuracy | target | ECE | mean confidence | confident-downward | "
          "ECE after recalibration (test rows) | T refitted |", "|---|---|---|---|---|---|---|---|---|"]
    for d in sorted(lodo):
        m, rc = lodo[d], recal[d]
        goal = TARGET_MULTI if d in MULTI_HOP_DATASETS else TARGET_ONE
        L.append(f"| {d} | {m['n']} | {_p(m['accuracy'])} | {_p(goal)} | {_p(m['ece'])} | "
                 f"{_p(m['mean_confidence'])} | {_p(m['confident_downward']) if m['n_multi_hop'] else '–'} | "
                 f"{_p(rc['before']['ece'])} → {_p(rc['after']['ece'])} | "
                 f"{rc['params'].get('temperature', ['?'])[0]:.2f} |")
    L += ["", "**Why LODO misses on four data sets.** The hop label is the data set's, and the data sets "
          "disagree on what the same kind of question is: TriviaQA, SQuAD and PopQA questions that describe "
          "an entity by its attributes read like HotpotQA bridge questions, and many HotpotQA questions are "
          "answerable from one passage. Leaving HotpotQA out leaves 2Wiki's templates and MuSiQue's "
          "compositions as the only multi-hop examples, and neither looks like HotpotQA (53 % — half of it "
          "called one_hop, confidently); leaving TriviaQA out, it looks like HotpotQA (50 %). Tried on the "
          "same LODO protocol during development (scratch runs, not repeated by this script): the features "
          "alone (HotpotQA 57, PopQA 85, SQuAD 83, TriviaQA 42, 2Wiki 78), stronger regularisation of the "
          "embedding (C 0.002–0.01: within ±3 points), per-data-set weighting (shipped), a temperature fitted "
          "on nested out-of-data-set logits (fixes ECE on the ambiguous sets, breaks it on 2Wiki/NQ: 22–26 %), "
          "an OOD stacker over the embedding and feature heads' logits and their disagreement (worse: the "
          "held-out logits carry no usable sign across data sets), kNN novelty as an uncertainty signal "
          "(top-10 cosine to training questions is the same in and out of distribution, ±0.05), and an MLP "
          "head (random split HotpotQA 87.5, TriviaQA 74.7: no closer to 90 on both). What does work is "
          "what a deployment can do: recalibrating on a few hundred of its own labelled questions (ECE ≤ 5 "
          "on 5 of 7 held-out sets, and MuSiQue / TriviaQA had only 210 / 118 to fit on, above) and the "
          "query library (below).", "",
          "![LODO reliability](classifier_reliability_lodo.png)", "",
          "## Random split (every data set in training), test rows", "",
          "| data set | n | hop accuracy | ECE | confident-downward |", "|---|---|---|---|---|"]
    for d in sorted(rnd):
        m = rnd[d]
        L.append(f"| {d} | {m['n']} | {_p(m['accuracy'])} | {_p(m['ece'])} | "
                 f"{_p(m['confident_downward']) if m['n_multi_hop'] else '–'} |")
    allm = r["random_all"]
    L += [f"| all | {allm['n']} | {_p(allm['accuracy'])} | {_p(allm['ece'])} | {_p(allm['confident_downward'])} |",
          "", "![random split reliability](classifier_reliability_random.png)", "",
          "## Query library: hop accuracy on a held-out data set's test rows by library size", "",
          "The LODO head of each data set, with a library of that many of its labelled train questions — alone "
          "(`own`, a deployment's library) and beside the other data sets' calibration mix (`mixed`); the last "
          "column: the change when the library holds only 20 questions of the other data sets (a young "
          "library unrelated to the traffic).", "",
          "| held-out data set | library | 0 | 100 | 500 | 2000 | +500 vs 0 | 20 unrelated queries only |",
          "|---|---|---|---|---|---|---|---|"]
    for d in sorted(curve):
        for kind in ("own", "mixed"):
            c = curve[d][kind]
            unrelated = curve[d]["unrelated"]["accuracy"] - curve[d]["own"]["0"]["accuracy"]
            L.append(f"| {d} | {kind} | " + " | ".join(f"{_p(c[str(n)]['accuracy'])}" for n in (0, 100, 500, 2000))
                     + f" | {100 * (c['500']['accuracy'] - curve[d]['own']['0']['accuracy']):+.1f} | "
                     + (f"{100 * unrelated:+.1f} |" if kind == "own" else " |"))
    L += ["", "## Stress set: surface-simple multi-hop questions (synthetic, never in any split)", "",
          "Templated from 2WikiMultihopQA evidence triples and MuSiQue decompositions "
          "(`amsrag.learn.classifier.stress`; their source questions are left out of training).", "",
          "| kind | n | predicted multi_hop | confident-downward |", "|---|---|---|---|"]
    for kind, m in r["stress"].items():
        if kind != "examples_confident_downward":
            L.append(f"| {kind} | {m['n']} | {_p(m['predicted_multi_hop'])} | {_p(m['confident_downward'])} |")
    if r["stress"]["examples_confident_downward"]:
        L += ["", "Stress questions sent cheaper at alpha ≥ 0.90:", ""]
        L += [f"- {e['question']!r} → {e['label']} (alpha {e['alpha']}; {e['kind']})"
              for e in r["stress"]["examples_confident_downward"]]
    L += ["", "## Speed", "",
          f"Per query, one at a time, the shared embedding given: {sp['no_library']['mean_ms']:.3f} ms mean / "
          f"{sp['no_library']['p95_ms']:.3f} p95 without a library; {sp['library_2000']['mean_ms']:.3f} / "
          f"{sp['library_2000']['p95_ms']:.3f} with a {sp['library_size']}-query library. The embedding itself: "
          f"{sp['embed_query_ms_p50']:.2f} ms p50.", ""]
    (OUT / "classifier.md").write_text("\n".join(L), encoding="utf-8")


RECAL_ROWS = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    clf = ComplexityClassifier.load(shipped_artifact_dir())
    config = TrainConfig(**clf.meta["train_config"])
    data = build_labelled_data(args.data, cap=config.cap, seed=config.seed, implicit=config.implicit)
    encoder = MiniLMEncoder()
    prep = prepare(data, encoder)
    print("data ready", len(data.rows), flush=True)
    models = lodo_models(prep, config, progress=lambda d: print("LODO", d, flush=True))
    ev = evaluate_classifier(clf, prep, "test")["calibrated"]
    result: dict[str, Any] = {
        "command": COMMAND, "data_sha256": data.sha256, "rows": len(data.rows), "held_out": data.held_out,
        "artifact_matches_data": clf.meta["training_data"]["sha256"] == data.sha256,
        "train_config": clf.meta["train_config"], "calibration": clf.meta["calibration"],
        "library_settings": asdict(clf.library_settings),
        "counts": data.counts(),
        "lodo": lodo_report(prep, models),
        "recalibration": recalibration(prep, models, config, RECAL_ROWS),
        "random_split": ev["per_dataset"], "random_all": ev["hop_summary"],
        "library_curve": library_curve(prep, models, config, clf.library_settings),
        "stress": stress_eval(clf, args.data, encoder),
        "speed": speed(clf, prep, encoder, config),
        "base_library_rows": int(base_rows(prep, config).sum()),
    }
    misroutes = OUT / "misroutes.json"  # benchmarks/misroutes.py, on the evaluated benchmarks
    if misroutes.is_file():
        result["misroutes"] = json.loads(misroutes.read_text(encoding="utf-8"))
    plots(result["lodo"], result["random_split"])
    (OUT / "classifier.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    write_report(result)
    print(f"wrote {OUT / 'classifier.md'}", flush=True)


if __name__ == "__main__":
    main()
