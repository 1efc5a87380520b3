"""The shipped complexity classifier on Chinese questions: English cues, Chinese cues, neutral embedding.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/zh_classifier.py [--data ../shared/data] \
        [--baseline-features ../main/src/amsrag/classify/features.py] [--out docs/benchmarks/zh-classifier]

- CMRC 2018 cal questions (802, each answered by one paragraph: one_hop): the class distribution in three
  runs of the same shipped model (no retraining): "before" (English-only cues, `english_features`, and the
  MiniLM embedding), "cues" (Chinese cues, `question_features`, MiniLM embedding) and "neutral" (Chinese
  cues, the embedding set to the training mean: what `ComplexityClassifier.predict` does for a Chinese
  question, since MiniLM maps most Han characters to [UNK]).
- 12 hand-written Chinese multi-hop and comparison questions (`ZH_MULTI` below), the set the Chinese cues
  were written against, and a held-out pair of sets written after them and never tuned on (`HELD_OUT_MULTI`,
  `HELD_OUT_ONE`): the same three runs.
- English features bit-identical: `question_features` against the baseline checkout's `features.py`
  on 500 English questions of HotpotQA (migres_hotpot_200) and 2WikiMultiHopQA (the first ones).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ZH_MULTI = [  # bridge (a second passage needed) and comparison questions, written for this check
    "《战国无双3》的开发公司是在哪一年成立的？",
    "《哈利·波特》作者的出生地是哪个城市？",
    "执导《霸王别姬》的导演的妻子是谁？",
    "莱昂德罗·内托效力过的第一支球队的主教练是谁？",
    "拉脱维亚大学所在城市的市长是谁？",
    "周杰伦和林俊杰谁更早出道？",
    "北京大学和清华大学哪个更早成立？",
    "《红楼梦》和《三国演义》的作者都是明朝人吗？",
    "长宁区政府所在街道的面积比静安寺街道大吗？",
    "冯素弗的哥哥建立的国家的都城在哪里？",
    "光荣公司的创始人的妻子叫什么名字？",
    "塞斯·罗根主演的第一部电影的导演是哪国人？",
]
HELD_OUT_MULTI = [  # written after the cues and the neutral embedding were settled; never tuned on
    "《西游记》作者的故乡在今天的哪个省？",
    "发明电话的人出生在哪个国家？",
    "李白和杜甫谁的年纪更大？",
    "上海和北京哪个城市的人口更多？",
    "执导《泰坦尼克号》的导演还拍过哪部科幻电影？",
    "诺贝尔文学奖首位华人得主的母校在哪座城市？",
    "阿里巴巴创始人毕业于哪所大学？",
    "黄河和长江哪条河更长？",
    "《三体》作者出生的城市属于哪个省？",
    "第一个登上月球的人所在国家的首都是哪里？",
    "沃兹尼亚克和乔布斯谁更年长？",
    "清华大学第一任校长的出生地是哪里？",
]
HELD_OUT_ONE = [
    "长江的长度是多少公里？",
    "李白是哪个朝代的诗人？",
    "《红楼梦》的作者是谁？",
    "珠穆朗玛峰的海拔是多少米？",
    "谁发明了电话？",
    "熊猫主要吃什么？",
    "中国的国土面积有多大？",
    "故宫建于哪一年？",
    "鲁迅的原名是什么？",
    "黄河发源于哪里？",
    "TARG 使用什么信号来决定是否需要检索？",
    "把 M 误判为 S 的代价是把 S 误判为 M 的代价的多少倍？",
]
SETS = ("CMRC cal (one_hop)", "hand-written multi-hop / comparison", "held-out multi-hop / comparison",
        "held-out one-hop")
RUNS = ("before", "cues", "neutral")


def _baseline(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_features", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def english_questions(data: Path, n: int) -> list[str]:
    """All of migres_hotpot_200's questions, then 2WikiMultiHopQA's first ones up to `n`."""
    with open(data / "hotpotqa" / "migres_hotpot_200.jsonl", encoding="utf-8") as fh:
        out = [json.loads(line)["question"] for line in fh if line.strip()][:n]
    with open(data / "question_lists" / "honesty_2wikimultihopqa_dev.jsonl", encoding="utf-8") as fh:
        out += [json.loads(line)["question"] for line, _ in zip(fh, range(n - len(out)), strict=False)]
    return out


def distribution(model: Any, vectors: np.ndarray, features: np.ndarray, neutral: bool = False) -> dict[str, Any]:
    from amsrag.classify.model import comparisons
    from amsrag.types import COMPLEXITIES

    blind = np.full(len(vectors), neutral)
    label, probs = model.probabilities(vectors, features, comparison=comparisons(features), blind=blind)
    counts = Counter(COMPLEXITIES[int(i)] for i in label)
    hop = model.hop  # its logit = embedding part + feature part + intercept (standardised inputs)
    x = hop.inputs(vectors, features, blind)
    dim = vectors.shape[1]
    return {"counts": {c: counts.get(c, 0) for c in COMPLEXITIES}, "mean_p_multi": float(probs[:, 2].mean()),
            "hop_logit_embedding_part": float((x[:, :dim] @ hop.coef[:dim]).mean()),
            "hop_logit_feature_part": float((x[:, dim:] @ hop.coef[dim:]).mean()),
            "labels": [COMPLEXITIES[int(i)] for i in label], "p_multi": [float(p) for p in probs[:, 2]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--baseline-features", type=Path,
                        default=ROOT.parent / "main" / "src" / "amsrag" / "classify" / "features.py")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "zh-classifier")
    args = parser.parse_args()
    from amsrag.classify.features import english_features, features_batch
    from amsrag.classify.model import ComplexityClassifier
    from amsrag.ingest.cmrc import load_cmrc

    baseline = _baseline(args.baseline_features)
    english = english_questions(args.data, 500)
    same = bool(np.array_equal(features_batch(english), baseline.features_batch(english)))
    model = ComplexityClassifier.load()
    results: dict[str, Any] = {"english_questions": len(english), "english_bit_identical": same,
                               "hop_intercept": float(model.hop.intercept)}
    vectors = model.encoder.encode(english)
    results["English reference (2Wiki + HotpotQA, multi-hop)"] = distribution(model, vectors, features_batch(english))
    sets = dict(zip(SETS, ([q.question for q in load_cmrc(args.data).split("cal")], ZH_MULTI, HELD_OUT_MULTI,
                           HELD_OUT_ONE), strict=True))
    for name, questions in sets.items():
        vectors = model.encoder.encode(questions)
        before = np.stack([english_features(q) for q in questions])
        results[name] = {"before": distribution(model, vectors, before),
                         "cues": distribution(model, vectors, features_batch(questions)),
                         "neutral": distribution(model, vectors, features_batch(questions), neutral=True)}
        results[name]["predict_labels"] = [p.label for p in model.predict_batch(questions, vectors)]
    write(results, args.out)


def write(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = ["# The shipped complexity classifier on Chinese questions", "", "```",
             "PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/zh_classifier.py --data ../shared/data "
             "--baseline-features BASELINE/features.py", "```", "",
             "Same shipped model (no retraining), three runs: before = English cues only and the MiniLM embedding; "
             "cues = Chinese cues on Chinese questions, MiniLM embedding; neutral = Chinese cues and the embedding "
             "set to the training mean (what `ComplexityClassifier.predict` does for a Chinese question: MiniLM "
             "maps most Han characters to [UNK], so its vector says nothing the classifier learned to read). "
             "The held-out sets were written after the cues and the neutral embedding were settled.", "",
             "Hop logit parts: the mean contribution of the embedding and of the structural features to the hop "
             "head's logit (standardised inputs times coefficients; the intercept is "
             f"{results['hop_intercept']:.2f}).", "",
             "| questions | run | zero_hop | one_hop | multi_hop | mean p(multi_hop) | embedding part | "
             "feature part |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = [(name, run, results[name][run]) for name in SETS for run in RUNS]
    rows.append(("English reference (2Wiki + HotpotQA, multi-hop)", "English",
                 results["English reference (2Wiki + HotpotQA, multi-hop)"]))
    for name, when, d in rows:
        c = d["counts"]
        lines.append(f"| {name} | {when} | {c['zero_hop']} | {c['one_hop']} | {c['multi_hop']} | "
                     f"{d['mean_p_multi']:.3f} | {d['hop_logit_embedding_part']:.2f} | "
                     f"{d['hop_logit_feature_part']:.2f} |")
    for name, questions in (("hand-written multi-hop / comparison", ZH_MULTI),
                            ("held-out multi-hop / comparison", HELD_OUT_MULTI), ("held-out one-hop", HELD_OUT_ONE)):
        lines += ["", f"{name}, p(multi_hop) before -> cues -> neutral (label by `predict`):", ""]
        d = results[name]
        for i, q in enumerate(questions):
            lines.append(f"- {q}: {d['before']['p_multi'][i]:.3f} -> {d['cues']['p_multi'][i]:.3f} -> "
                         f"{d['neutral']['p_multi'][i]:.3f} ({d['predict_labels'][i]})")
    lines += ["", f"English features bit-identical to the baseline on {results['english_questions']} questions: "
              f"{results['english_bit_identical']}"]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
