"""report.json (DESIGN §9) and report.md (the forms of the paper's Tables 3–6) from one run."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from amsrag.calibration import classification_metrics, hop_view
from amsrag.evaluate.bootstrap import Bootstrap
from amsrag.evaluate.metrics import METRICS, WRONG_F1, flag_quality
from amsrag.evaluate.runner import RunResult, SystemResult
from amsrag.pipeline.systems import system_spec
from amsrag.types import COMPLEXITIES

BASELINE = "A0"
CALLS = "retriever_calls_per_query"
SEARCHES = "index_searches_per_query"
LATENCY = "latency_ms"
TESTED = (*METRICS, CALLS, SEARCHES, LATENCY)  # CIs and p-values


def _mean(values: np.ndarray) -> float | None:
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    return round(float(v.mean()), 4) if v.size else None


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), nd)


def _series(s: SystemResult) -> dict[str, np.ndarray]:
    searches = s.searches if s.searches is not None else s.calls
    return {**s.values, CALLS: s.calls.astype(np.float64), SEARCHES: searches.astype(np.float64),
            LATENCY: s.latency_ms}


def _group(s: SystemResult, mask: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"n": int(mask.sum())}
    for m in METRICS:
        out[m] = _mean(s.values[m][mask])
    out[CALLS] = _mean(s.calls[mask])
    out["latency_ms_mean"] = _mean(s.latency_ms[mask])
    out["route_mix"] = dict(sorted(Counter(st for st, m in zip(s.strategies, mask, strict=True) if m).items()))
    out.update(_abstention(s, mask))
    audit = audit_summary(s, mask)
    if audit is not None:
        out["audit"] = audit
    return out


def _abstention(s: SystemResult, mask: np.ndarray) -> dict[str, Any]:
    """How often it abstained, how often an answer it gave was right (F1 >= 0.5), and the F1 it would
    have had answering every question with its best candidate."""
    abst = s.abstained[mask]
    out: dict[str, Any] = {"abstain_rate": _mean(abst)}
    f1 = s.values["f1"][mask]
    answered = (abst == 0.0) & ~np.isnan(f1)
    out["precision_answered"] = _r(float(np.mean(f1[answered] >= 0.5))) if answered.any() else None
    if s.candidate_f1 is not None:
        out["f1_never_abstaining"] = _mean(s.candidate_f1[mask])
    return out


def audit_summary(s: SystemResult, mask: np.ndarray) -> dict[str, Any] | None:
    """The citation-support audit of the answers given (abstentions are not audited): how many it audited,
    the share it flagged, their mean support, and the flag's precision (flagged and wrong / flagged) and
    recall of the wrong answers (F1 < WRONG_F1). None when the run did not audit."""
    if s.flagged is None or s.support is None:
        return None
    flagged, support, f1 = s.flagged[mask], s.support[mask], s.values["f1"][mask]
    audited = ~np.isnan(flagged) & ~np.isnan(f1)
    q = flag_quality((flagged[audited] == 1.0).tolist(), (f1[audited] < WRONG_F1).tolist())
    given = (s.abstained[mask] == 0.0) & ~np.isnan(f1)
    return {"answers": int(given.sum()), "audited": q["n"], "flagged_share": q["flag_rate"],
            "support_mean": _mean(support[audited]), "wrong": q["target"],
            "flag_precision": q["precision"], "wrong_recall": q["recall"]}


def summarise_system(s: SystemResult, run: RunResult, boot: Bootstrap,
                     baseline: SystemResult | None) -> dict[str, Any]:
    queries = run.queries
    series = _series(s)
    lat = s.latency_ms
    out: dict[str, Any] = {"n": len(queries)}
    for m in METRICS:
        out[m] = _mean(s.values[m])
    out["latency_ms"] = {"mean": _r(lat.mean(), 3), "p50": _r(np.percentile(lat, 50), 3),
                         "p95": _r(np.percentile(lat, 95), 3)}
    out["latency_breakdown_ms"] = {k: _r(v.mean(), 3) for k, v in s.breakdown_ms.items()}
    out[CALLS] = _r(s.calls.mean())
    out[SEARCHES] = _r((s.searches if s.searches is not None else s.calls).mean())
    out["route_mix"] = dict(sorted(Counter(s.strategies).items()))
    ci = {m: boot.ci(v) for m, v in series.items()}
    out["ci95"] = {m: [_r(c[0]), _r(c[1])] if c else None for m, c in ci.items()}
    if baseline is not None:
        base = _series(baseline)
        out["p_vs_A0"] = {m: _r(boot.paired_p(series[m], base[m])) for m in TESTED}
    else:
        out["p_vs_A0"] = {}
    out["n_scored"] = {m: int(np.sum(~np.isnan(s.values[m]))) for m in METRICS}
    out.update(_abstention(s, np.ones(len(queries), dtype=bool)))
    audit = audit_summary(s, np.ones(len(queries), dtype=bool))
    if audit is not None:
        out["audit"] = audit
    out["generate_ms_mean"] = _mean(s.generate_ms)
    if s.answer_path:
        out["answer_path"] = s.answer_path
    classes = np.array([q.complexity or "unknown" for q in queries])
    datasets = np.array([q.dataset or "unknown" for q in queries])
    out["by_class"] = {c: _group(s, classes == c) for c in [*COMPLEXITIES, "unknown"] if (classes == c).any()}
    out["by_dataset"] = {d: _group(s, datasets == d) for d in sorted(set(datasets))}
    return out


def classifier_table(run: RunResult) -> dict[str, Any]:
    """The classifier (Table 3) on the eval queries whose complexity is known."""
    known = np.array([q.complexity in COMPLEXITIES for q in run.queries])
    if not known.any():
        return {"n": 0}
    y = np.array([COMPLEXITIES.index(q.complexity) for q in run.queries if q.complexity in COMPLEXITIES])
    p = run.predictions
    out: dict[str, Any] = {}
    for name, label, probs in (("uncalibrated", p["label_uncalibrated"], p["probs_uncalibrated"]),
                               ("calibrated", p["label"], p["probs"])):
        label, probs = np.asarray(label)[known], np.asarray(probs)[known]
        three = classification_metrics(y, label, probs.max(axis=1), COMPLEXITIES)
        hop_rows = y > 0  # one_hop / multi_hop truth
        hop_pred, hop_conf = hop_view(label, probs)
        hop = classification_metrics((y[hop_rows] == 2).astype(int), hop_pred[hop_rows], hop_conf[hop_rows],
                                     ("one_hop", "multi_hop"))
        out[name] = {"three_way": three, "hop": hop}
    sources = Counter(q.label_source for q in run.queries if q.complexity in COMPLEXITIES)
    out["label_sources"] = dict(sources)
    out["n"] = int(known.sum())
    return out


SINGLE_RETRIEVERS = ("bm25", "dense", "graph")
TARGET_MEASURES = ("ndcg@5", "all_gold@5")


def quality_targets(run: RunResult, boot: Bootstrap, system: str = "full") -> dict[str, Any]:
    """`system` against A0 and against the best single retriever of this run (by overall nDCG@5), overall and
    on the multi_hop questions: the difference of means, its paired-bootstrap 95% CI and p-value."""
    s = run.systems.get(system)
    singles = {n: run.systems[n] for n in SINGLE_RETRIEVERS if n in run.systems}
    if s is None or BASELINE not in run.systems or not singles:
        return {}
    best = max(singles, key=lambda n: float(np.nanmean(singles[n].values["ndcg@5"])))
    multi = np.array([q.complexity == "multi_hop" for q in run.queries])
    out: dict[str, Any] = {"system": system, "best_single": best, "rows": []}
    for group, mask in (("all", np.ones(len(run.queries), dtype=bool)), ("multi_hop", multi)):
        for other in (BASELINE, best):
            for m in TARGET_MEASURES:
                a = np.where(mask, s.values[m], np.nan)
                b = np.where(mask, run.systems[other].values[m], np.nan)
                if np.all(np.isnan(a - b)):
                    continue
                ci = boot.ci(a - b)
                out["rows"].append({"group": group, "against": other, "measure": m, "system": _mean(a),
                                    "other": _mean(b), "diff": _r(float(np.nanmean(a - b))),
                                    "ci95": [_r(ci[0]), _r(ci[1])] if ci else None, "p": _r(boot.paired_p(a, b))})
    return out


def build_report(run: RunResult, config: dict[str, Any], n_passages: int, b: int = 1000,
                 seed: int = 0) -> dict[str, Any]:
    boot = Bootstrap.draw(len(run.queries), b, seed)
    baseline = run.systems.get(BASELINE)
    systems = {name: summarise_system(s, run, boot, baseline) for name, s in run.systems.items()}
    return {
        "quality_targets": quality_targets(run, boot),
        "config": {**config, "bootstrap": {"B": b, "seed": seed, "level": 0.95, "method": "percentile"},
                   "answer_mode": run.answer_mode, "generator": run.generator,
                   "run_seconds": round(run.seconds, 1)},
        "n_queries": len(run.queries),
        "n_passages": n_passages,
        "systems": systems,
        "classifier": classifier_table(run),
        "queries": {"by_class": dict(Counter(q.complexity or "unknown" for q in run.queries)),
                    "by_dataset": dict(Counter(q.dataset or "unknown" for q in run.queries)),
                    "with_gold": sum(bool(q.gold) for q in run.queries),
                    "multi_gold": sum(q.multi_gold for q in run.queries)},
    }


# ---------------------------------------------------------------- markdown


def _f(x: Any, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _ci(s: dict[str, Any], m: str, nd: int = 3) -> str:
    c = s["ci95"].get(m)
    return f"{_f(s.get(m), nd)} [{_f(c[0], nd)}, {_f(c[1], nd)}]" if c else _f(s.get(m), nd)


def _p(s: dict[str, Any], m: str) -> str:
    p = s["p_vs_A0"].get(m)
    return "–" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _components(name: str) -> str:
    base = name.split("@")[0]
    spec = system_spec(base)
    parts = ["adaptive" if spec.adaptive else "fixed (" + "+".join(spec.retrievers) + ")",
             {"ca-rrf": "CA-RRF", "rrf": "RRF", "none": "—", "learned": "learned reranker over CA-RRF",
              "experts": "expert-weighted RRF"}[spec.fusion]]
    if spec.mmr:
        parts.append("MMR")
    if spec.label_only:
        parts.append("label-only routing")
    return ", ".join(parts)


def markdown(report: dict[str, Any], command: str, notes: Sequence[str] = ()) -> str:
    cfg, systems = report["config"], report["systems"]
    q = report["queries"]
    lines = [
        "# Evaluation: systems in one run", "",
        f"Command: `{command}`  ",
        f"Corpus: {report['n_passages']} passages; queries: {report['n_queries']} "
        f"(by data set {q['by_dataset']}; by class {q['by_class']}; {q['with_gold']} with gold passages, "
        f"{q['multi_gold']} with two or more).  ",
        f"Generator: {cfg['generator'] or 'none'} ({cfg['answer_mode']}); k = 5; router thresholds of the index "
        f"theta_high/theta_low = {cfg.get('theta_high')}/{cfg.get('theta_low')}; bootstrap B = "
        f"{cfg['bootstrap']['B']} (percentile 95% CIs, paired two-sided p-values against A0, seed "
        f"{cfg['bootstrap']['seed']}). Run time {cfg['run_seconds']} s.", "",
    ]
    lines += _targets(systems)
    lines += _table_quality_targets(report.get("quality_targets") or {})
    lines += _table_classifier(report.get("classifier", {}))
    lines += ["## End to end (Table 4 form)", "",
              "| system | EM | F1 | nDCG@5 | Recall@5 | all-gold@5 | MRR@10 | calls/query "
              "| latency ms mean / p50 / p95 | p vs A0 (EM, F1, nDCG@5) | routes |",
              "|---|---|---|---|---:|---:|---:|---:|---|---|---|"]
    for name, s in systems.items():
        lat = s["latency_ms"]
        lines.append(
            f"| {name} | {_ci(s, 'em')} | {_ci(s, 'f1')} | {_ci(s, 'ndcg@5')} | {_f(s['recall@5'])} | "
            f"{_f(s['all_gold@5'])} | {_f(s['mrr@10'])} | {_f(s[CALLS], 2)} | {_f(lat['mean'], 1)} / "
            f"{_f(lat['p50'], 1)} / {_f(lat['p95'], 1)} | {_p(s, 'em')}, {_p(s, 'f1')}, {_p(s, 'ndcg@5')} | "
            f"{s['route_mix']} |")
    lines.append("")
    sens = [n for n in systems if n == "full" or n.startswith("full@")]
    if sens:
        lines += ["## Threshold sensitivity (Table 5 form)", "",
                  "| system | EM | F1 | nDCG@5 | all-gold@5 | calls/query | latency ms mean | routes |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for n in sens:
            s = systems[n]
            label = n if "@" in n else f"full (index: {cfg.get('theta_high')}/{cfg.get('theta_low')})"
            lines.append(f"| {label} | {_f(s['em'])} | {_f(s['f1'])} | {_f(s['ndcg@5'])} | {_f(s['all_gold@5'])} | "
                         f"{_f(s[CALLS], 2)} | {_f(s['latency_ms']['mean'], 1)} | {s['route_mix']} |")
        lines.append("")
    abl = [n for n in ("A0", "fixed", "A1", "A2", "A3", "A4", "full", "adaptive-rag", "fixed-learned", "learned",
                       "experts") if n in systems]
    if abl:
        lines += ["## Ablations (Table 6 form)", "",
                  "| system | components | EM | F1 | nDCG@5 | ΔnDCG@5 vs A0 (p) | calls/query | latency ms mean |",
                  "|---|---|---:|---:|---:|---|---:|---:|"]
        base = systems.get("A0")
        for n in abl:
            s = systems[n]
            delta = (f"{s['ndcg@5'] - base['ndcg@5']:+.3f} ({_p(s, 'ndcg@5')})"
                     if base and s["ndcg@5"] is not None and base["ndcg@5"] is not None else "–")
            lines.append(f"| {n} | {_components(n)} | {_f(s['em'])} | {_f(s['f1'])} | {_f(s['ndcg@5'])} | {delta} | "
                         f"{_f(s[CALLS], 2)} | {_f(s['latency_ms']['mean'], 1)} |")
        lines.append("")
    lines += _table_groups(systems, "by_class", "By complexity class (true label)")
    lines += _table_groups(systems, "by_dataset", "By data set")
    lines += _table_abstention(systems)
    lines += _table_audit(systems)
    lines += _table_latency(systems)
    if notes:
        lines += ["## Notes", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(lines)


def _table_classifier(c: dict[str, Any]) -> list[str]:
    if not c.get("n"):
        return []
    lines = ["## Classifier on the evaluation queries (Table 3 form)", "",
             f"{c['n']} queries with a known class (label sources {c['label_sources']}: `silver` = Adaptive-RAG "
             "three-way silver label, `dataset` = the data set's hop count, which never says zero_hop).", "",
             "| view | calibration | n | accuracy % | macro-F1 % | ECE % | RAA % | mean confidence |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for view, title in (("three_way", "three-way"), ("hop", "one vs multi hop")):
        for cal in ("uncalibrated", "calibrated"):
            m = c[cal][view]
            if not m.get("n"):
                continue
            lines.append(f"| {title} | {cal} | {m['n']} | {_pct(m['accuracy'])} | {_pct(m['macro_f1'])} | "
                         f"{_pct(m['ece'])} | {_pct(m['raa'])} | {_f(m['mean_confidence'])} |")
    lines.append("")
    return lines


def _table_groups(systems: dict[str, Any], key: str, title: str) -> list[str]:
    groups = sorted({g for s in systems.values() for g in s[key]})
    if not groups:
        return []
    lines = [f"## {title}", "", "nDCG@5 / F1 / calls per query (n per group: "
             + ", ".join(f"{g} {next(iter(systems.values()))[key].get(g, {}).get('n', 0)}" for g in groups) + ")", "",
             "| system | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for name, s in systems.items():
        cells = []
        for g in groups:
            d = s[key].get(g)
            cells.append("–" if d is None else f"{_f(d['ndcg@5'])} / {_f(d['f1'])} / {_f(d[CALLS], 2)}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _table_abstention(systems: dict[str, Any]) -> list[str]:
    if not any(s.get("abstain_rate") is not None for s in systems.values()):
        return []
    groups = sorted({g for s in systems.values() for g in s["by_dataset"]})
    lines = ["## Abstention", "",
             "Abstained (\"insufficient evidence\", scored 0) / precision of the answers given (F1 ≥ 0.5) / F1 had it "
             "answered every question with its best candidate.", "",
             "| system | all | " + " | ".join(groups) + " |", "|---|---|" + "---|" * len(groups)]

    def cell(d: dict[str, Any] | None) -> str:
        if d is None or d.get("abstain_rate") is None:
            return "–"
        return f"{_f(d['abstain_rate'], 2)} / {_f(d.get('precision_answered'), 2)} / {_f(d.get('f1_never_abstaining'))}"

    for name, s in systems.items():
        lines.append(f"| {name} | {cell(s)} | " + " | ".join(cell(s['by_dataset'].get(g)) for g in groups) + " |")
    lines.append("")
    return lines


def _table_audit(systems: dict[str, Any]) -> list[str]:
    if not any(s.get("audit") for s in systems.values()):
        return []
    lines = ["## Citation-support audit", "",
             f"Every answer given (abstentions are not audited) audited as `Engine.ask` audits it: the share flagged "
             f"(support below the audit's threshold), the mean support, the flag's precision (flagged answers that "
             f"are wrong, F1 < {WRONG_F1}) and its recall of the wrong answers.", "",
             "| system | answers | audited | flagged | mean support | wrong | flag precision | recall of wrong |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in systems.items():
        a = s.get("audit")
        if a:
            lines.append(f"| {name} | {a['answers']} | {a['audited']} | {_f(a['flagged_share'])} | "
                         f"{_f(a['support_mean'])} | {a['wrong']} | {_f(a['flag_precision'])} | "
                         f"{_f(a['wrong_recall'])} |")
    lines.append("")
    return lines


def _table_latency(systems: dict[str, Any]) -> list[str]:
    order = ("embed", "classify", "retrieve:bm25", "retrieve:dense", "retrieve:graph", "fusion", "mmr")
    stages = sorted({k for s in systems.values() for k in s["latency_breakdown_ms"]},
                    key=lambda k: (order.index(k) if k in order else len(order), k))
    lines = ["## Retrieval latency breakdown (mean ms per query; a stage that did not run counts 0)", "",
             "| system | " + " | ".join(stages) + " | total mean |", "|---|" + "---:|" * (len(stages) + 1)]
    for name, s in systems.items():
        b = s["latency_breakdown_ms"]
        lines.append(f"| {name} | " + " | ".join(_f(b.get(k), 2) for k in stages)
                     + f" | {_f(s['latency_ms']['mean'], 2)} |")
    lines.append("")
    return lines


def _table_quality_targets(t: dict[str, Any]) -> list[str]:
    if not t:
        return []
    lines = [f"## {t['system']} against A0 and the best single retriever ({t['best_single']}), overall and on "
             "multi_hop questions", "",
             "| questions | against | measure | other | " + t["system"] + " | difference [95% CI] | p |",
             "|---|---|---|---:|---:|---|---:|"]
    for r in t["rows"]:
        ci = r["ci95"] or [None, None]
        p = r["p"]
        lines.append(f"| {r['group']} | {r['against']} | {r['measure']} | {_f(r['other'])} | {_f(r['system'])} | "
                     f"{r['diff']:+.3f} [{_f(ci[0])}, {_f(ci[1])}] | "
                     f"{'–' if p is None else '<0.001' if p < 0.001 else f'{p:.3f}'} |")
    lines.append("")
    return lines


def _targets(systems: dict[str, Any]) -> list[str]:
    """`full` against A0 in this run: quality at least equal, fewer retriever calls, lower latency."""
    full, a0 = systems.get("full"), systems.get("A0")
    if not full or not a0:
        return []
    lines = ["## full vs A0 (the targets)", "", "| measure | A0 | full | full − A0 or ratio | p (paired bootstrap) |",
             "|---|---:|---:|---:|---:|"]
    for m in ("em", "f1", "ndcg@5", "recall@5", "all_gold@5", "mrr@10"):
        if full[m] is None or a0[m] is None:
            continue
        lines.append(f"| {m} | {_f(a0[m])} | {_f(full[m])} | {full[m] - a0[m]:+.3f} | {_p(full, m)} |")
    calls = (full[CALLS] / a0[CALLS]) if a0[CALLS] else None
    lat = (full["latency_ms"]["mean"] / a0["latency_ms"]["mean"]) if a0["latency_ms"]["mean"] else None
    lines.append(f"| retriever calls / query | {_f(a0[CALLS], 2)} | {_f(full[CALLS], 2)} | ×{_f(calls, 2)} | "
                 f"{_p(full, CALLS)} |")
    if full.get(SEARCHES) is not None and a0.get(SEARCHES):
        lines.append(f"| index searches / query (the graph alone also searches its two seeders) | "
                     f"{_f(a0[SEARCHES], 2)} | {_f(full[SEARCHES], 2)} | ×{_f(full[SEARCHES] / a0[SEARCHES], 2)} | "
                     f"{_p(full, SEARCHES)} |")
    lines.append(f"| retrieval latency mean ms | {_f(a0['latency_ms']['mean'], 1)} | "
                 f"{_f(full['latency_ms']['mean'], 1)} | ×{_f(lat, 2)} | {_p(full, LATENCY)} |")
    lines.append("")
    return lines
