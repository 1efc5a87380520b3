"""The two answer-acceptance rules of issue 36's precision work, replayed on an `amsrag eval` run's
`predictions.jsonl` made without them (`full` rows): a chain answer that repeats the question's own words yields to
the plain reader (given when its confidence reaches the multi-hop threshold), and an answer to a bridge question
asking for an attribute that names an earlier hop's entity abstains. With `--step-threshold` the run's chains are
first given up below that step confidence (for runs made with `decompose.min_step_confidence` 0).

    python benchmarks/answer_acceptance_replay.py RUN/predictions.jsonl [--step-threshold 0.09]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amsrag.generate.metrics import f1_score
from amsrag.pipeline.chain import agreed
from amsrag.text.questions import asks_for_attribute, question_options, restates_question

PLAIN_THRESHOLD = 0.09


def _plain(chain: dict) -> str | None:
    given = float(chain.get("plain_confidence") or 0.0) >= PLAIN_THRESHOLD
    return (chain.get("plain_answer") or None) if given else None


def answer(row: dict, step_threshold: float, rules: bool) -> str | None:
    """The answer `full` gives (None: it abstains), with or without the two rules."""
    chain = row.get("chain") or {}
    kind = (chain.get("plan") or {}).get("kind")
    steps = chain.get("steps") or []
    pred = None if row["abstained"] else row["prediction"]
    repeats = rules and kind != "comparison" and question_options(row["question"]) is None \
        and restates_question(row["prediction"], row["question"])
    if chain.get("used") and steps and (min(s["confidence"] for s in steps) < step_threshold or repeats):
        pred = _plain(chain)
    if rules and pred and kind == "bridge" and len(steps) >= 2 and asks_for_attribute(row["question"]) \
            and any(s.get("answer") and agreed(pred, s["answer"]) for s in steps[:-1]):
        pred = None
    return pred


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("predictions", type=Path)
    ap.add_argument("--step-threshold", type=float, default=0.0)
    args = ap.parse_args()
    rows = [json.loads(x) for x in args.predictions.read_text("utf-8").splitlines() if x.strip()]
    rows = [r for r in rows if r["system"] == "full"]
    for rules in (False, True):
        f1 = mh = given = good = 0.0
        for r in rows:
            pred = answer(r, args.step_threshold, rules)
            f = f1_score(pred, r["answers"]) if pred else 0.0
            f1 += f
            if r["complexity"] == "multi_hop":
                mh, given, good = mh + 1, given + (pred is not None), good + (pred is not None and f >= 0.5)
        print(f"rules {'on ' if rules else 'off'}  F1 {f1 / len(rows):.3f}  multi-hop abstention "
              f"{1 - given / max(mh, 1):.3f}  precision {good / max(given, 1):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
