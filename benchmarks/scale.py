"""Scale run: build time per stage, incremental add/delete, index size, memory and latency at 200k-1M passages.

    python benchmarks/scale.py --passages 200000 --graph ner --name scale        # -> docs/benchmarks/scale.{md,json}
    python benchmarks/scale.py --passages 1000000 --graph title --name scale-1m  # -> docs/benchmarks/scale-1m.{md,json}

Needs bench-cache/corpus-index (benchmarks/retrieval.py builds it), or `--source hashed`: the stand-in
vectors of benchmarks/stand_in.py (built in ~2 min; same dimensions, so the same memory and timings).

How the passages are made: each synthetic passage joins three sentences taken from three different
real passages of the ~25k benchmark corpus (seeded choice); its title is the first source's title.
Embedding a million real passages would take days on this 2-core machine, so the vectors are not
re-embedded: each is the normalised length-weighted mean of its three sources' stored vectors. That
keeps the vector distribution close to real data for build-time and latency measurements; it says
nothing about quality, and no quality number is reported here. BM25 and the entity graph index the
real (spliced) text: tokenising, NER (with `--graph ner`) and title matching run for real.

The index is built in chunks (`--chunk`, default 100,000), each an incremental `add`, so the build
itself exercises BM25 segments and merges and the graph's incremental title matching. Then 1,000
held-out passages are added and deleted again (timed by stage). Query latency and the query
process's memory are measured in a fresh process that only opens the index (`--queries-only`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.pipeline import Engine
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.types import Passage
from common import CACHE, ROOT, Timer, load_benchmark, percentiles
from stand_in import HASHED_INDEX, build_hashed_index

# What the same measurements gave before BM25 segments, the dense delta and the incremental graph
# (commit e08567d, docs/benchmarks/scale.md of then): cited for comparison, not measured here.
PREVIOUS = {"scale": [
    "Before (commit e08567d: bm25s re-indexed from a token cache, every title matched against every passage, "
    "vectors and HNSW rewritten on each change; graph with NER): the same add of 1,000 passages onto 199,000 took "
    "41.0 s — bm25 11.8, graph 23.4 (NER of the 1,000 new passages included, ~12 s of it at 81 passages/s), "
    "vectors 2.8, write 2.7 — and bm25 answered in 1.09 ms p50. With `--graph ner` today the add would carry "
    "the same ~12 s of NER on top of the figure above.", ""],
    "scale-1m": [
    "Peak RSS of the build, over time: 8,588 MB at the first run (MiniLM source vectors), where after each "
    "chunk's rebuild of the dense base the writer held the new base vectors in memory (1.5 GB at 1M) beside the "
    "HNSW graph (~1.8 GB) and the BM25 segments; 8,874 MB in this session's first run (stand-in source vectors), "
    "after the rebuilt base was read back memory-mapped (`VectorIndex.map_base`) — the gather of the next "
    "rebuild still made every page of the old mapped base resident beside the new array. Now the gather reads "
    "the mapped base in blocks of 65,536 rows and releases each block's pages once copied "
    "(`dense.release_pages`, `madvise(MADV_DONTNEED)` on clean file pages): the peak above. Sampled every 2 s "
    "during this run, the peak rose by ~0.5 GB a chunk (5.0 GB at chunk 6, 6.0 at chunk 8), always at the end "
    "of the `vectors` stage (the new base gathered while the HNSW graph grows).", ""]}
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
HELD = 1000


def rss_mb() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 1e6


def peak_rss_mb() -> float:
    """Peak RSS of this process image (VmHWM; ru_maxrss would carry a parent's peak across fork + exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


class Splicer:
    """Synthetic passages and vectors from the benchmark corpus (see the module docstring)."""

    def __init__(self, source: EmbeddedIndex, seed: int) -> None:
        rows = source.stored_rows()
        passages = source.passages_by_rows(rows)
        self.titles = [p.title for p in passages]
        self.ids = [p.id for p in passages]
        self.sentences = [_SENT.split(p.text) for p in passages]
        self.vectors = np.asarray(source.vectors_for_rows(rows), dtype=np.float32)
        self.rng = random.Random(seed)

    def chunk(self, start: int, n: int) -> tuple[list[Passage], np.ndarray]:
        out, vecs = [], np.empty((n, self.vectors.shape[1]), dtype=np.float32)
        for i in range(n):
            picks = self.rng.sample(range(len(self.titles)), 3)
            parts = [self.rng.choice(self.sentences[j]) for j in picks]
            weights = np.asarray([len(s) for s in parts], dtype=np.float32)
            v = (self.vectors[picks] * weights[:, None]).sum(axis=0)
            vecs[i] = v / np.linalg.norm(v)
            out.append(Passage(id=f"syn-{start + i:07d}", title=self.titles[picks[0]], text=" ".join(parts),
                               metadata={"source": "synthetic", "from": [self.ids[j] for j in picks]}))
        return out, vecs

    def chunks(self, total: int, size: int) -> Iterator[tuple[list[Passage], np.ndarray]]:
        for start in range(0, total, size):
            yield self.chunk(start, min(size, total - start))


def synthesize(source: EmbeddedIndex, n: int, seed: int) -> tuple[list[Passage], np.ndarray]:
    """`n` spliced passages and their vectors at once (benchmarks/postgres.py --synthetic)."""
    return Splicer(source, seed).chunk(0, n)


def open_source(kind: str) -> EmbeddedIndex:
    """The 25k benchmark corpus the passages are spliced from: MiniLM vectors (bench-cache/corpus-index,
    benchmarks/retrieval.py builds it in ~25 min) or the stand-in vectors of benchmarks/stand_in.py
    (bench-cache/corpus-index-hashed, built here in ~2 min when missing). Memory, build time and query
    latency do not depend on which (same 384 dimensions); the stand-in says nothing about dense quality."""
    if kind == "minilm":
        return EmbeddedIndex.open(CACHE / "corpus-index")
    return EmbeddedIndex.open(HASHED_INDEX) if HASHED_INDEX.exists() else build_hashed_index(HASHED_INDEX)


def build(args: argparse.Namespace) -> dict:
    source = open_source(args.source)
    splicer = Splicer(source, seed=5)
    source.close()
    path = CACHE / f"{args.name}-index"
    if path.exists():
        import shutil

        shutil.rmtree(path)
    config = AmsragConfig()
    config.graph.ner = args.graph == "ner"
    config.dense.hnsw_ef_construction = args.ef_construction
    index = EmbeddedIndex.create(path, config)
    base = args.passages - HELD
    stages: dict[str, float] = {}
    chunks = []
    t0 = time.perf_counter()
    for n, (passages, vectors) in enumerate(splicer.chunks(base, args.chunk)):
        t = time.perf_counter()
        rep = index.add(passages, vectors=vectors)
        for k, v in rep.seconds.items():
            stages[k] = stages.get(k, 0.0) + v
        chunks.append({"chunk": n, "passages": len(index), "seconds": round(time.perf_counter() - t, 1),
                       "by_stage": {k: round(v, 1) for k, v in rep.seconds.items()},
                       "bm25_segments": len(index.bm25_index.segments), "rss_mb": round(rss_mb())})
        print(json.dumps(chunks[-1]), file=sys.stderr, flush=True)
    build_s = time.perf_counter() - t0
    held, held_vecs = splicer.chunk(base, HELD)
    t = time.perf_counter()
    add = index.add(held, vectors=held_vecs)
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    gone = index.delete([p.id for p in held])
    delete_s = time.perf_counter() - t
    index.add(held, vectors=held_vecs)  # the queried index holds all `--passages`
    stats = index.stats()
    index.close()
    return {
        "passages": args.passages, "graph_mode": args.graph, "chunk": args.chunk,
        "hnsw_ef_construction": args.ef_construction, "date": time.strftime("%Y-%m-%d"), "source": args.source,
        "build": {"passages": base, "seconds_total": round(build_s, 1),
                  "seconds_by_stage": {k: round(v, 1) for k, v in stages.items()},
                  "note": "vectors given (see how the passages were made); embedding not included",
                  "chunks": chunks, "peak_rss_mb": round(peak_rss_mb())},
        "incremental_add": {"onto": base, "added": add.added, "seconds_total": round(add_s, 2),
                            "seconds_by_stage": {k: round(v, 2) for k, v in add.seconds.items()}},
        "incremental_delete": {"deleted": gone.deleted, "seconds_total": round(delete_s, 2)},
        "disk_mb": round(stats["disk_bytes"] / 1e6, 1),
        "stats": {k: stats[k] for k in ("bm25", "graph") if k in stats},
    }


def update_again(args: argparse.Namespace, result: dict) -> None:
    """Delete the 1,000 held-out passages and add them back (their stored vectors), timing both, on the
    built index: the incremental figures of the current code without rebuilding."""
    index = EmbeddedIndex.open(CACHE / f"{args.name}-index")
    base = result["passages"] - HELD
    ids = [f"syn-{i:07d}" for i in range(base, base + HELD)]
    rows = index.rows_for_ids(ids)
    passages = [index.get(i) for i in ids]
    vectors = index.vectors_for_rows([rows[i] for i in ids])
    _ = index.bm25_index, index.entity_graph, index.vector_index  # loaded before timing, as in a build
    t = time.perf_counter()
    gone = index.delete(ids)
    delete_s = time.perf_counter() - t
    t = time.perf_counter()
    add = index.add([p for p in passages if p is not None], vectors=vectors)
    add_s = time.perf_counter() - t
    index.close()
    result["incremental_add"] = {"onto": base, "added": add.added, "seconds_total": round(add_s, 2),
                                 "seconds_by_stage": {k: round(v, 2) for k, v in add.seconds.items()},
                                 "note": f"remeasured {time.strftime('%Y-%m-%d %H:%M')} (delete, then add back)"}
    result["incremental_delete"] = {"deleted": gone.deleted, "seconds_total": round(delete_s, 2)}


def queries(args: argparse.Namespace) -> dict:
    """Latency one query at a time, in a process that only opened the index."""
    t = time.perf_counter()
    index = EmbeddedIndex.open(CACHE / f"{args.name}-index")
    engine = Engine(index)
    retrievers = {n: retriever_for(index, n) for n in ("bm25", "dense", "graph")}
    engine.retrieve("warm up question about a film director", system="full")
    open_s = time.perf_counter() - t
    _, questions = load_benchmark()
    qs = random.Random(3).sample(questions, args.queries)
    names = ("embed", "bm25", "dense (incl. embedding)", "graph (vector shared)", "full (incl. embedding)")
    lat: dict[str, list[float]] = {k: [] for k in names}
    for q in qs:
        with Timer() as tm:
            vec = index.encoder.encode_query(q.question)
        lat["embed"].append(tm.ms)
        with Timer() as tm:
            retrievers["bm25"].search(q.question, k=10)
        lat["bm25"].append(tm.ms)
        with Timer() as tm:
            retrievers["dense"].search(q.question, k=10)
        lat["dense (incl. embedding)"].append(tm.ms)
        with Timer() as tm:
            retrievers["graph"].search(q.question, k=10, query_vector=vec)
        lat["graph (vector shared)"].append(tm.ms)
        with Timer() as tm:
            engine.retrieve(q.question, system="full")
        lat["full (incl. embedding)"].append(tm.ms)
    dense = retriever_for(index, "dense")
    overlap = []
    for q in qs[:50]:  # HNSW against exact search (exact reads every vector: ~0.1-1 s a query)
        vec = index.encoder.encode_query(q.question)
        approx = {h.row for h in dense.search(q.question, k=10, query_vector=vec)}
        exact = {h.row for h in dense.search(q.question, k=10, query_vector=vec, exact=True)}  # type: ignore[call-arg]
        overlap.append(len(approx & exact) / max(1, len(exact)))
    return {"queries": args.queries, "open_and_warm_s": round(open_s, 1),
            "hnsw_recall_at_10_vs_exact": round(float(np.mean(overlap)), 4),
            "dense_search": index.vector_index.kind,
            "latency_ms": {k: percentiles(v) for k, v in lat.items()},
            "rss_mb": round(rss_mb()), "peak_rss_mb": round(peak_rss_mb())}


def report(result: dict, out: Path, name: str) -> None:
    b, a, q = result["build"], result["incremental_add"], result["query_process"]
    cmd = (f"python benchmarks/scale.py --passages {result['passages']} --graph {result['graph_mode']} "
           f"--ef-construction {result.get('hnsw_ef_construction', 200)} --name {name}"
           + (" --source hashed" if result.get("source") == "hashed" else ""))
    lines = [f"# Scale run: {result['passages']:,} passages (embedded store, graph mode `{result['graph_mode']}`)",
             "", f"Command: `{cmd}` ({result['date']}; `--requery` measures the queries again on the built index)", "",
             "How the passages were made: "
             + (__doc__ or "").split("How the passages are made:")[1].split("\n\n")[0].strip().replace("\n", " "),
             *(["", "Source vectors of this run: the stand-in `hashed_vectors` of benchmarks/stand_in.py "
                "(`--source hashed`), not MiniLM: same 384 dimensions, so memory, build time and latency are "
                "comparable. Queries are still embedded by MiniLM (so its cost is real) and point in directions "
                "unrelated to the stand-in passages': HNSW recall against exact search (0.35 at 1M, 0.96 with MiniLM "
                "source vectors) and dense rankings mean nothing in such a run."] if result.get("source") == "hashed"
               else []),
             "", "## Build", "",
             f"- {b['passages']:,} passages added in chunks of {result['chunk']:,} (each an incremental `add`): "
             f"{b['seconds_total']:,} s; by stage (s) {b['seconds_by_stage']}; {b['note']}",
             f"- peak RSS of the building process: {b['peak_rss_mb']:,} MB; index on disk: {result['disk_mb']:,} MB",
             f"- index: {result['stats']}", "",
             "| chunk | passages after | seconds | bm25 | vectors | graph | write | BM25 segments | RSS MB |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in b["chunks"]:
        s = c["by_stage"]
        lines.append(f"| {c['chunk']} | {c['passages']:,} | {c['seconds']} | {s.get('bm25')} | {s.get('vectors')} | "
                     f"{s.get('graph')} | {s.get('write')} | {c['bm25_segments']} | {c['rss_mb']:,} |")
    lines += ["", "## Incremental updates", "",
              f"- add of {a['added']:,} passages onto {a['onto']:,}: **{a['seconds_total']} s**, by stage (s) "
              f"{a['seconds_by_stage']} (vectors given, so `embed` is 0; with `--graph ner` NER of the new "
              f"passages is inside `graph`){'; ' + a['note'] if a.get('note') else ''}",
              f"- delete of the same {result['incremental_delete']['deleted']:,} passages: "
              f"{result['incremental_delete']['seconds_total']} s", "", *PREVIOUS.get(name, []),
              "## Queries", "",
              f"A fresh process opens the index ({q['open_and_warm_s']} s including one warm-up query; "
              f"{q.get('date', result['date'])}, load average {q.get('load_average', 'not recorded')}), then answers "
              f"{q['queries']} benchmark questions one at a time; dense search: {q['dense_search']} "
              f"(ef_construction {result.get('hnsw_ef_construction', 200)}; recall@10 against exact search on 50 "
              f"questions: {q['hnsw_recall_at_10_vs_exact']}). "
              f"Its RSS afterwards: {q['rss_mb']:,} MB (peak {q['peak_rss_mb']:,} MB).", "",
              "| what | p50 ms | p95 ms | mean ms |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {v['p50']} | {v['p95']} | {v['mean']} |" for k, v in q["latency_ms"].items()]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--graph", choices=("ner", "title"), default="ner", help="graph.ner on or off (title/alias only)")
    ap.add_argument("--ef-construction", type=int, default=200, help="dense.hnsw_ef_construction of the index")
    ap.add_argument("--name", default="scale")
    ap.add_argument("--source", choices=("minilm", "hashed"), default="minilm",
                    help="vectors of the spliced-from corpus: MiniLM or benchmarks/stand_in.py's stand-in")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--queries-only", action="store_true", help="only measure queries on the built index")
    ap.add_argument("--requery", action="store_true",
                    help="keep the recorded build; measure the incremental delete/add and the queries again")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    if args.queries_only:
        print(json.dumps(queries(args)))
        return
    # --requery: the build as recorded, the queries measured again (e.g. on a quieter machine)
    result = json.loads((args.out / f"{args.name}.json").read_text()) if args.requery else build(args)
    if args.requery:
        update_again(args, result)
    cmd = [sys.executable, __file__, "--queries-only", "--name", args.name, "--queries", str(args.queries)]
    result["query_process"] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                                        timeout=3600).stdout.strip().splitlines()[-1])
    result["query_process"]["date"] = time.strftime("%Y-%m-%d %H:%M")
    result["query_process"]["load_average"] = [round(x, 1) for x in os.getloadavg()]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2))
    report(result, args.out, args.name)
    print(json.dumps({k: v for k, v in result.items() if k != "build"}, indent=1))


if __name__ == "__main__":
    main()
