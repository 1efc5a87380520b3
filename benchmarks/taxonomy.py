"""The five-way router on a mixed question set over one index holding text and tables (issue 19).

    cd benchmarks && python taxonomy.py                 # -> docs/benchmarks/taxonomy.{md,json}
    cd benchmarks && python taxonomy.py --no-answers    # routing only (skips the open-setting answers)
    cd benchmarks && python taxonomy.py --global-latency  # also: `ask` on the global route over the 25k corpus

The global-route latency copies bench-cache/corpus-index (25,473 passages, benchmarks/retrieval.py builds it)
as hard links to bench-cache/corpus-index-themes, builds its themes once, and times `Engine.ask` on the 60
first aggregation prompts of the test family (those the router sends to the global route).

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
import shutil
import time

import numpy as np

from amsrag.learn.taxonomy import mixed
from common import CACHE, ROOT

DATA = ROOT.parent / "shared" / "data"
DOCS = ROOT / "docs" / "benchmarks"


def global_latency() -> dict:
    from amsrag.indexing.themes import refresh_themes
    from amsrag.learn.taxonomy.aggregation import aggregation_questions
    from amsrag.pipeline import Engine
    from amsrag.store import EmbeddedIndex

    src, dst = CACHE / "corpus-index", CACHE / "corpus-index-themes"
    if not dst.exists():  # hard links: the copy only adds its themes/ folder
        shutil.copytree(src, dst, copy_function=os.link)
    with EmbeddedIndex.open(dst) as index:
        built = refresh_themes(index)
        engine = Engine(index)
        questions = aggregation_questions("test", 60)
        engine.ask(questions[0])  # warm: models and the themes loaded
        ms, routed = [], 0
        for q in questions:
            t = time.perf_counter()
            a = engine.ask(q)
            if a.trace["strategy"] == "global":
                ms.append((time.perf_counter() - t) * 1000)
                routed += 1
        return {"passages": len(index), "themes": built.themes, "themes_seconds": round(built.seconds, 1),
                "questions": len(questions), "global_route": routed,
                "ask_ms_p50": round(float(np.percentile(ms, 50)), 2),
                "ask_ms_p95": round(float(np.percentile(ms, 95)), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-answers", action="store_true", help="routing only")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--global-latency", action="store_true", help="also time the global route over the 25k corpus")
    args = ap.parse_args()
    t0 = time.perf_counter()
    questions = mixed.mixed_questions(DATA, 600, 600, 300, args.seed)
    index = mixed.build_mixed_index(CACHE / "mixed-index", DATA, print)
    with index:
        result = mixed.run_mixed(index, questions, answer_structured=not args.no_answers, log=print)
    if args.global_latency:
        result["global_latency"] = global_latency()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "omp_threads": os.environ.get("OMP_NUM_THREADS")}
    command = ("cd benchmarks && OMP_NUM_THREADS=1 python taxonomy.py" + (" --no-answers" if args.no_answers else "")
               + (" --global-latency" if args.global_latency else ""))
    (DOCS / "taxonomy.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = ["# Five-way routing (issue 19)", "", f"Command: `{command}` ({result['seconds']} s).", "",
             *mixed.markdown(result)]
    g = result.get("global_latency")
    if g:
        lines += ["## The global route's latency", "",
                  f"`Engine.ask` on {g['global_route']} of {g['questions']} test-family aggregation prompts that "
                  f"took the global route, over {g['passages']:,} passages ({g['themes']} themes built once in "
                  f"{g['themes_seconds']} s): p50 {g['ask_ms_p50']} ms, p95 {g['ask_ms_p95']} ms (embedding, "
                  "classification, the task head and the answer included).", ""]
    (DOCS / "taxonomy.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
