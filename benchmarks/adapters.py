"""What the framework adapters and the MCP search tool add to `Engine.retrieve`, and whether they hand on the same
passages in the same order, on 50 benchmark questions.

    python benchmarks/adapters.py [--index DIR] [--questions 50] [--repeats 3]
    python benchmarks/adapters.py --profile "LlamaIndex retrieve"   # where one adapter's own time goes (cProfile)

--index: an index holding the questions' gold passages (default: bench-cache/corpus-index when retrieval.py built
it, else bench-cache/adapters-index, built here from the questions' gold passages and 1,500 other benchmark
passages). The overhead of a call is its time minus the time of the `Engine.retrieve` call inside it (timed by a
wrapper of the engine's own method, so routing noise cancels); p50 over questions x repeats. Each call is made
twice, in alternating order: as the adapters are now, and as they were before issue 40 ("re-read": the engine's
results handed over without the stored passages it read, so the adapters read them from the store again, as they
did) — a before/after ratio from one run on a shared, noisy machine. Writes docs/benchmarks/adapters.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import amsrag
from amsrag.pipeline.engine import Engine
from amsrag.pipeline.results import RetrievalResult
from common import CACHE, ROOT, load_benchmark, percentiles

OTHER_PASSAGES = 1500
TARGET_MS = 1.0
NOTES = """Notes.
- The adapters' own work is the conversion of the passages into the framework's document objects, with the
  metadata (source, page, section, document) of the stored passages the engine read; until issue 40 they read
  those passages from the store a second time (the "re-read" columns: the same call made that way in the same
  run, alternating with the current one). LangChain's `invoke` and LlamaIndex's `retrieve` add
  their callback and instrumentation machinery, Haystack's `Pipeline.run` its scheduling, validation and tracing
  around the component, and the MCP tool a worker-thread hop plus validation of its input and output schemas.
- `ainvoke` and the MCP tool run on one event loop kept for the whole run, as in an async application.
- Timings are from a shared 2-core machine; the load average during the run is in adapters.json (meta)."""


class TimedEngine:
    """Records how long each `Engine.retrieve` call on `engine` took (the adapters call that method). With `reread`
    set, the result's passages lose the stored passages the engine read (inside the timed call), so the adapters
    read them from the store again, as they did before issue 40."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.last_ms = 0.0
        self.reread = False
        inner = engine.retrieve

        def timed(*args: Any, **kwargs: Any) -> RetrievalResult:
            t = time.perf_counter()
            try:
                result = inner(*args, **kwargs)
                if self.reread:
                    result = dataclasses.replace(result, passages=[dataclasses.replace(p, stored=None)
                                                                   for p in result.passages])
                return result
            finally:
                self.last_ms = (time.perf_counter() - t) * 1000

        engine.retrieve = timed  # type: ignore[method-assign]


def build_index(path: Path, n_questions: int) -> Path:
    passages, questions = load_benchmark()
    chosen = pick_questions(questions, n_questions, None)
    gold = {g for q in chosen for g in q.gold_passage_ids}
    rng = random.Random(11)
    others = [p for p in passages if p.id not in gold]
    rng.shuffle(others)
    subset = [p for p in passages if p.id in gold] + others[:OTHER_PASSAGES]
    from amsrag.store import EmbeddedIndex

    print(f"building {path} from {len(subset)} benchmark passages", flush=True)
    with EmbeddedIndex.create(path) as index:
        index.add(subset)
    return path


def pick_questions(questions: list, n: int, index: amsrag.Index | None) -> list:
    """A seeded sample of `n` questions, spread over the data sets, whose gold passages `index` holds."""
    rng = random.Random(17)
    by: dict[str, list] = {}
    for q in sorted(questions, key=lambda q: q.id):
        if index is None or all(index.passage(g) is not None for g in q.gold_passage_ids):
            by.setdefault(q.dataset, []).append(q)
    for qs in by.values():
        rng.shuffle(qs)
    out: list = []
    while len(out) < n and any(by.values()):
        for ds in sorted(by):
            if by[ds] and len(out) < n:
                out.append(by[ds].pop())
    return out


def adapters(index: amsrag.Index) -> dict[str, Callable[[str], list[tuple[str, float]]]]:
    """Each adapter as a call from a question to its (id, score) list, as its framework hands them on."""
    from haystack import Pipeline
    from llama_index.core.schema import QueryBundle

    from amsrag.integrations.haystack import AmsragRetriever as HaystackRetriever
    from amsrag.integrations.langchain import AmsragRetriever as LangChainRetriever
    from amsrag.integrations.llamaindex import AmsragRetriever as LlamaIndexRetriever
    from amsrag.mcp.server import build_server

    langchain = LangChainRetriever(index=index)
    llamaindex = LlamaIndexRetriever(index)
    haystack = HaystackRetriever(index)
    pipeline = Pipeline()
    pipeline.add_component("retriever", HaystackRetriever(index))
    mcp = build_server(index, index.engine.config.serve)
    loop = asyncio.new_event_loop()  # one running loop, as an async application has (no loop set-up per call)

    def mcp_search(q: str) -> list[tuple[str, float]]:
        result = loop.run_until_complete(mcp.call_tool("search", {"query": q}))
        return [(p["id"], p["score"]) for p in result.structured_content["passages"]]

    return {
        "LangChain invoke": lambda q: [(d.id, d.metadata["score"]) for d in langchain.invoke(q)],
        "LangChain ainvoke": lambda q: [(d.id, d.metadata["score"]) for d in
                                        loop.run_until_complete(langchain.ainvoke(q))],
        "LlamaIndex retrieve": lambda q: [(n.node.node_id, n.score) for n in llamaindex.retrieve(QueryBundle(q))],
        "Haystack component": lambda q: [(d.id, d.score) for d in haystack.run(q)["documents"]],
        "Haystack Pipeline.run": lambda q: [(d.id, d.score) for d in
                                            pipeline.run({"retriever": {"query": q}})["retriever"]["documents"]],
        "MCP search (in-process)": mcp_search,
    }


