"""Scale run: 200,000 passages, build time and per-retriever latency.

    python benchmarks/scale.py          # needs bench-cache/corpus-index from benchmarks/retrieval.py

How the passages are made: each synthetic passage joins three sentences taken from three different
real passages of the ~25k benchmark corpus (seeded choice); its title is the first source's title.
Embedding 200k real passages would take ~2.5 h on this 2-core machine, so the vectors are not
re-embedded: each is the normalised length-weighted mean of its three sources' stored vectors. That
keeps the vector distribution close to real data for build-time and latency measurements; it says
nothing about quality, and no quality number is reported here.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import time
from pathlib import Path

import numpy as np

from amsrag.progress import RichProgress
from amsrag.store import EmbeddedIndex
from amsrag.types import Passage
from common import CACHE, ROOT, Timer, load_benchmark, percentiles

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def synthesize(source: EmbeddedIndex, n: int, seed: int) -> tuple[list[Passage], np.ndarray]:
    rows = sorted(source._info)
    passages = source.passages_by_rows(rows)
    vectors = source.vectors_for_rows(rows)
    sentences = [_SENT.split(p.text) for p in passages]
    rng = random.Random(seed)
    out, vecs = [], np.empty((n, vectors.shape[1]), dtype=np.float32)
    for i in range(n):
        picks = rng.sample(range(len(passages)), 3)
        parts = [rng.choice(sentences[j]) for j in picks]
        weights = np.asarray([len(s) for s in parts], dtype=np.float32)
        v = (vectors[picks] * weights[:, None]).sum(axis=0)
        vecs[i] = v / np.linalg.norm(v)
        out.append(Passage(id=f"syn-{i:06d}", title=passages[picks[0]].title, text=" ".join(parts),
                           metadata={"source": "synthetic", "from": [passages[j].id for j in picks]}))
    return out, vecs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    source = EmbeddedIndex.open(CACHE / "corpus-index")
    passages, vectors = synthesize(source, args.passages, seed=5)
    held, held_vecs = passages[-1000:], vectors[-1000:]
    path = CACHE / "scale-index"
    shutil.rmtree(path, ignore_errors=True)
    index = EmbeddedIndex.create(path)
    t = time.perf_counter()
    with RichProgress() as progress:
        rep = index.add(passages[:-1000], progress=progress, vectors=vectors[:-1000])
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    add = index.add(held, vectors=held_vecs)
    add_s = time.perf_counter() - t
    _, questions = load_benchmark()
    rng = random.Random(3)
    qs = rng.sample(questions, args.queries)
    retrievers = {n: index.retriever(n) for n in ("bm25", "dense", "graph")}
    for r in retrievers.values():
        r.search("warm up", k=10)
    lat: dict[str, list[float]] = {k: [] for k in ("embed", "bm25", "dense (incl. embedding)", "graph (vector shared)")}
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
    result = {
        "passages": len(index), "date": time.strftime("%Y-%m-%d"),
        "build": {"passages": rep.added, "seconds_total": round(build_s, 1),
                  "seconds_by_stage": {k: round(v, 1) for k, v in rep.seconds.items()},
                  "note": "vectors given (see how the passages were made); embedding not included"},
        "incremental_add": {"added": add.added, "seconds_total": round(add_s, 2),
                            "seconds_by_stage": {k: round(v, 2) for k, v in add.seconds.items()}},
        "dense_search": index.vector_index.kind,
        "latency_ms": {k: percentiles(v) for k, v in lat.items()},
        "disk_mb": round(index.stats()["disk_bytes"] / 1e6, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(result, indent=2))
    lines = ["# Scale run: 200k passages (embedded store)", "", "Command: `python benchmarks/scale.py`", "",
             "How the passages were made: "
             + (__doc__ or "").split("How the passages are made:")[1].strip().replace("\n", " "), "",
             f"- build of {rep.added} passages: {result['build']['seconds_total']} s; by stage (s) "
             f"{result['build']['seconds_by_stage']} (vectors given, so no embedding)",
             f"- incremental add of {add.added} passages: {result['incremental_add']['seconds_total']} s; by stage "
             f"{result['incremental_add']['seconds_by_stage']}",
             f"- dense search: {result['dense_search']}; index on disk: {result['disk_mb']} MB", "",
             f"Latency over {args.queries} benchmark questions, one at a time (ms):", "",
             "| what | p50 | p95 | mean |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {v['p50']} | {v['p95']} | {v['mean']} |" for k, v in result["latency_ms"].items()]
    (args.out / "scale.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
