"""CMRC 2018, amsrag's Chinese benchmark: retrieval by tokenizer and retriever, `full`, and answers.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/cmrc.py [--limit N] [--answer-limit N] [--split cal]
    # -> docs/benchmarks/cmrc.{md,json} (cal: cmrc-cal.{md,json})

The same run as `amsrag eval --sections cmrc` (`amsrag.evaluate.cmrc.run_cmrc`): the 806 test questions
(dev articles at odd positions) over every paragraph of the train and dev files. The index is cached in
bench-cache/eval/cmrc-index-<model>.
"""

from __future__ import annotations

import argparse
import json

from amsrag.evaluate.cmrc import CHINESE_ENCODER, markdown, run_cmrc
from common import CACHE, ROOT, SHARED_DATA

OUT = ROOT / "docs" / "benchmarks" / "cmrc"
COMMAND = "OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/cmrc.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--answer-limit", type=int, default=None)
    parser.add_argument("--model", default=CHINESE_ENCODER)
    parser.add_argument("--split", default="test", choices=("test", "cal"),
                        help="cal: the questions settings are chosen on (written to cmrc-cal.{md,json})")
    args = parser.parse_args()
    result = run_cmrc(SHARED_DATA, CACHE / "eval", limit=args.limit, answer_limit=args.answer_limit,
                      embedding_model=args.model, split=args.split)
    command = COMMAND + "".join(f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                                if v is not None and not (k == "model" and v == CHINESE_ENCODER)
                                and not (k == "split" and v == "test"))
    out = OUT if args.split == "test" else OUT.with_name("cmrc-cal")
    out.with_suffix(".json").write_text(json.dumps({"command": command, **result}, indent=2, ensure_ascii=False)
                                        + "\n", encoding="utf-8")
    lines = markdown(result)
    lines[0] = "# Chinese: CMRC 2018" + ("" if args.split == "test" else " (cal split: settings are chosen here)")
    lines.insert(2, f"Command: `{command}` ({result['seconds']:.0f} s)\n")
    out.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
