"""`decompose.min_step_confidence` swept offline on one `amsrag eval` run made with it at 0 (every chain runs to
its end). A chain the run used is given up at threshold t when its least sure step is below t; the plain reader's
answer then stands when its confidence reaches the multi-hop threshold (`generator.multi_hop_threshold`, 0.09).
Run with the threshold at 0.15 on seed 14, the sweep reproduces that run's F1, abstention and precision.

    # an eval index copy whose config.toml has [decompose] min_step_confidence = 0.0
    amsrag eval --index IDX --systems full ... --out RUN
    python benchmarks/step_threshold_sweep.py RUN/predictions.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from amsrag.generate.metrics import f1_score

PLAIN_THRESHOLD = 0.09
THRESHOLDS = (0.0, 0.04, 0.06, 0.08, 0.09, 0.10, 0.12, 0.15, 0.2)


def answer_at(row: dict, t: float) -> str | None:
    """The answer `full` gives at step threshold `t` (None: it abstains)."""
    chain = row.get("chain") or {}
    if chain.get("used") and chain.get("steps") and min(s["confidence"] for s in chain["steps"]) < t:
        plain = float(chain.get("plain_confidence") or 0.0)
        return chain.get("plain_answer") if plain >= PLAIN_THRESHOLD else None
    return None if row["abstained"] else row["prediction"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("predictions", type=Path)
    args = ap.parse_args()
    rows = [json.loads(x) for x in args.predictions.read_text("utf-8").splitlines() if x.strip()]
    rows = [r for r in rows if r["system"] == "full"]
    for t in THRESHOLDS:
        tot: Counter[tuple[str, str]] = Counter()
        for r in rows:
            pred = answer_at(r, t)
            f = f1_score(pred, r["answers"]) if pred else 0.0
            for k in ("all", r["dataset"], "mh" if r["complexity"] == "multi_hop" else "oh"):
                tot[k, "n"] += 1
                tot[k, "f1"] += f
                tot[k, "given"] += pred is not None
                tot[k, "good"] += pred is not None and f >= 0.5
        cells = " ".join(f"{k} {tot[k, 'f1'] / tot[k, 'n']:.3f}" for k in ("all", "hotpotqa", "musique",
                                                                          "2wikimultihopqa") if tot[k, "n"])
        mh = max(tot["mh", "n"], 1)
        print(f"t={t:.2f}  F1 {cells}  multi-hop abstention {1 - tot['mh', 'given'] / mh:.3f} "
              f"precision {tot['mh', 'good'] / max(tot['mh', 'given'], 1):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
