"""The shipped complexity classifier on Chinese questions, before and after the Chinese feature cues.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/zh_classifier.py [--data ../shared/data] \
        [--baseline-features ../main/src/amsrag/classify/features.py] [--out docs/benchmarks/zh-classifier]

- CMRC 2018 cal questions (802, each answered by one paragraph: one_hop): the class distribution with the
  English-only features ("before", `english_features`, what every question got until now) and with
  `question_features` ("after"); same embeddings, same shipped model, no retraining.
- 12 hand-written Chinese multi-hop and comparison questions (`ZH_MULTI` below): the same two runs.
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


def distribution(model: Any, vectors: np.ndarray, features: np.ndarray) -> dict[str, Any]:
    from amsrag.classify.model import comparisons
    from amsrag.types import COMPLEXITIES

    label, probs = model.probabilities(vectors, features, comparison=comparisons(features))
    counts = Counter(COMPLEXITIES[int(i)] for i in label)
    hop = model.hop  # its logit = embedding part + feature part + intercept (standardised inputs)
    x = hop.inputs(vectors, features)
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
    sets = {"CMRC cal (one_hop)": [q.question for q in load_cmrc(args.data).split("cal")],
            "hand-written multi-hop / comparison": ZH_MULTI}
    for name, questions in sets.items():
        vectors = model.encoder.encode(questions)
        before = np.stack([english_features(q) for q in questions])
        results[name] = {"before": distribution(model, vectors, before),
                         "after": distribution(model, vectors, features_batch(questions))}
    write(results, args.out)


def write(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = ["# The shipped complexity classifier on Chinese questions", "", "```",
             "PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/zh_classifier.py --data ../shared/data "
             "--baseline-features ../main/src/amsrag/classify/features.py", "```", "",
             "Same shipped model and embeddings; before = English cues only, after = Chinese cues on Chinese "
             "questions. No retraining.", "",
             "Hop logit parts: the mean contribution of the embedding and of the structural features to the hop "
             "head's logit (standardised inputs times coefficients; the intercept is "
             f"{results['hop_intercept']:.2f}).", "",
             "| questions | features | zero_hop | one_hop | multi_hop | mean p(multi_hop) | embedding part | "
             "feature part |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = [(name, when, results[name][when]) for name in ("CMRC cal (one_hop)", "hand-written multi-hop / comparison")
            for when in ("before", "after")]
    rows.append(("English reference (2Wiki + HotpotQA, multi-hop)", "English",
                 results["English reference (2Wiki + HotpotQA, multi-hop)"]))
    for name, when, d in rows:
        c = d["counts"]
        lines.append(f"| {name} | {when} | {c['zero_hop']} | {c['one_hop']} | {c['multi_hop']} | "
                     f"{d['mean_p_multi']:.3f} | {d['hop_logit_embedding_part']:.2f} | "
                     f"{d['hop_logit_feature_part']:.2f} |")
    lines += ["", "Hand-written questions, p(multi_hop) before -> after:", ""]
    multi = results["hand-written multi-hop / comparison"]
    for q, b, a in zip(ZH_MULTI, multi["before"]["p_multi"], multi["after"]["p_multi"], strict=True):
        lines.append(f"- {q}: {b:.3f} -> {a:.3f}")
    lines += ["", f"English features bit-identical to the baseline on {results['english_questions']} questions: "
              f"{results['english_bit_identical']}"]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
