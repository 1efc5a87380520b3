"""Fit the chain calibration from one `amsrag eval` run, and replay the calibrated answer policy on others.

`fit`: the `full` rows of a run on calibration questions (disjoint from every evaluated question) give, per
multi-step question whose chain ran, the chain's features and whether its answer and the plain reader's are
right; `learn.decomposer.calibrate.fit` turns them into `chain.json` (the logistic model and the threshold per
plan type). `replay`: the policy `pipeline.compose.Composer` applies with that file is a function of what a
run's `predictions.jsonl` records of each chain (its steps' confidences, its answer, the plain reader's answer
and confidence), so it is replayed on evaluation runs made without the file, and scored.

    python benchmarks/compose_policy.py fit --run CAL_RUN [--run …] --exclude EVAL_RUN [--exclude …] \
        --coverage 0.9 --out src/amsrag/data/decomposer/chain.json
    python benchmarks/compose_policy.py replay --run EVAL_RUN --calibration src/amsrag/data/decomposer/chain.json
    (or, within one run: fit --half cal, replay --half test)
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from amsrag.decompose.calibration import ChainCalibration, chain_features
from amsrag.decompose.plan import Plan
from amsrag.generate.base import ABSTAIN
from amsrag.generate.metrics import exact_match, f1_score
from amsrag.learn.decomposer.calibrate import fit


def _plan(d: dict[str, Any]) -> Plan:
    return Plan(d["kind"], {k: float(v) for k, v in d.get("probs", {}).items()})


def ran(chain: dict[str, Any] | None) -> bool:
    """The chain ran (a multi-step plan confident enough to be executed)."""
    if not chain or chain["plan"]["kind"] == "single":
        return False
    return not str(chain.get("reason", "")).startswith("plan confidence")


def features(chain: dict[str, Any]) -> list[float]:
    return chain_features(_plan(chain["plan"]), [s["confidence"] for s in chain["steps"]], chain["answer"],
                          chain["plain_answer"], float(chain.get("plain_confidence") or 0.0),
                          float(chain["confidence"] if chain.get("executor_confidence") is None
                                else chain["executor_confidence"]))


def answered(chain: dict[str, Any]) -> bool:
    return bool(chain["answer"]) and chain.get("failed_step") is None


def half_of(question: str) -> str:
    """A stable half of a run's questions by hash: `cal` or `test`."""
    return "cal" if int(hashlib.sha256(question.encode("utf-8")).hexdigest()[:8], 16) % 2 == 0 else "test"


def rows_of(run: Path, system: str, half: str = "all") -> list[dict[str, Any]]:
    lines = (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines)
            if r["system"] == system and (half == "all" or half_of(r["question"]) == half)]


def cmd_fit(args: argparse.Namespace) -> None:
    held_out = {r["question"] for run in args.exclude for r in rows_of(run, "full")}
    rows: dict[str, dict[str, Any]] = {}
    for run in args.run:  # a question in several calibration runs counts once (its first run's row)
        for r in rows_of(run, "full", args.half):
            if r["question"] not in held_out:
                rows.setdefault(r["question"], r)
    records = []
    for r in rows.values():
        chain = r.get("chain")
        if not ran(chain):
            continue
        assert chain is not None
        records.append({"question": r["question"], "kind": chain["plan"]["kind"], "answered": answered(chain),
                        "features": features(chain),
                        "chain_f1": f1_score(chain["answer"], r["answers"]) if answered(chain) else 0.0,
                        "plain_f1": f1_score(chain["plain_answer"], r["answers"]) if chain["plain_answer"] else 0.0,
                        "plain_confidence": float(chain.get("plain_confidence") or 0.0)})
    card = fit(records, args.coverage)
    card.update({"questions": len(rows), "multi_step": len(records), "half": args.half,
                 "runs": [{"run": str(run), "predictions_sha256":
                           hashlib.sha256((run / "predictions.jsonl").read_bytes()).hexdigest()} for run in args.run],
                 "excluded_questions_of": [str(run) for run in args.exclude], "excluded": len(held_out),
                 "command": "python benchmarks/compose_policy.py fit --run CAL_RUN [--run …] --exclude EVAL_RUN "
                            f"[…] --coverage {args.coverage} --out chain.json (CAL_RUN: amsrag eval --systems "
                            "full-plain,full --no-audit on calibration questions; EVAL_RUN: the runs it is judged on)"})
    args.out.write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(card["metrics"], indent=1))
    print(f"thresholds {card['thresholds']}; wrote {args.out}")


def policy(r: dict[str, Any], cal: ChainCalibration) -> str:
    """The answer `Composer.compose` gives with `cal` for a `full` row (its recorded prediction otherwise)."""
    chain = r.get("chain")
    if not ran(chain):
        return str(r["prediction"])
    assert chain is not None
    plain_conf = float(chain.get("plain_confidence") or 0.0)
    candidate = chain["plain_answer"]
    p_chain = cal.probability(features(chain)) if answered(chain) else -1.0
    threshold = cal.thresholds.get(chain["plan"]["kind"])
    if answered(chain) and p_chain >= plain_conf:
        return ABSTAIN if threshold is not None and p_chain < threshold else str(chain["answer"])
    if threshold is not None and candidate:
        return ABSTAIN if plain_conf < threshold else str(candidate)
    return str(r["prediction"])


def cmd_replay(args: argparse.Namespace) -> None:
    cal = ChainCalibration.load(args.calibration.parent)
    if cal is None:
        raise SystemExit(f"{args.calibration}: not found")
    out_rows = []
    for r in rows_of(args.run, "full", args.half):
        answer = policy(r, cal)
        abst = answer == ABSTAIN
        out_rows.append({**r, "system": "full-calibrated", "prediction": answer, "abstained": abst,
                         "em": 0.0 if abst else exact_match(answer, r["answers"]),
                         "f1": 0.0 if abst else f1_score(answer, r["answers"])})
    target = args.run / "predictions.jsonl"
    keep = [line for line in target.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["system"] != "full-calibrated"]
    target.write_text("\n".join([*keep, *(json.dumps(r, ensure_ascii=False) for r in out_rows)]) + "\n",
                      encoding="utf-8")
    print(f"replayed {len(out_rows)} rows as full-calibrated into {target}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--run", type=Path, action="append", required=True, help="a calibration run (repeatable)")
    f.add_argument("--exclude", type=Path, action="append", default=[],
                   help="a run whose questions are left out of the fit (the evaluated ones; repeatable)")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--coverage", type=float, default=0.9)
    f.add_argument("--half", choices=("all", "cal", "test"), default="all",
                   help="fit on one hash half of the run's questions (replay on the other)")
    r = sub.add_parser("replay")
    r.add_argument("--run", type=Path, required=True)
    r.add_argument("--calibration", type=Path, required=True)
    r.add_argument("--half", choices=("all", "cal", "test"), default="all")
    args = ap.parse_args()
    cmd_fit(args) if args.cmd == "fit" else cmd_replay(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
