"""The citation-support audit on documentation rows (issue 37): writes docs/benchmarks/audit-docs.json.

    OMP_NUM_THREADS=1 python benchmarks/audit_docs.py --before DIR [--after DIR] [--docs /work/docs_corpora]

Rows: the QA rows of `learn.audit.data` and the documentation rows of `learn.audit.doc_rows` (every set of
`DOC_SETS`; none is a set benchmarks/doc_answers.py evaluates). Reported, for the artifacts `--before` (e.g.
main's, trained on QA rows only) and `--after` (default: the shipped one), in the same run:
- the held-out QA test split: ROC-AUC, ECE, and the paired AUC difference with a 95 % interval from
  resampling its questions (the check that the QA audit holds);
- the documentation rows per set and pooled: support ROC-AUC, flagged share, P(unsupported | flagged),
  P(unsupported | unflagged) and their ratio, mean support per kind of row. An artifact trained with the
  documentation rows has seen every set here (train or cal), so its numbers on them are not held out; the
  held-out number is
- leave one documentation set out: trained with the card's settings on the QA train split and the other
  sets' train rows, calibrated (and the threshold chosen) on the QA cal split and the other sets' cal rows,
  tested on every row of the left-out set; pooled over the sets too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from amsrag.audit.features import FEATURE_NAMES  # noqa: E402
from amsrag.audit.model import SupportModel, shipped_artifact_dir  # noqa: E402
from amsrag.config import cache_root  # noqa: E402
from amsrag.generate.span_reader import SpanReader  # noqa: E402
from amsrag.learn.audit.data import Rows, build_rows  # noqa: E402
from amsrag.learn.audit.doc_rows import DOC_SET_NAMES  # noqa: E402
from amsrag.learn.audit.train import AuditTrainConfig, fit_head  # noqa: E402
from amsrag.learn.evaluator.train import binary_metrics  # noqa: E402
from common import SHARED_DATA  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "audit-docs.json"


def flag_summary(p: np.ndarray, y: np.ndarray, threshold: float) -> dict[str, Any]:
    """Flagged share, P(unsupported | flagged), P(unsupported | unflagged), and their ratio."""
    f = p < threshold
    wrong_flagged = float((1 - y[f]).mean()) if f.any() else None
    wrong_unflagged = float((1 - y[~f]).mean()) if (~f).any() else None
    ratio = wrong_flagged / wrong_unflagged if wrong_flagged is not None and wrong_unflagged else None
    return {"threshold": threshold, "flagged": round(float(f.mean()), 4) if len(f) else None,
            "wrong_flagged": None if wrong_flagged is None else round(wrong_flagged, 4),
            "wrong_unflagged": None if wrong_unflagged is None else round(wrong_unflagged, 4),
            "ratio": None if ratio is None else round(ratio, 2)}


def short(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m[k] for k in ("n", "positives", "roc_auc", "ece")}


def load_scorer(path: Path | None) -> tuple[SupportModel, np.ndarray]:
    """An artifact, and the columns of `FEATURE_NAMES` it reads (an older one reads fewer)."""
    card = json.loads(((path or shipped_artifact_dir()) / "audit.json").read_text(encoding="utf-8"))
    names = card["features"]["names"]
    missing = [n for n in names if n not in FEATURE_NAMES]
    if missing:
        raise SystemExit(f"{path}: features {missing} are not computed by this amsrag")
    return (SupportModel.load(path, (card["features"]["version"], names)),
            np.array([FEATURE_NAMES.index(n) for n in names]))


def score_artifact(model: SupportModel, cols: np.ndarray, rows: Rows) -> dict[str, Any]:
    head = model.heads["full"]
    p = head.support(rows.x[:, cols])
    te = rows.split == "test"
    docs = np.char.startswith(rows.dataset.astype(str), "docs:")
    out: dict[str, Any] = {"qa_test": short(binary_metrics(p[te & ~docs], rows.y[te & ~docs])),
                           "docs_pooled": {**short(binary_metrics(p[docs], rows.y[docs])),
                                           "flag": flag_summary(p[docs], rows.y[docs], head.threshold)},
                           "docs": {}, "kinds": {}}
    for d in sorted(set(rows.dataset[docs].tolist())):
        m = rows.dataset == d
        out["docs"][d] = {**short(binary_metrics(p[m], rows.y[m])), "flag": flag_summary(p[m], rows.y[m],
                                                                                         head.threshold)}
    for k in sorted(set(rows.kind[docs].tolist())):
        m = docs & (rows.kind == k)
        out["kinds"][k] = {"n": int(m.sum()), "mean_support": round(float(p[m].mean()), 4),
                           "flagged": round(float((p[m] < head.threshold).mean()), 4)}
    return out


def paired_qa_auc(before: tuple[SupportModel, np.ndarray], after: tuple[SupportModel, np.ndarray], rows: Rows,
                  reps: int = 1000, seed: int = 13) -> dict[str, Any]:
    """The QA test split's ROC-AUC difference (after - before) with a 95 % interval from resampling its
    questions (both artifacts scored on the same resampled rows)."""
    from sklearn.metrics import roc_auc_score

    te = (rows.split == "test") & ~np.char.startswith(rows.dataset.astype(str), "docs:")
    x, y, q = rows.x[te], rows.y[te], rows.question[te]
    pb, pa = (model.heads["full"].support(x[:, cols]) for model, cols in (before, after))
    by_question = [np.flatnonzero(q == u) for u in np.unique(q)]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(reps):
        idx = np.concatenate([by_question[i] for i in rng.integers(0, len(by_question), len(by_question))])
        if len(np.unique(y[idx])) == 2:
            diffs.append(roc_auc_score(y[idx], pa[idx]) - roc_auc_score(y[idx], pb[idx]))
    d = np.array(diffs)
    return {"questions": len(by_question), "diff": round(float(roc_auc_score(y, pa) - roc_auc_score(y, pb)), 4),
            "ci95": [round(float(np.percentile(d, 2.5)), 4), round(float(np.percentile(d, 97.5)), 4)],
            "sd": round(float(d.std()), 4), "reps": len(d)}


def leave_one_set_out(rows: Rows, config: AuditTrainConfig) -> dict[str, Any]:
    docs = np.char.startswith(rows.dataset.astype(str), "docs:")
    out: dict[str, Any] = {}
    ps, ys = [], []
    for d in sorted(set(rows.dataset[docs].tolist())):
        keep = rows.dataset != d
        tr, cal = keep & (rows.split == "train"), keep & (rows.split == "cal")
        head = fit_head(rows.x[tr], rows.y[tr], rows.x[cal], rows.y[cal], config)
        te = rows.dataset == d
        p = head.support(rows.x[te])
        ps.append(p)
        ys.append(rows.y[te])
        out[d] = {**short(binary_metrics(p, rows.y[te])), "flag": flag_summary(p, rows.y[te], head.threshold)}
    p, y = np.concatenate(ps), np.concatenate(ys)
    out["pooled"] = short(binary_metrics(p, y))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--docs", type=Path, default=Path("/work/docs_corpora"))
    parser.add_argument("--before", type=Path, required=True, help="the artifact to compare against (main's)")
    parser.add_argument("--after", type=Path, default=None, help="default: the shipped artifact")
    args = parser.parse_args()
    t = time.time()
    before, after = load_scorer(args.before), load_scorer(args.after)
    tc = after[0].meta["train_config"]
    config = AuditTrainConfig(**{k: tuple(v) if k == "doc_sets" else v for k, v in tc.items()
                                 if k in AuditTrainConfig.__dataclass_fields__})
    config = replace(config, doc_sets=DOC_SET_NAMES)
    reader = SpanReader.load()
    rows = build_rows(args.data, config.data_config(), reader, cache_root() / "audit-features", docs_dir=args.docs)
    res: dict[str, Any] = {
        "command": "OMP_NUM_THREADS=1 python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                         time.gmtime()),
        "rows_sha256": rows.sha256, "doc_sets": rows.stats.get("doc_sets"),
        "after_trained_on_docs": bool(tc.get("doc_sets")),
        "before": score_artifact(*before, rows), "after": score_artifact(*after, rows),
        "features": {"before": len(before[1]), "after": len(after[1])},
        "qa_paired": paired_qa_auc(before, after, rows),
        "leave_one_set_out": leave_one_set_out(rows, config),
    }
    res["seconds"] = round(time.time() - t, 1)
    OUT.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: res[k] for k in ("before", "after", "qa_paired", "leave_one_set_out")}, indent=1))


if __name__ == "__main__":
    main()
