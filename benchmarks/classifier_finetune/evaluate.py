"""Evaluate the fine-tuned two-head MiniLM against the shipped classifier on amsrag's splits, same protocol.

    OMP_NUM_THREADS=1 taskset -c 1 $TORCH_VENV/bin/python evaluate.py   (after prep_data.py and finetune.py runs)

Gate (as amsrag.learn.classifier.train.fit_gate with gate_rows="cal+oof"): knowledge head temperature-scaled on the cal
silver rows; tau in 0.50..0.99 (or never) maximising silver three-way accuracy on cal silver rows + out-of-fold
silver train rows, ties -> higher tau, subject to confident-downward on cal multi_hop rows <= 5%.
Writes bench-cache/classifier-finetune/results.json.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
from sklearn.metrics import roc_auc_score

from amsrag.calibration import ece, fit_temperature

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE.parents[1] / "bench-cache" / "classifier-finetune"  # git-ignored
TAUS = [*np.round(np.arange(0.50, 0.991, 0.01), 2).tolist(), 1.01]
B = 10000


def sig(z):
    return 1 / (1 + np.exp(-z))


def main() -> None:
    d = np.load(OUT / "data.npz")
    meta = json.loads((OUT / "rows.json").read_text())
    split, source, hop_y, y3 = d["split"], d["source"], d["hop_y"], d["three_y"]
    n = len(split)
    yz = (y3 == 0).astype(int)
    m = {s: split == s for s in ("train", "cal", "test")}
    silver = y3 >= 0
    tr_s, ca_s, te_s = m["train"] & silver, m["cal"] & silver, m["test"] & silver
    ca_ds, te_ds = m["cal"] & (source == "dataset"), m["test"] & (source == "dataset")

    full = np.load(OUT / "full.npz")
    ft_zh, ft_zk = np.full(n, np.nan), np.full(n, np.nan)
    ft_zh[full["idx"]], ft_zk[full["idx"]] = full["zh"], full["zk"]
    oof_zh, oof_zk, fold_of = np.full(n, np.nan), np.full(n, np.nan), np.full(n, -1)
    fold_auc, times = [], {"full_train_s": float(full["train_s"]), "full_score_s": float(full["score_s"])}
    for k in range(5):
        f = np.load(OUT / f"fold{k}.npz")
        oof_zh[f["idx"]], oof_zk[f["idx"]], fold_of[f["idx"]] = f["zh"], f["zk"], k
        fold_auc.append(float(roc_auc_score(yz[f["idx"]], f["zk"])))
        times[f"fold{k}_train_s"] = float(f["train_s"])
    assert not np.isnan(oof_zk[tr_s]).any() and not np.isnan(ft_zk[m["cal"] | m["test"]]).any()
    sh_oof = d["shipped_oof_zk"]
    sh_fold_auc = [float(roc_auc_score(yz[fold_of == k], sh_oof[fold_of == k])) for k in range(5)]

    def system(name, zh, zk, zh_oof, zk_oof, fixed_zero_logit=None):
        """zh/zk: logits for cal/test rows; zh_oof/zk_oof: logits for the silver train rows (out of fold)."""
        t_hop = fit_temperature(zh[ca_ds], hop_y[ca_ds])
        t_k = fit_temperature(zk[ca_s], yz[ca_s])

        def labels(zh_, zk_, zl):
            gate = zk_ >= zl
            return np.where(gate, 0, np.where(zh_ >= 0, 2, 1)), gate

        def downward(rows, zl):
            lab, gate = labels(zh[rows], zk[rows], zl)
            z = np.where(gate, sig(zk[rows] / t_k), 0.0)
            ph = sig(zh[rows] / t_hop)
            alpha = np.stack([z, (1 - z) * (1 - ph), (1 - z) * ph], 1).max(1)
            multi = hop_y[rows] == 1
            return float(np.mean((lab[multi] != 2) & (alpha[multi] >= 0.9)))

        def zl_of(tau):
            return np.inf if tau > 1 else t_k * np.log(tau / (1 - tau))

        def acc(zh_, zk_, y, zl):
            return labels(zh_, zk_, zl)[0] == y

        trace = []
        for tau in TAUS:
            zl = zl_of(tau)
            r_cal = acc(zh[ca_s], zk[ca_s], y3[ca_s], zl)
            r_oof = acc(zh_oof[tr_s], zk_oof[tr_s], y3[tr_s], zl)
            trace.append(
                {
                    "tau": tau,
                    "cal": float(r_cal.mean()),
                    "oof": float(r_oof.mean()),
                    "cal+oof": float(np.concatenate([r_cal, r_oof]).mean()),
                    "down_cal": downward(m["cal"], zl),
                }
            )
        ok = [t for t in trace if t["down_cal"] <= 0.05]
        best = max(ok, key=lambda t: (round(t["cal+oof"], 12), t["tau"]))
        best_cal = max(ok, key=lambda t: (round(t["cal"], 12), t["tau"]))
        zl = zl_of(best["tau"]) if fixed_zero_logit is None else fixed_zero_logit
        out = {
            "name": name,
            "tau": best["tau"] if fixed_zero_logit is None else meta["tau"],
            "T_hop": t_hop,
            "T_knowledge": t_k,
            "tau_cal_only_rule": best_cal["tau"],
        }
        out["cv_auc_pooled"] = float(roc_auc_score(yz[tr_s], zk_oof[tr_s]))
        out["cal_auc"] = float(roc_auc_score(yz[ca_s], zk[ca_s]))
        out["test_auc"] = float(roc_auc_score(yz[te_s], zk[te_s]))
        right = {}
        for nm, rows, zh_, zk_ in (("oof_train", tr_s, zh_oof, zk_oof), ("cal", ca_s, zh, zk), ("test", te_s, zh, zk)):
            right[nm] = acc(zh_[rows], zk_[rows], y3[rows], zl)
            out[f"silver_{nm}"] = float(right[nm].mean())
        out["silver_all"] = float(np.concatenate(list(right.values())).mean())
        zl_c = zl_of(best_cal["tau"])
        out["cal_only_rule"] = {
            k: float(acc(zh[r], zk[r], y3[r], zl_c).mean()) for k, r in (("cal", ca_s), ("test", te_s))
        }
        out["hop_cal_dataset"] = float(np.mean((zh[ca_ds] >= 0) == hop_y[ca_ds]))
        out["hop_test_dataset"] = float(np.mean((zh[te_ds] >= 0) == hop_y[te_ds]))
        for s_, rows in (("cal", ca_ds), ("test", te_ds)):  # hop ECE after the cal temperature (dataset rows)
            ph = sig(zh[rows] / t_hop)
            out[f"hop_ece_{s_}"] = float(ece(np.maximum(ph, 1 - ph), ((ph >= 0.5) == hop_y[rows]).astype(float)))
        out["hop_test_silver_rows"] = float(np.mean((zh[te_s] >= 0) == hop_y[te_s]))
        out["zero_rate_cal_all"] = float(np.mean(zk[m["cal"]] >= zl))
        out["down_cal"], out["down_test"] = downward(m["cal"], zl), downward(m["test"], zl)
        hop_lab = np.where(zh >= 0, 2, 1)
        for s, rows in (("cal", ca_s), ("test", te_s)):
            out[f"never_zero_{s}"] = float(np.mean(hop_lab[rows] == y3[rows]))
            out[f"perfect_zero_{s}"] = float(np.mean(np.where(y3[rows] == 0, 0, hop_lab[rows]) == y3[rows]))
        out["trace"] = trace
        return out, right["test"]

    res = {"times": times, "fold_auc_finetune": fold_auc, "fold_auc_shipped": sh_fold_auc}
    shipped, sh_right = system(
        "shipped artifact",
        d["shipped_zh"],
        d["shipped_zk"],
        d["shipped_zh"],
        sh_oof,
        fixed_zero_logit=meta["zero_logit"],
    )
    assert np.array_equal(
        np.where(d["shipped_zk"] >= meta["zero_logit"], 0, np.where(d["shipped_zh"] >= 0, 2, 1))[te_s],
        d["shipped_label"][te_s],
    )
    ft, ft_right = system("fine-tuned MiniLM, both heads", ft_zh, ft_zk, oof_zh, oof_zk)
    mix, mix_right = system(
        "shipped hop head + fine-tuned knowledge head", d["shipped_zh"], ft_zk, d["shipped_zh"], oof_zk
    )

    # blend fixed before any result was seen: sum of the two knowledge logits,
    # each z-scored on the OOF silver train rows
    def z(a, ref):
        return (a - ref[tr_s].mean()) / ref[tr_s].std()

    bl_k = z(ft_zk, oof_zk) + z(d["shipped_zk"], sh_oof)
    bl_oof = z(oof_zk, oof_zk) + z(sh_oof, sh_oof)
    blend, _ = system(
        "fine-tuned both heads, knowledge = blend(fine-tuned, shipped feature head)", ft_zh, bl_k, oof_zh, bl_oof
    )
    res["systems"] = [shipped, ft, mix, blend]
    extra_boot = []
    s2_files = [OUT / "full_seed2.npz", *(OUT / f"fold{k}_s2.npz" for k in range(5))]
    if all(p.is_file() for p in s2_files):  # seed 2: same data, folds and recipe; another torch init/dropout/order
        f2 = np.load(s2_files[0])
        zh2, zk2 = np.full(n, np.nan), np.full(n, np.nan)
        zh2[f2["idx"]], zk2[f2["idx"]] = f2["zh"], f2["zk"]
        oof_zh2, oof_zk2 = np.full(n, np.nan), np.full(n, np.nan)
        res["fold_auc_finetune_seed2"] = []
        for k in range(5):
            f = np.load(s2_files[1 + k])
            oof_zh2[f["idx"]], oof_zk2[f["idx"]] = f["zh"], f["zk"]
            res["fold_auc_finetune_seed2"].append(float(roc_auc_score(yz[f["idx"]], f["zk"])))
            times[f"fold{k}_s2_train_s"] = float(f["train_s"])
        times["full_seed2_train_s"] = float(f2["train_s"])
        s2, s2_right = system("fine-tuned MiniLM, both heads, seed 2", zh2, zk2, oof_zh2, oof_zk2)
        ens, ens_right = system(
            "mean of the two fine-tuned seeds' logits",
            (ft_zh + zh2) / 2,
            (ft_zk + zk2) / 2,
            (oof_zh + oof_zh2) / 2,
            (oof_zk + oof_zk2) / 2,
        )
        res["systems"] += [s2, ens]
        extra_boot = [("fine-tuned seed 2", s2_right), ("mean of two seeds", ens_right)]
    elif s2_files[0].is_file():  # only a second full model: its gate uses the seed-1 OOF rows
        f2 = np.load(s2_files[0])
        zh2, zk2 = np.full(n, np.nan), np.full(n, np.nan)
        zh2[f2["idx"]], zk2[f2["idx"]] = f2["zh"], f2["zk"]
        s2, _ = system("fine-tuned both heads, full model seed 2 (OOF rows: seed-1 folds)", zh2, zk2, oof_zh, oof_zk)
        res["systems"].append(s2)
        times["full_seed2_train_s"] = float(f2["train_s"])

    rng = np.random.default_rng(13)
    te_idx = np.flatnonzero(te_s)
    boot = rng.integers(0, len(te_idx), size=(B, len(te_idx)))
    maj = (y3[te_s] == 1).astype(float)
    res["bootstrap"] = {}
    for name, r in (("fine-tuned", ft_right), ("mix", mix_right), *extra_boot):
        r, s = r.astype(float), sh_right.astype(float)
        diff = (r[boot] - s[boot]).mean(1)
        accs = r[boot].mean(1)
        res["bootstrap"][name] = {
            "acc": float(r.mean()),
            "acc_ci": [float(np.percentile(accs, 2.5)), float(np.percentile(accs, 97.5))],
            "minus_shipped": float((r - s).mean()),
            "minus_shipped_ci": [float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))],
            "minus_majority": float((r - maj).mean()),
            "minus_majority_ci": [
                float(np.percentile((r[boot] - maj[boot]).mean(1), 2.5)),
                float(np.percentile((r[boot] - maj[boot]).mean(1), 97.5)),
            ],
            "p_at_least_55": float(np.mean(accs >= 0.55)),
        }
    # paired bootstrap of the test knowledge AUC difference (fine-tuned minus shipped feature head)
    yt, a, b = yz[te_s], ft_zk[te_s], d["shipped_zk"][te_s]
    diffs = []
    for row in boot[:2000]:
        if 0 < yt[row].sum() < len(row):
            diffs.append(roc_auc_score(yt[row], a[row]) - roc_auc_score(yt[row], b[row]))
    res["test_auc_diff"] = {
        "diff": float(roc_auc_score(yt, a) - roc_auc_score(yt, b)),
        "ci": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))],
    }
    cal_rows = ca_s
    diffs = []
    cb = rng.integers(0, int(cal_rows.sum()), size=(2000, int(cal_rows.sum())))
    yc, ac, bc = yz[cal_rows], ft_zk[cal_rows], d["shipped_zk"][cal_rows]
    for row in cb:
        if 0 < yc[row].sum() < len(row):
            diffs.append(roc_auc_score(yc[row], ac[row]) - roc_auc_score(yc[row], bc[row]))
    res["cal_auc_diff"] = {
        "diff": float(roc_auc_score(yc, ac) - roc_auc_score(yc, bc)),
        "ci": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))],
    }
    (OUT / "results.json").write_text(json.dumps(res, indent=1))
    keys = [
        "tau",
        "cv_auc_pooled",
        "cal_auc",
        "test_auc",
        "silver_oof_train",
        "silver_cal",
        "silver_test",
        "silver_all",
        "hop_cal_dataset",
        "hop_test_dataset",
        "zero_rate_cal_all",
        "down_cal",
        "down_test",
        "never_zero_test",
        "perfect_zero_test",
        "cal_only_rule",
        "tau_cal_only_rule",
    ]
    for s in res["systems"]:
        print(s["name"], {k: (round(s[k], 3) if isinstance(s[k], float) else s[k]) for k in keys})
    print("fold AUC ft", np.round(fold_auc, 3), "mean", round(float(np.mean(fold_auc)), 3))
    if "fold_auc_finetune_seed2" in res:
        print("fold AUC ft seed2", np.round(res["fold_auc_finetune_seed2"], 3))
    print("fold AUC shipped", np.round(sh_fold_auc, 3), "mean", round(float(np.mean(sh_fold_auc)), 3))
    print(json.dumps({k: res[k] for k in ("bootstrap", "test_auc_diff", "cal_auc_diff", "times")}, indent=1))


if __name__ == "__main__":
    main()
