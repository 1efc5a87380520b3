"""How often the decomposer's compared entities equal the gold ones (as sets, case-insensitive) on its comparison
rows: the 2Wiki and Break-on-HotpotQA questions with entity spans from their decompositions, split by question hash
as in training (`learn.decomposer.data.split_of`).

    python benchmarks/decomposer_entities.py --split test [--show 20]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from amsrag.decompose.features import token_features
from amsrag.decompose.tagger import TaggerDecomposer
from amsrag.ingest.datasets import default_data_dir
from amsrag.learn.decomposer.data import load_all, split_of
from amsrag.learn.decomposer.train import excluded_questions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--split", choices=("train", "test"), default="test")
    ap.add_argument("--show", type=int, default=0, help="print this many misses")
    args = ap.parse_args()
    data = args.data or default_data_dir()
    rows = [e for e in load_all(data, excluded_questions(data)) if e.kind == "comparison" and len(e.entities) >= 2
            and split_of(e.question) == args.split]
    dec = TaggerDecomposer.load()
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    shown = 0
    for ex in rows:
        states = dec.encoder.token_states([ex.question])[0]
        found = dec.entities(ex.question, states, dec.model.tag_probs(token_features(states, ex.question)))
        ok = {e.lower() for e in found} == {ex.question[a:b].lower() for a, b in ex.entities}
        for key in ("all", ex.dataset):
            total[key] += 1
            right[key] += ok
        if not ok and shown < args.show:
            shown += 1
            print(f"  {ex.question} | found {found} | gold {[ex.question[a:b] for a, b in ex.entities]}")
    print(" ".join(f"{k}: {right[k] / total[k]:.3f} of {total[k]}" for k in total))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
