"""The hop decision with and without the decomposer's plan as evidence (issue 36, item 4).

On real question lists (../shared/data/question_lists: HotpotQA, 2Wiki and MuSiQue dev; StrategyQA; MoreHopQA;
NQ and SQuAD as single-hop), for the shipped classifier alone and with the plan (`pipeline.compose.plan_route`):
- hop accuracy: multi-hop lists routed multi_hop, single-hop lists routed one_hop;
- confident-downward: a multi-hop question routed one_hop with alpha >= 0.9.
Leave one data set out: for 2Wiki, MuSiQue, HotpotQA and StrategyQA the plan comes from a decomposer fitted
without that data set (`learn.decomposer.train.fit`); MoreHopQA, NQ and SQuAD questions are in no
decomposer training, and every question of the decomposer's own training rows is dropped from the lists.
A sweep of (route_down_alpha, route_up_probability) is measured on the decomposer's calibration rows
(a split disjoint from the lists' questions) and the defaults are reported against it.

    python benchmarks/router_plan.py --per-set 300 --out docs/benchmarks/router-plan.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

from amsrag.classify import ComplexityClassifier
from amsrag.config import DecomposeConfig, cache_root
from amsrag.decompose.plan import Plan
from amsrag.decompose.tagger import DecomposerModel, TaggerDecomposer
from amsrag.embed.encoder import MiniLMEncoder
from amsrag.ingest.datasets import default_data_dir
from amsrag.learn.decomposer.data import load_all, split_of
from amsrag.learn.decomposer.train import encode_rows, excluded_questions, fit
from amsrag.pipeline.compose import plan_route
from amsrag.route.router import retrieval_class
from amsrag.text.normalise import normalise_question

LISTS = {  # name -> (file, hop, decomposer data set left out for it)
    "hotpotqa": ("question_lists/honesty_hq_dev.jsonl", "multi_hop", "hotpotqa"),
    "2wikimultihopqa": ("question_lists/honesty_2wikimultihopqa_dev.jsonl", "multi_hop", "2wikimultihopqa"),
    "musique": ("question_lists/honesty_musique_dev.jsonl", "multi_hop", "musique"),
    "strategyqa": ("strategyqa/aos_strategyqa_train.json", "multi_hop", "strategyqa"),
    "morehopqa": ("morehopqa/alabnii_morehopqa_final_150samples.json", "multi_hop", None),
    "nq": ("question_lists/honesty_nq_test.jsonl", "one_hop", None),
    "squad": ("question_lists/honesty_squad_dev.jsonl", "one_hop", None),
}
CONFIDENT = 0.9


def read_questions(path: Path) -> list[str]:
    if path.suffix == ".json":
        return [str(r["question"]) for r in json.loads(path.read_text(encoding="utf-8"))]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [str(json.loads(line)["question"]) for line in f if line.strip()]


def decide(clf: ComplexityClassifier, encoder: MiniLMEncoder, dec: TaggerDecomposer, questions: list[str],
           cfg: DecomposeConfig) -> list[tuple[str, float, str, float, Plan]]:
    vectors = encoder.encode(questions)
    out = []
    for q, pred in zip(questions, clf.predict_batch(questions, vectors), strict=True):
        label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, False)
        plan = dec.decompose(q)
        routed = plan_route(label, alpha, plan, cfg)
        out.append((label, alpha, routed[0], routed[1], plan))
    return out


def rates(rows: list[tuple[str, float, str, float, Plan]], hop: str, cfg: DecomposeConfig) -> dict[str, float]:
    before = [(lab, a) for lab, a, _, _, _ in rows]
    after = [plan_route(lab, a, plan, cfg) for lab, a, _, _, plan in rows]
    n = len(rows)

    def summary(decisions: list[tuple[str, float]]) -> dict[str, float]:
        acc = sum(lab == hop for lab, _ in decisions) / n
        down = sum(lab == "one_hop" and a >= CONFIDENT for lab, a in decisions) / n if hop == "multi_hop" else None
        return {"hop_accuracy": round(acc, 4), **({"confident_downward": round(down, 4)} if down is not None else {})}

    return {"n": n, "classifier": summary(before), "with_plan": summary(after),
            "plan_multi_step": round(sum(p.multi_step for *_, p in rows) / n, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--per-set", type=int, default=300)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks/router-plan.json"))
    ap.add_argument("--classifier", type=Path, default=None, help="classifier artifact (default: the shipped one)")
    args = ap.parse_args()
    data = args.data or default_data_dir()
    encoder = MiniLMEncoder()
    clf = ComplexityClassifier.load(args.classifier, encoder=encoder)
    shipped = TaggerDecomposer(DecomposerModel.load(), encoder)
    cfg = DecomposeConfig()
    excluded = excluded_questions(data)
    examples = load_all(data, excluded)
    rows = encode_rows(encoder, examples, cache=cache_root() / "decomposer-states.npz")
    trained = {normalise_question(r.example.question) for r in rows if r.split == "train"}
    lodo_models: dict[str, TaggerDecomposer] = {}
    results: dict[str, object] = {"command": " ".join(["python", *sys.argv]), "defaults": cfg.model_dump(),
                                  "confident": CONFIDENT, "sets": {}}
    for name, (rel, hop, left_out) in LISTS.items():
        qs = [q for q in dict.fromkeys(read_questions(data / rel))
              if normalise_question(q) not in trained and normalise_question(q) not in excluded]
        random.Random(f"{args.seed}:{name}").shuffle(qs)
        qs = qs[: args.per_set]
        dec = shipped
        if left_out is not None:
            if left_out not in lodo_models:
                kept = [r for r in rows if r.example.dataset != left_out and r.split == "train"]
                lodo_models[left_out] = TaggerDecomposer(fit(kept, [], encoder), encoder)
            dec = lodo_models[left_out]
        decided = decide(clf, encoder, dec, qs, cfg)
        results["sets"][name] = {"hop": hop, "decomposer": f"without {left_out}" if left_out else "shipped",
                                 **rates(decided, hop, cfg)}
        print(name, json.dumps(results["sets"][name]), flush=True)
    # the sweep on the decomposer's calibration-split rows (disjoint from the lists above)
    cal = [r for r in rows if r.split == "train" and split_of("cal:" + r.example.question, 0.15) == "test"]
    cal_q = [r.example.question for r in cal]
    cal_hop = ["one_hop" if r.example.kind == "single" else "multi_hop" for r in cal]
    decided = decide(clf, encoder, shipped, cal_q, cfg)
    sweep = []
    for down in (0.9, 0.95, 0.97, 0.99, 1.0):
        for up in (0.5, 0.6, 0.7, 0.8):
            c = DecomposeConfig(route_down_alpha=down, route_up_probability=up)
            routed = [plan_route(lab, a, p, c) for lab, a, _, _, p in decided]
            multi = [i for i, h in enumerate(cal_hop) if h == "multi_hop"]
            single = [i for i, h in enumerate(cal_hop) if h == "one_hop"]
            miss = sum(routed[i][0] == "one_hop" for i in multi) / max(len(multi), 1)
            widen = sum(routed[i][0] == "multi_hop" for i in single) / max(len(single), 1)
            sweep.append({"route_down_alpha": down, "route_up_probability": up,
                          "multi_hop_miss_rate": round(miss, 4), "single_widened": round(widen, 4)})
    results["calibration_sweep"] = {"n": len(cal), "rows": sweep}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
