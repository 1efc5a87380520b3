"""Print the REPORT.md tables from bench-cache/classifier-finetune/results.json.   $TORCH_VENV/bin/python table.py"""

import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parents[2] / "bench-cache" / "classifier-finetune"
r = json.loads((OUT / "results.json").read_text())


def p(x):
    return f"{100 * x:.1f}"


print(
    "| system | tau | CV AUC (pooled OOF) | CV AUC (mean of folds) | cal AUC | test AUC | silver 3-way cal | "
    "silver 3-way test | silver OOF-train | hop acc cal (dataset) | hop acc test (dataset) | hop ECE test | "
    "gate open (cal, all rows) | confident-downward cal / test |"
)
print("|" + "---|" * 14)
folds = {
    "shipped artifact": r["fold_auc_shipped"],
    "fine-tuned MiniLM, both heads": r["fold_auc_finetune"],
    "fine-tuned MiniLM, both heads, seed 2": r.get("fold_auc_finetune_seed2"),
}
for s in r["systems"]:
    f = folds.get(s["name"])
    fm = f"{sum(f) / len(f):.3f}" if f else "–"
    print(
        f"| {s['name']} | {s['tau']:.2f} | {s['cv_auc_pooled']:.3f} | {fm} | "
        f"{s['cal_auc']:.3f} | {s['test_auc']:.3f} | "
        f"{p(s['silver_cal'])} | {p(s['silver_test'])} | {p(s['silver_oof_train'])} | {p(s['hop_cal_dataset'])} | "
        f"{p(s['hop_test_dataset'])} | {p(s['hop_ece_test'])} | {p(s['zero_rate_cal_all'])} | "
        f"{p(s['down_cal'])} / {p(s['down_test'])} |"
    )
print()
print("| system | never zero_hop (test) | perfect zero_hop decision (test) | cal-only gate rule: tau, cal, test |")
print("|---|---|---|---|")
for s in r["systems"]:
    c = s["cal_only_rule"]
    print(
        f"| {s['name']} | {p(s['never_zero_test'])} | {p(s['perfect_zero_test'])} | "
        f"{s['tau_cal_only_rule']:.2f}, {p(c['cal'])}, {p(c['test'])} |"
    )
print()
for k, b in r["bootstrap"].items():
    print(
        f"- {k}: test silver {p(b['acc'])} [{p(b['acc_ci'][0])}, {p(b['acc_ci'][1])}]; minus shipped "
        f"{p(b['minus_shipped'])} [{p(b['minus_shipped_ci'][0])}, {p(b['minus_shipped_ci'][1])}]; "
        "minus one_hop majority "
        f"{p(b['minus_majority'])} [{p(b['minus_majority_ci'][0])}, {p(b['minus_majority_ci'][1])}]; "
        f"share of resamples >= 55%: {p(b['p_at_least_55'])}"
    )
for k in ("cal_auc_diff", "test_auc_diff"):
    print(
        f"- {k} (fine-tuned seed 1 minus shipped knowledge head): {r[k]['diff']:+.3f} "
        f"[{r[k]['ci'][0]:+.3f}, {r[k]['ci'][1]:+.3f}]"
    )
print("- fold AUCs: " + "; ".join(f"{k} {[round(x, 3) for x in v]}" for k, v in r.items() if k.startswith("fold_auc")))
print("- times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in r["times"].items()))