def profile(index: amsrag.Index, questions: list, name: str, rounds: int = 30) -> None:
    """cProfile of one adapter's own work: the engine's results are computed once per question and handed out
    again, so only the adapter and its framework remain; prints its time per call and the top functions."""
    import cProfile
    import pstats

    results: dict[tuple[Any, ...], RetrievalResult] = {}
    inner = index.engine.retrieve

    def cached(question: str, system: str = "full", k: int | None = None, **kwargs: Any) -> RetrievalResult:
        key = (question, system, k, *sorted(kwargs.items()))
        if key not in results:
            results[key] = inner(question, system=system, k=k, **kwargs)
        return results[key]

    index.engine.retrieve = cached  # type: ignore[method-assign]
    call = adapters(index)[name]
    for q in questions:
        call(q.question)
    t = time.perf_counter()
    for _ in range(rounds):
        for q in questions:
            call(q.question)
    print(f"{name}: {(time.perf_counter() - t) * 1000 / (rounds * len(questions)):.3f} ms a call without the engine")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(rounds):
        for q in questions:
            call(q.question)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path)
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", metavar="ADAPTER", help="profile one adapter (a row name) instead; writes nothing")
    args = ap.parse_args()
    index_dir = args.index or (CACHE / "corpus-index" if (CACHE / "corpus-index").is_dir() else None)
    if index_dir is None:
        index_dir = CACHE / "adapters-index"
        if not index_dir.is_dir():
            build_index(index_dir, args.questions)
    _, questions = load_benchmark()
    index = amsrag.Index.open(index_dir)
    chosen = pick_questions(questions, args.questions, index)
    if args.profile:
        profile(index, chosen[:20], args.profile)
        return
    timer = TimedEngine(index.engine)
    calls = adapters(index)
    for q in chosen[:3]:  # warm every path (models, the frameworks' first-call set-up)
        for call in calls.values():
            call(q.question)
    rows: dict[str, dict[str, Any]] = {}
    for name, call in calls.items():
        overhead: dict[bool, list[float]] = {False: [], True: []}
        engine_ms: list[float] = []
        equal = {False: 0, True: 0}
        for n, q in enumerate(chosen):
            expected = [(p.id, p.score) for p in index.retrieve(q.question).passages]
            for r in range(args.repeats):
                for reread in ((False, True) if (n + r) % 2 == 0 else (True, False)):
                    timer.reread = reread
                    t = time.perf_counter()
                    got = call(q.question)
                    total = (time.perf_counter() - t) * 1000
                    overhead[reread].append(total - timer.last_ms)
                    engine_ms.append(timer.last_ms)
                    if r == 0:
                        equal[reread] += got[:len(expected)] == expected and len(got) == len(expected)
        timer.reread = False
        now, before = percentiles(overhead[False]), percentiles(overhead[True])
        rows[name] = {"overhead_ms": now, "overhead_reread_ms": before,
                      "ratio_p50": round(now["p50"] / before["p50"], 2), "engine_retrieve_ms": percentiles(engine_ms),
                      "equal_results": f"{equal[False]}/{len(chosen)}",
                      "equal_results_reread": f"{equal[True]}/{len(chosen)}"}
        print(name, rows[name], flush=True)
    index.close()
    meta = {"index": str(index_dir.relative_to(ROOT) if index_dir.is_relative_to(ROOT) else index_dir),
            "passages": None, "questions": len(chosen),
            "datasets": sorted({q.dataset for q in chosen}), "repeats": args.repeats,
            "python": platform.python_version(), "cpus": os.cpu_count(), "target_p50_ms": TARGET_MS,
            "load_average_1m_at_end": round(os.getloadavg()[0], 1)}
    with amsrag.Index.open(index_dir) as again:
        meta["passages"] = len(again)
    out = ROOT / "docs" / "benchmarks"
    (out / "adapters.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    lines = ["# Adapter overhead over Engine.retrieve", "",
             f"`python benchmarks/adapters.py` on {meta['index']} ({meta['passages']} passages), "
             f"{meta['questions']} benchmark questions ({', '.join(meta['datasets'])}) x {args.repeats} repeats, "
             f"one at a time, the default system (`full`); load average {meta['load_average_1m_at_end']} at the end. "
             f"Overhead: the call's time minus the time of the `Engine.retrieve` call inside it. Re-read: the same "
             f"call as the adapters made it before issue 40 (reading the stored passages again), alternating with "
             f"the current one in the same run; ratio: current p50 / re-read p50. Equal: the adapter's (id, score) "
             f"list equals `Index.retrieve`'s for the same question, in order (current / re-read). Target: p50 "
             f"overhead <= {TARGET_MS} ms.", "",
             "| adapter | overhead p50 ms | overhead p95 ms | re-read p50 ms | re-read p95 ms | ratio p50 "
             "| Engine.retrieve p50 ms | equal results |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['overhead_ms']['p50']} | {row['overhead_ms']['p95']} | "
                     f"{row['overhead_reread_ms']['p50']} | {row['overhead_reread_ms']['p95']} | {row['ratio_p50']} | "
                     f"{row['engine_retrieve_ms']['p50']} | {row['equal_results']} / {row['equal_results_reread']} |")
    lines += ["", NOTES]
    (out / "adapters.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
