"""The five-way router on a mixed question set over one index holding text and tables (issue 19).

    cd benchmarks && python taxonomy.py                 # -> docs/benchmarks/taxonomy.{md,json}
    cd benchmarks && python taxonomy.py --no-answers    # routing only (skips the open-setting answers)

Questions (none seen by any trained part): 600 text questions of the complexity classifier's test split
(their data set's hop class as truth), 600 WikiTableQuestions questions of its held-out test tables,
300 aggregation prompts of the test template family. The index: the demo's 196 passages (themes built)
plus every held-out WTQ table (336), in bench-cache/mixed-index. Runs `amsrag.learn.taxonomy.mixed`,
the code behind `amsrag eval --sections taxonomy`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

from amsrag.learn.taxonomy import mixed
from common import CACHE, ROOT

DATA = ROOT.parent / "shared" / "data"
DOCS = ROOT / "docs" / "benchmarks"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-answers", action="store_true", help="routing only")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    t0 = time.perf_counter()
    questions = mixed.mixed_questions(DATA, 600, 600, 300, args.seed)
    index = mixed.build_mixed_index(CACHE / "mixed-index", DATA, print)
    with index:
        result = mixed.run_mixed(index, questions, answer_structured=not args.no_answers, log=print)
        card = index.config.router.taxonomy
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["min_confidence"] = dict(card.min_confidence)
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "omp_threads": os.environ.get("OMP_NUM_THREADS")}
    command = "cd benchmarks && OMP_NUM_THREADS=1 python taxonomy.py" + (" --no-answers" if args.no_answers else "")
    (DOCS / "taxonomy.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = ["# Five-way routing (issue 19)", "", f"Command: `{command}` ({result['seconds']} s).", "",
             *mixed.markdown(result)]
    (DOCS / "taxonomy.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
