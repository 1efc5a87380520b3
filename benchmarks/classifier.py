"""Complexity-classifier benchmark: writes docs/benchmarks/classifier.{md,json} and two PNGs.

    OMP_NUM_THREADS=1 python benchmarks/classifier.py [--data ../shared/data]

Evaluates the shipped artifact (src/amsrag/data/classifier) after checking it was trained on the
same data (sha256), against random / majority / rule baselines, single-head alternatives, ablations,
other calibration methods, a surface-simple multi-hop stress set, and speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from amsrag.classify.baselines import RuleBaseline, majority_baseline, random_baseline  # noqa: E402
from amsrag.classify.calibration import (  # noqa: E402
    CALIBRATION_METHODS,
    fit_calibrator,
    fit_temperature,
    reliability_bins,
    softmax,
)
from amsrag.classify.data import build_labelled_data, normalise_question  # noqa: E402
from amsrag.classify.embedding import embed_questions  # noqa: E402
from amsrag.classify.evaluate import (  # noqa: E402
    classification_metrics,
    evaluate_outputs,
    hop_view,
    model_outputs,
)
from amsrag.classify.model import ComplexityClassifier, shipped_artifact_dir  # noqa: E402
from amsrag.classify.train import CONFIDENT, MULTI, Prepared, TrainConfig, confident_downward, fit_head, prepare  # noqa: E402
from amsrag.embed.encoder import MiniLMEncoder  # noqa: E402
from amsrag.types import COMPLEXITIES  # noqa: E402
from common import SHARED_DATA  # noqa: E402

OUT = ROOT / "docs" / "benchmarks"
COMMAND = "OMP_NUM_THREADS=1 python benchmarks/classifier.py"


# ---------------------------------------------------------------- systems


def system_outputs(name: str, prep: Prepared, mask: np.ndarray, clf: ComplexityClassifier,
                   rules: RuleBaseline, prior3: np.ndarray, prior_hop: float):
    """(label, probs, hop_pred, hop_conf) of one row of Table 3 on the rows of `mask`."""
    n = int(mask.sum())
    questions = [r.question for r, m in zip(prep.rows, mask, strict=True) if m]
    if name == "random":
        label, probs = random_baseline(n)
        hop_pred = np.random.default_rng(7).integers(0, 2, n)
        return label, probs, hop_pred, np.full(n, 0.5)
    if name == "majority":
        label, probs = majority_baseline(n, prior3)
        hop_pred = np.full(n, int(prior_hop >= 0.5))
        return label, probs, hop_pred, np.full(n, max(prior_hop, 1 - prior_hop))
    if name == "rules":
        label, probs = rules.predict(questions)
        hp, hc = hop_view(label, probs)
        return label, probs, hp, hc
    return model_outputs(clf, prep, mask, calibrated=(name == "calibrated"))


def table3(prep: Prepared, split: str, clf: ComplexityClassifier) -> dict[str, Any]:
    mask = prep.mask(split)  # type: ignore[arg-type]
    tr_s = prep.mask("train", silver3=True)
    prior3 = np.bincount(prep.three_y[tr_s], minlength=3).astype(float)
    prior_hop = float(prep.hop_y[prep.mask("train")].mean())
    train = prep.mask("train", silver3=True)
    rules = RuleBaseline().fit([r.question for r, m in zip(prep.rows, train, strict=True) if m], prep.three_y[train])
    out = {}
    for name in ("random", "majority", "rules", "uncalibrated", "calibrated"):
        out[name] = evaluate_outputs(prep, mask, *system_outputs(name, prep, mask, clf, rules, prior3, prior_hop))
    # the silver rows' three-way accuracy if every label were the data set's own hop count (no zero_hop)
    y3 = prep.three_y[mask]
    silver = y3 >= 0
    ds_hop = np.array([2 if r.dataset_hop == "multi_hop" else 1 for r, m in zip(prep.rows, mask, strict=True) if m])
    out["dataset_hop_oracle_on_silver"] = float(np.mean(ds_hop[silver] == y3[silver]))
    return out


def single_heads(prep: Prepared, clf: ComplexityClassifier) -> dict[str, Any]:
    """Two-head design vs a single three-way head (all rows / silver rows only), all on the calibration split."""
    from sklearn.linear_model import LogisticRegression

    tr, cal = prep.mask("train"), prep.mask("cal")
    y3 = prep.three_y
    y_all = np.where(y3 >= 0, y3, prep.hop_y + 1)  # dataset/silver2 rows: one_hop=1, multi_hop=2
    x = np.hstack([prep.embeddings, prep.features]).astype(np.float64)
    mean, scale = x[tr].mean(axis=0), x[tr].std(axis=0)
    scale[scale < 1e-9] = 1
    x = (x - mean) / scale
    results: dict[str, Any] = {}
    specs = {"single head, all rows": tr, "single head, silver rows only": tr & (y3 >= 0)}
    for name, rows in specs.items():
        best = None
        for c in (0.002, 0.01, 0.05, 0.2):
            lr = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, random_state=13)
            lr.fit(x[rows], y_all[rows])
            logits = lr.decision_function(x[cal])
            silver = y3[cal] >= 0
            t = fit_temperature(logits[silver], y3[cal][silver])
            probs = softmax(logits / t)
            label = probs.argmax(axis=1)
            hp, hc = hop_view(label, probs)
            ev = evaluate_outputs(prep, cal, label, probs, hp, hc)
            if best is None or ev["silver_three_way"]["accuracy"] > best[1]["silver_three_way"]["accuracy"]:
                best = (c, ev)
        assert best is not None
        results[name] = {"C": best[0], **_head_row(best[1])}
    two = evaluate_outputs(prep, cal, *model_outputs(clf, prep, cal))
    results["two heads (shipped)"] = {"C": None, **_head_row(two)}
    return results


def _head_row(ev: dict[str, Any]) -> dict[str, Any]:
    s3 = ev["silver_three_way"]
    return {"silver_accuracy": s3["accuracy"], "silver_macro_f1": s3["macro_f1"],
            "hop_accuracy_dataset": ev["hop_dataset"]["accuracy"], "hop_ece": ev["hop_dataset"]["ece"],
            "confident_downward": ev["confident_downward"]["all_multi_hop"]}


def ablations(prep: Prepared, config: TrainConfig) -> dict[str, Any]:
    """Each head with and without the cheap features; the hop head without the silver B/C rows (calibration split)."""
    tr, cal = prep.mask("train"), prep.mask("cal")
    cal_ds = prep.mask("cal", source="dataset")
    out: dict[str, Any] = {}
    for feats in (False, True):
        for name, rows in (("hop head, all train rows", tr), ("hop head, dataset-derived rows only",
                                                                prep.mask("train", source="dataset"))):
            head = fit_head(prep.embeddings[rows], prep.features[rows], prep.hop_y[rows], feats, config.hop_c,
                            config.seed)
            z = head.logits(prep.embeddings[cal_ds], prep.features[cal_ds])
            z_all = head.logits(prep.embeddings[cal], prep.features[cal])
            out[f"{name}, {'+ features' if feats else 'embedding only'}"] = {
                "hop_accuracy_dataset": float(np.mean((z >= 0) == prep.hop_y[cal_ds])),
                "hop_accuracy_all_cal_rows": float(np.mean((z_all >= 0) == prep.hop_y[cal])),
            }
        s_tr, s_cal = prep.mask("train", silver3=True), prep.mask("cal", silver3=True)
        yk = (prep.three_y == 0).astype(int)
        head = fit_head(prep.embeddings[s_tr], prep.features[s_tr], yk[s_tr], feats, config.knowledge_c, config.seed)
        z = head.logits(prep.embeddings[s_cal], prep.features[s_cal])
        pred = (z >= 0).astype(int)
        out[f"knowledge head, {'+ features' if feats else 'embedding only'}"] = {
            "zero_vs_rest_accuracy": float(np.mean(pred == yk[s_cal])),
            "zero_vs_rest_macro_f1": classification_metrics(yk[s_cal], pred, np.ones(len(pred)), ("no", "zero"))[
                "macro_f1"],
        }
    return out


def calibration_methods(clf: ComplexityClassifier, prep: Prepared) -> dict[str, Any]:
    """Hop-head ECE on the dataset-derived test rows for every calibration method (fitted on cal)."""
    cal, test = prep.mask("cal", source="dataset"), prep.mask("test", source="dataset")
    z_cal = clf.hop.logits(prep.embeddings[cal], prep.features[cal])
    z_test = clf.hop.logits(prep.embeddings[test], prep.features[test])
    y_cal, y_test = prep.hop_y[cal], prep.hop_y[test]
    out = {}
    for method in CALIBRATION_METHODS:
        cal_fn = fit_calibrator(method, z_cal, y_cal)
        p = cal_fn.prob1(z_test)
        pred = (z_test >= 0).astype(int)
        conf = np.where(pred == 1, p, 1 - p)
        m = classification_metrics(y_test, pred, conf, ("one_hop", "multi_hop"))
        nll = float(-np.mean(np.log(np.clip(np.where(y_test == 1, p, 1 - p), 1e-12, None))))
        out[method] = {"accuracy": m["accuracy"], "ece": m["ece"], "raa": m["raa"], "nll": nll}
    return out


# ---------------------------------------------------------------- stress set, leakage, speed


def stress_questions(data_dir: Path, prep: Prepared) -> list[tuple[str, str]]:
    """(kind, question) of surface-simple multi-hop questions: brief templated 2Wiki compositions and
    comparisons (new texts), and the short (<= 10 words) multi_hop test-split questions."""
    out: list[tuple[str, str]] = []
    records = json.loads((data_dir / "2wikimultihopqa" / "migres_2wiki_train_500_decomp.json").read_text("utf-8"))
    for rec in records:
        ev = rec.get("evidences") or []
        if rec.get("type") == "compositional" and len(ev) == 2 and ev[0][2] == ev[1][0]:
            out.append(("templated composition", f"{ev[1][1].capitalize()} of the {ev[0][1]} of {ev[0][0]}?"))
        elif rec.get("type") == "comparison" and len(ev) == 2 and ev[0][1] == ev[1][1]:
            out.append(("templated comparison", f"Same {ev[0][1]} for {ev[0][0]} and {ev[1][0]}?"))
    for r, m in zip(prep.rows, prep.mask("test"), strict=True):
        if m and r.hop == "multi_hop" and r.source == "dataset" and len(r.question.split()) <= 10:
            out.append((f"short {r.dataset} test question", r.question))
    seen, unique = set(), []
    for kind, q in out:
        if normalise_question(q) not in seen:
            seen.add(normalise_question(q))
            unique.append((kind, q))
    return unique


def stress_eval(clf: ComplexityClassifier, items: list[tuple[str, str]], encoder: MiniLMEncoder) -> dict[str, Any]:
    qs = [q for _, q in items]
    vectors = embed_questions(qs, encoder)
    preds = clf.predict_batch(qs, vectors)
    label = np.array([COMPLEXITIES.index(p.label) for p in preds])
    alpha = np.array([p.alpha for p in preds])
    out: dict[str, Any] = {}
    kinds = sorted({k for k, _ in items})
    for kind in [*kinds, "all"]:
        m = np.array([kind in ("all", k) for k, _ in items])
        out[kind] = {"n": int(m.sum()), "predicted_multi_hop": float(np.mean(label[m] == MULTI)),
                     "cheaper": float(np.mean(label[m] != MULTI)),
                     "confident_downward": confident_downward(label[m], alpha[m], np.ones(int(m.sum()), int))}
    examples = [{"kind": k, "question": q, **p.to_dict()} for (k, q), p in zip(items, preds, strict=True)
                if p.label != "multi_hop"][:8]
    out["examples_cheaper"] = examples
    return out


def leakage(prep: Prepared, threshold: float = 0.95) -> dict[str, Any]:
    """cal/test rows whose nearest train question has cosine >= threshold (near-duplicates across splits)."""
    tr = np.flatnonzero(prep.mask("train"))
    e_tr = prep.embeddings[tr]
    out: dict[str, Any] = {}
    for split in ("cal", "test"):
        idx = np.flatnonzero(prep.mask(split))  # type: ignore[arg-type]
        best = np.empty(len(idx))
        arg = np.empty(len(idx), dtype=int)
        for s in range(0, len(idx), 512):
            sims = prep.embeddings[idx[s:s + 512]] @ e_tr.T
            best[s:s + 512] = sims.max(axis=1)
            arg[s:s + 512] = sims.argmax(axis=1)
        hit = best >= threshold
        same_label = [prep.rows[idx[i]].hop == prep.rows[tr[arg[i]]].hop for i in np.flatnonzero(hit)]
        by_ds: dict[str, int] = {}
        for i in np.flatnonzero(hit):
            by_ds[prep.rows[idx[i]].dataset] = by_ds.get(prep.rows[idx[i]].dataset, 0) + 1
        out[split] = {"n": len(idx), "near_duplicates": int(hit.sum()), "same_hop_label": int(sum(same_label)),
                      "by_dataset": by_ds,
                      "examples": [[prep.rows[idx[i]].question, prep.rows[tr[arg[i]]].question,
                                    round(float(best[i]), 3)]
                                   for i in np.flatnonzero(hit)[:5]]}
    return out


def speed(clf: ComplexityClassifier, prep: Prepared, encoder: MiniLMEncoder) -> dict[str, Any]:
    test = np.flatnonzero(prep.mask("test"))[:1000]
    qs = [prep.rows[i].question for i in test]
    vecs = prep.embeddings[test]
    for q, v in zip(qs[:50], vecs[:50], strict=True):  # warm-up
        clf.predict(q, v)
    per = []
    for q, v in zip(qs, vecs, strict=True):
        t = time.perf_counter()
        clf.predict(q, v)
        per.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    clf.predict_batch(qs, vecs)
    batch_s = time.perf_counter() - t
    emb = []
    for q in qs[:200]:
        t = time.perf_counter()
        encoder.encode_query(q)
        emb.append((time.perf_counter() - t) * 1000)
    return {"n": len(qs), "classify_ms_mean": statistics.fmean(per), "classify_ms_p50": float(np.percentile(per, 50)),
            "classify_ms_p95": float(np.percentile(per, 95)), "batch_questions_per_s": len(qs) / batch_s,
            "embed_query_ms_mean": statistics.fmean(emb), "embed_query_ms_p50": float(np.percentile(emb, 50))}


# ---------------------------------------------------------------- plots


def plots(prep: Prepared, clf: ComplexityClassifier) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    test_ds = prep.mask("test", source="dataset")
    test = prep.mask("test")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    for ax, calibrated in zip(axes, (False, True), strict=True):
        _, _, hp, hc = model_outputs(clf, prep, test_ds, calibrated=calibrated)
        b = reliability_bins(hc, hp == prep.hop_y[test_ds])
        centers = (b.lower + b.upper) / 2
        ok = b.count > 0
        ax.bar(centers[ok], b.accuracy[ok], width=1 / 15, edgecolor="black", alpha=0.7, label="accuracy")
        ax.plot([0, 1], [0, 1], "k--", label="perfect calibration")
        ax.plot(centers[ok], b.confidence[ok], "o", color="crimson", label="mean confidence in bin")
        m = classification_metrics(prep.hop_y[test_ds], hp, hc, ("one", "multi"))
        ax.set_title(f"hop head, dataset test rows, {'after' if calibrated else 'before'} temperature\n"
                     f"ECE {m['ece']:.3f}, n={m['n']}")
        ax.set_xlabel("confidence (15 bins)")
        ax.set_ylabel("accuracy")
        ax.set_xlim(0.45, 1.0)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "classifier_reliability.png", dpi=110)
    plt.close(fig)

    label, _, hp, _ = model_outputs(clf, prep, test)
    y3 = prep.three_y[test]
    silver = y3 >= 0
    ds = np.array([r.source == "dataset" for r, m in zip(prep.rows, test, strict=True) if m])
    c3 = np.zeros((3, 3), int)
    np.add.at(c3, (y3[silver], label[silver]), 1)
    c_ds = np.zeros((2, 3), int)
    np.add.at(c_ds, (prep.hop_y[test][ds], label[ds]), 1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, mat, ylabels, title in (
        (axes[0], c3, COMPLEXITIES, "silver three-way test rows"),
        (axes[1], c_ds, ("one_hop", "multi_hop"), "dataset-derived test rows"),
    ):
        ax.imshow(mat / np.clip(mat.sum(axis=1, keepdims=True), 1, None), cmap="Blues", vmin=0, vmax=1)
        for i in range(mat.shape[0]):
            for j in range(mat.shape[1]):
                ax.text(j, i, str(mat[i, j]), ha="center", va="center")
        ax.set_xticks(range(3), COMPLEXITIES)
        ax.set_yticks(range(len(ylabels)), ylabels)
        ax.set_xlabel("predicted (calibrated model)")
        ax.set_ylabel("gold")
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(OUT / "classifier_confusion.png", dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _t3_rows(t3: dict[str, Any], key: str, classes: tuple[str, ...]) -> list[str]:
    lines = ["| system | n | accuracy | macro-F1 | " + " | ".join(f"recall {c}" for c in classes)
             + " | ECE | RAA |", "|---" * (6 + len(classes)) + "|"]
    for name in ("random", "majority", "rules", "uncalibrated", "calibrated"):
        m = t3[name][key]
        lines.append(f"| {name} | {m['n']} | {_pct(m['accuracy'])} | {_pct(m['macro_f1'])} | "
                     + " | ".join(_pct(m["recall"][c]) for c in classes)
                     + f" | {_pct(m['ece'])} | {_pct(m['raa'])} |")
    return lines


def write_report(r: dict[str, Any]) -> None:
    t3 = r["table3_test"]
    cal, unc = t3["calibrated"], t3["uncalibrated"]
    worst_down = max(cal["confident_downward"]["all_multi_hop"], r["stress"]["all"]["confident_downward"])
    L: list[str] = [
        "# Complexity classifier benchmark", "",
        f"Command: `{COMMAND}` (evaluates the shipped artifact `src/amsrag/data/classifier/`; "
        f"retrain it with `amsrag classifier train --data ../shared/data --out src/amsrag/data/classifier`).", "",
        f"Training data sha256 `{r['data_sha256']}` ({r['rows']} labelled questions; the artifact records the same "
        f"hash: {r['artifact_matches_data']}). Machine: 2 shared cores, encoder and BLAS on 1 thread. All numbers "
        "in %, on the **test** split unless marked *cal*.", "",
        "## Targets", "",
        "| target | measured | met |", "|---|---|---|",
        f"| one_hop vs multi_hop accuracy on dataset-derived test rows ≥ 90% | {_pct(cal['hop_dataset']['accuracy'])} "
        f"| {'yes' if cal['hop_dataset']['accuracy'] >= 0.9 else 'no'} |",
        f"| three-class accuracy on silver test rows ≥ 55% (majority baseline "
        f"{_pct(t3['majority']['silver_three_way']['accuracy'])}) | {_pct(cal['silver_three_way']['accuracy'])} "
        f"| {'yes' if cal['silver_three_way']['accuracy'] >= 0.55 else 'no'} |",
        f"| hop ECE after calibration ≤ 3% | {_pct(cal['hop_dataset']['ece'])} (before: "
        f"{_pct(unc['hop_dataset']['ece'])}) | {'yes' if cal['hop_dataset']['ece'] <= 0.03 else 'no'} |",
        f"| confident-downward (multi_hop predicted cheaper, alpha ≥ 0.90) ≤ 5% | "
        f"{_pct(cal['confident_downward']['all_multi_hop'])} of {cal['confident_downward']['n_multi_hop']} test "
        f"multi_hop rows; stress set {_pct(r['stress']['all']['confident_downward'])} of {r['stress']['all']['n']} "
        f"| {'yes' if worst_down <= 0.05 else 'no'} |",
        f"| classification ≤ 1 ms/query beyond the shared embedding | {r['speed']['classify_ms_mean']:.3f} ms mean, "
        f"{r['speed']['classify_ms_p95']:.3f} ms p95 | {'yes' if r['speed']['classify_ms_p95'] <= 1 else 'no'} |", "",
        "## Design", "",
        "Two heads on the shared MiniLM query embedding (384-d) plus 20 cheap features (comparison patterns, "
        "relative clauses, possessives, capitalised spans, years, relation words, wh-type), each a scikit-learn "
        "`LogisticRegression(class_weight=\"balanced\", random_state=13)` on standardised inputs:",
        "- **hop head** p_h = p(multi_hop): trained on every train row's hop label (dataset-derived, silver B/C "
        f"overriding; C = {r['train_config']['hop_c']}), temperature-scaled on the dataset-derived cal rows;",
        "- **knowledge head** p_k = p(zero_hop): trained on the silver A/B/C train rows only (FLAN-T5-XL's labels; "
        f"C = {r['train_config']['knowledge_c']}), temperature-scaled on the silver cal rows;",
        f"- **gate**: zero_hop only when p_k ≥ tau = {r['calibration']['tau']} (tau maximises silver three-way "
        "accuracy on the cal split with the cal confident-downward rate ≤ 5%; stored as a raw-logit threshold, so "
        "calibration never moves a decision);",
        "- **combination**: z = p_k if the gate is open else 0; p(zero_hop) = z, p(one_hop) = (1−z)(1−p_h), "
        "p(multi_hop) = (1−z)·p_h; label = argmax, alpha = max. Below the gate zero_hop is not an available route, "
        "so alpha is the hop head's calibrated confidence — the number the router acts on.",
        f"- temperatures: hop T = {r['calibration']['hop_params']['temperature'][0]:.3f}, knowledge T = "
        f"{r['calibration']['knowledge_params']['temperature'][0]:.3f}.", "",
        "## Data (class counts per split)", "",
        "| split | hop: one_hop | hop: multi_hop | silver: zero_hop | silver: one_hop | silver: multi_hop |",
        "|---|---|---|---|---|---|",
    ]
    counts = r["counts"]
    for s in ("train", "cal", "test"):
        h, s3 = counts[f"{s}/hop"], counts[f"{s}/silver3"]
        L.append(f"| {s} | {h.get('one_hop', 0)} | {h.get('multi_hop', 0)} | {s3.get('zero_hop', 0)} | "
                 f"{s3.get('one_hop', 0)} | {s3.get('multi_hop', 0)} |")
    L += ["", "Per source (rows by data set and label source; dataset-derived rows capped at 5,000 per data set "
          "before the split, by a seeded hash order):", "", "| data set:source | train | cal | test |",
          "|---|---|---|---|"]
    keys = sorted(counts["train/dataset"])
    for k in keys:
        L.append(f"| {k} | {counts['train/dataset'].get(k, 0)} | {counts['cal/dataset'].get(k, 0)} | "
                 f"{counts['test/dataset'].get(k, 0)} |")
    lk = r["leakage"]
    L += ["", f"Near-duplicate check (MiniLM cosine ≥ 0.95 to a train question): cal {lk['cal']['near_duplicates']} "
          f"of {lk['cal']['n']}, test {lk['test']['near_duplicates']} of {lk['test']['n']} "
          f"(same hop label in {lk['test']['same_hop_label']}; by data set {lk['test']['by_dataset']}). "
          "Examples (test, "
          "train, cosine):", ""]
    L += [f"- {a!r} / {b!r} ({c})" for a, b, c in lk["test"]["examples"]]
    L += ["", "## Table 3 form", "", "### (a) three classes, silver-labelled test rows", ""]
    L += _t3_rows(t3, "silver_three_way", COMPLEXITIES)
    L += ["", f"Labelling every silver row with its data set's own hop count (never zero_hop) scores "
          f"{_pct(t3['dataset_hop_oracle_on_silver'])}: FLAN-T5-XL's silver labels call many HotpotQA/MuSiQue/2Wiki "
          "questions B (one retrieval round sufficed) or A (answered or guessed without retrieval), so a model that "
          "gets the hop structure right is held below the one_hop majority on these rows. ECE on this table is the "
          "alpha of the predicted class against silver correctness; alpha is the hop confidence, hence the large "
          "values.", "", "### (b) one_hop vs multi_hop, dataset-derived test rows", ""]
    L += _t3_rows(t3, "hop_dataset", ("one_hop", "multi_hop"))
    L += ["", "The hop decision of a system is its label when one_hop / multi_hop, else (zero_hop) the larger of its "
          "one_hop and multi_hop probabilities.", "", "### (c) per source data set (calibrated model, test split)", "",
          "| data set | n | hop accuracy | hop acc. (dataset rows) | predicted zero / one / multi | silver n | "
          "silver acc. | confident-downward (multi_hop rows) |", "|---|---|---|---|---|---|---|---|"]
    for ds, m in cal["per_dataset"].items():
        p = m["predicted"]
        L.append(f"| {ds} | {m['n']} | {_pct(m['hop_accuracy'])} | {_pct(m['hop_accuracy_dataset_rows'])} | "
                 f"{p.get('zero_hop', 0)} / {p.get('one_hop', 0)} / {p.get('multi_hop', 0)} | {m['silver_n']} | "
                 f"{_pct(m['silver_accuracy'])} | {_pct(m['confident_downward'])} ({m['n_multi_hop']}) |")
    sd, dd = cal["silver_three_way"]["direction"], cal["dataset_direction"]
    cd = cal["confident_downward"]
    L += ["", "### (d) direction of errors (calibrated model, test split)", "",
          "| rows | upward (costlier than needed) | downward (cheaper: evidence lost) |", "|---|---|---|",
          f"| silver three-way ({cal['silver_three_way']['n']}) | {_pct(sd['upward'])} ({sd['upward_n']}) | "
          f"{_pct(sd['downward'])} ({sd['downward_n']}) |",
          f"| dataset-derived, three-way label vs hop label ({cal['hop_dataset']['n']}) | {_pct(dd['upward'])} "
          f"({dd['upward_n']}) | {_pct(dd['downward'])} ({dd['downward_n']}) |", "",
          f"Confident-downward (multi_hop rows predicted zero_hop or one_hop with alpha ≥ {CONFIDENT:.2f}): "
          f"{_pct(cd['all_multi_hop'])} of all {cd['n_multi_hop']} multi_hop test rows, "
          f"{_pct(cd['dataset_multi_hop'])} of the dataset-derived ones, {_pct(cd['silver_C'])} of the silver C rows "
          f"({cal['silver_three_way']['confusion'][2][2] if cal['silver_three_way']['n'] else 0} of "
          f"{sum(cal['silver_three_way']['confusion'][2]) if cal['silver_three_way']['n'] else 0} silver C rows "
          "predicted multi_hop).", "",
          "### Stress set: surface-simple multi-hop questions", "",
          "Brief templated questions built from 2WikiMultihopQA evidence triples (new texts: \"Date of birth of the "
          "performer of Get Low?\", \"Same country of citizenship for X and Y?\") and the multi_hop test questions "
          "of ≤ 10 words.", "", "| kind | n | predicted multi_hop | predicted cheaper | confident-downward |",
          "|---|---|---|---|---|"]
    for kind, m in r["stress"].items():
        if kind != "examples_cheaper":
            L.append(f"| {kind} | {m['n']} | {_pct(m['predicted_multi_hop'])} | {_pct(m['cheaper'])} | "
                     f"{_pct(m['confident_downward'])} |")
    L += ["", "Some stress questions predicted cheaper:", ""]
    L += [f"- {e['question']!r} → {e['label']} (alpha {e['alpha']:.2f}; {e['kind']})"
          for e in r["stress"]["examples_cheaper"]]
    L += ["", "## Two heads vs a single head (calibration split)", "",
          "Single heads: one multinomial logistic regression over the same inputs, temperature-scaled on the silver "
          "cal rows, C picked on the cal split from {0.002, 0.01, 0.05, 0.2} for the best silver accuracy (a favour "
          "the two-head model does not get).", "",
          "| system | C | silver three-way acc. | silver macro-F1 | hop acc. (dataset rows) | hop ECE | "
          "confident-downward |", "|---|---|---|---|---|---|---|"]
    for name, m in r["single_heads_cal"].items():
        L.append(f"| {name} | {m['C'] if m['C'] is not None else '–'} | {_pct(m['silver_accuracy'])} | "
                 f"{_pct(m['silver_macro_f1'])} | {_pct(m['hop_accuracy_dataset'])} | {_pct(m['hop_ece'])} | "
                 f"{_pct(m['confident_downward'])} |")
    L += ["", "## Ablations (calibration split)", "", "| head | metric | value |", "|---|---|---|"]
    for name, m in r["ablations_cal"].items():
        for k, v in m.items():
            L.append(f"| {name} | {k} | {_pct(v)} |")
    L += ["", "## Calibration methods (hop head, dataset-derived test rows; fitted on the cal split)", "",
          "| method | accuracy | ECE | RAA | NLL |", "|---|---|---|---|---|"]
    for name, m in r["calibration_methods"].items():
        L.append(f"| {name} | {_pct(m['accuracy'])} | {_pct(m['ece'])} | {_pct(m['raa'])} | {m['nll']:.4f} |")
    s = r["speed"]
    L += ["", "Platt and isotonic are top-label variants (they map |logit| to the confidence of the predicted "
          "class, clipped to ≥ 0.5), so no method changes a decision; `amsrag classifier calibrate --method` "
          "switches the shipped artifact's method.", "",
          "## Speed", "",
          f"- classification beyond the shared embedding (`predict(question, query_vector)`, features + two heads, "
          f"{s['n']} test questions one by one): mean {s['classify_ms_mean']:.3f} ms, p50 {s['classify_ms_p50']:.3f} "
          f"ms, p95 {s['classify_ms_p95']:.3f} ms;",
          f"- batch (`predict_batch` with vectors): {s['batch_questions_per_s']:.0f} questions/s;",
          f"- for scale, embedding one query with MiniLM int8: mean {s['embed_query_ms_mean']:.2f} ms.", "",
          "## Figures", "", "![reliability](classifier_reliability.png)", "", "![confusion](classifier_confusion.png)",
          ""]
    (OUT / "classifier.md").write_text("\n".join(L), encoding="utf-8")


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    clf = ComplexityClassifier.load(shipped_artifact_dir())
    config = TrainConfig(**clf.meta["train_config"])
    data = build_labelled_data(args.data, cap=config.cap, seed=config.seed)
    encoder = MiniLMEncoder()
    clf._encoder = encoder
    prep = prepare(data, encoder)
    print("data ready", len(data.rows), flush=True)
    result: dict[str, Any] = {
        "command": COMMAND, "data_sha256": data.sha256, "rows": len(data.rows),
        "artifact_matches_data": clf.meta["training_data"]["sha256"] == data.sha256,
        "train_config": clf.meta["train_config"], "calibration": clf.meta["calibration"], "counts": data.counts(),
    }
    result["table3_test"] = table3(prep, "test", clf)
    print("table 3 done", flush=True)
    result["single_heads_cal"] = single_heads(prep, clf)
    result["ablations_cal"] = ablations(prep, config)
    result["calibration_methods"] = calibration_methods(clf, prep)
    result["stress"] = stress_eval(clf, stress_questions(args.data, prep), encoder)
    result["leakage"] = leakage(prep)
    result["speed"] = speed(clf, prep, encoder)
    print("plots", flush=True)
    plots(prep, clf)
    (OUT / "classifier.json").write_text(json.dumps(_jsonable(result), indent=1) + "\n", encoding="utf-8")
    write_report(result)
    print(f"wrote {OUT / 'classifier.md'}", flush=True)


if __name__ == "__main__":
    main()
