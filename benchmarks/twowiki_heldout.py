"""The 2WikiMultihopQA questions the decomposer never trained on (its 30 % test split by question hash), in the
source's own layout, for `amsrag eval --qa`:

    python benchmarks/twowiki_heldout.py --out bench-cache/2wiki_heldout.json
    amsrag eval --qa bench-cache/2wiki_heldout.json --systems full-plain,full --scope gold --noise 300 --no-audit \
        --out docs/benchmarks/compose/2wiki
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amsrag.ingest.datasets import default_data_dir
from amsrag.learn.decomposer.data import TWOWIKI_FILE, split_of


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = json.loads(((args.data or default_data_dir()) / TWOWIKI_FILE).read_text(encoding="utf-8"))
    held = [r for r in rows if split_of(r["question"]) == "test"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(held), encoding="utf-8")
    print(f"{len(held)} of {len(rows)} questions -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
