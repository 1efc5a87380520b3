"""PostgreSQL dense search within a filter: candidate plans measured side by side (issue 38).

    OMP_NUM_THREADS=1 python benchmarks/pg_dense_within.py [--passages 25000] [--queries 100]

The passages, vectors and filters of benchmarks/filters.py on a throwaway PostgreSQL; for each filter share
(10 % random rows, then the benchmark's 20/30/33/51 % filters) the p50 of each plan as a ratio of the same
run's unfiltered p50, and its recall@10 against the exact scan of the allowed rows:
exact (the rows by primary key), shipped (`search_within` with the total: what the store does at that share),
and pgvector's iterative index scan with the filter in SQL (`hnsw.iterative_scan`, sequential scans off)
checking a bitmap of the allowed rows (`get_bit`) or the rows as an array (`prow = ANY`, `--any`), at several
`hnsw.ef_search` and LIMITs (`--wants`; above 20, also the distances alone in a CTE, the nearest 20 read).
`--hold` builds the index and waits, printing its URL; `--url URL` then measures against it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from amsrag.filters import Where
from filters import main_data, postgres_store

SHARES = (("random 10 %", None), ("type=pdf source=guides/1*", ["type=pdf", "source=guides/1*"]),
          ("type=html", ["type=html"]), ("modified 2024", ["modified>=2024-01-01", "modified<2025-01-01"]),
          ("type=pdf", ["type=pdf"]))

ITER_SQL = ("SELECT prow, id, title, embedding FROM passages WHERE {cond} "
            "ORDER BY embedding <=> %(q)s LIMIT {want}")
RELAXED_SQL = ("WITH c AS MATERIALIZED (SELECT prow, id, title, embedding, embedding <=> %(q)s AS d FROM passages "
               "WHERE {cond} ORDER BY d LIMIT {want}) SELECT prow, id, title, embedding FROM c ORDER BY d")
CTE_SQL = ("WITH c AS MATERIALIZED (SELECT prow, embedding <=> %(q)s AS d FROM passages WHERE {cond} "
           "ORDER BY embedding <=> %(q)s LIMIT {want}) "
           "SELECT p.prow, p.id, p.title, p.embedding FROM c JOIN passages p ON p.prow = c.prow "
           "ORDER BY c.d + 0 LIMIT 20")  # + 0: a sort of all the CTE's rows, not the first 20 read in its order
BITS = "CASE WHEN prow <= %(last)s THEN get_bit(%(bits)s::bytea, prow::int) = 1 ELSE false END"
ANY = "prow = ANY(%(rows)s)"


def bitmap(rows: np.ndarray, n: int) -> bytes:
    """Bit r (little-endian within each byte, as PostgreSQL's get_bit counts) set for each row r."""
    mask = np.zeros(n + 1, dtype=bool)
    mask[rows] = True
    return np.packbits(mask, bitorder="little").tobytes()


def iterative(dense: Any, order: str, ef: int, cond: str, want: int = 20, max_tuples: int = 20000,
              cte: bool = False) -> Any:
    sql = (CTE_SQL if cte else ITER_SQL).format(cond=cond, want=want)

    def run(qvec: np.ndarray, params: dict[str, Any]) -> list[Any]:
        def fetch(c: Any) -> list[tuple]:
            with c.pipeline(), c.transaction():
                c.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                          "set_config('hnsw.iterative_scan', %s, true), "
                          "set_config('hnsw.max_scan_tuples', %s, true), "
                          "set_config('enable_seqscan', 'off', true), "
                          "set_config('max_parallel_workers_per_gather', '0', true)", (str(ef), order, str(max_tuples)))
                cur = c.execute(sql, {"q": qvec, **params}, binary=True)
            return cur.fetchall()
        return dense._ranked(dense.index.read(fetch), qvec, 10)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=25_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--efs", default="40,64,128")
    ap.add_argument("--wants", default="20", help="the iterative scans' LIMITs (candidates re-ranked exactly)")
    ap.add_argument("--orders", default="strict_order,relaxed_order")
    ap.add_argument("--any", action="store_true", help="also the rows as an array (prow = ANY)")
    ap.add_argument("--url", help="an index this script built and --hold keeps (skips the 80 s build)")
    ap.add_argument("--hold", action="store_true", help="build, print the index's URL and wait")
    args = ap.parse_args()
    texts, facets, vecs, pairs = main_data(args.passages, args.queries, np.random.default_rng(0))
    qvecs = [v for _, v in pairs]
    if args.url:
        from amsrag.retrievers import retriever_for
        from amsrag.store.open import open_index
        with open_index(args.url) as idx:
            compare(args, retriever_for(idx, "dense"), idx.allowed_rows, qvecs)
        return
    with postgres_store(texts, facets, vecs) as (_, dense, resolve):
        if args.hold:
            print(dense.index.dsn, flush=True)
            time.sleep(3600)
        compare(args, dense, resolve, qvecs)


def compare(args: argparse.Namespace, dense: Any, resolve: Any, qvecs: list[np.ndarray]) -> None:
    """Each plan's p50 per share, the plans interleaved query by query (a load spike hits them alike)."""
    n = args.passages
    rng = np.random.default_rng(1)
    unfiltered = lambda v: dense.search("q", 10, query_vector=v)  # noqa: E731
    hnsw_recall = np.mean([len({h.id for h in unfiltered(v)} & {h.id for h in dense.search("q", 10, query_vector=v,
                                                                                          exact=True)}) / 10
                           for v in qvecs])
    print(f"unfiltered HNSW recall@10 against the exact scan: {hnsw_recall:.3f}")
    for label, specs in SHARES:
        if specs is None:
            rows = np.sort(rng.choice(n, n // 10, replace=False) + 1).astype(np.int64)
        else:
            rows = np.asarray(resolve(Where.parse(specs)).rows, dtype=np.int64)
        exact = [[h.id for h in dense.search_within("q", 10, rows, v)] for v in qvecs]
        bits = {"bits": bitmap(rows, int(rows.max())), "last": int(rows.max())}
        literal = {"rows": rows.tolist()}
        plans: dict[str, Any] = {
            "unfiltered": unfiltered,
            "exact": lambda v, rows=rows: dense.search_within("q", 10, rows, v),
            "shipped": lambda v, rows=rows: dense.search_within("q", 10, rows, v, total=n)}
        for ef in [int(e) for e in args.efs.split(",")]:
            for order in args.orders.split(","):
                for want in [int(w) for w in args.wants.split(",")]:
                    run = iterative(dense, order, ef, BITS, want)
                    plans[f"{order[:6]} bits ef{ef} lim{want}"] = lambda v, run=run, bits=bits: run(v, bits)
                    if want > 20:
                        run = iterative(dense, order, ef, BITS, want, cte=True)
                        plans[f"{order[:6]} cte ef{ef} lim{want}"] = lambda v, run=run, bits=bits: run(v, bits)
                if args.any:
                    run = iterative(dense, order, ef, ANY)
                    plans[f"{order[:6]} any ef{ef}"] = lambda v, run=run, literal=literal: run(v, literal)
        print(f"\n{label}: {len(rows)} allowed ({len(rows) / n:.0%})")
        allowed = set(rows.tolist())
        print_plans(*time_plans(plans, qvecs, exact, allowed), width=24)


def time_plans(plans: dict[str, Any], qvecs: Any, exact: list[list[str]], allowed: set[int] | None = None
               ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each plan's milliseconds and recall@10 against `exact` per query, the plans interleaved query by query
    (their order rotated); a hit outside `allowed` rows (when given) fails the run."""
    ms: dict[str, list[float]] = {name: [] for name in plans}
    recall: dict[str, list[float]] = {name: [] for name in plans}
    names = list(plans)
    for i, v in enumerate(qvecs):
        for name in names[i % len(names):] + names[: i % len(names)]:
            t = time.perf_counter()
            hits = plans[name](v) or []
            ms[name].append((time.perf_counter() - t) * 1000)
            if name != "unfiltered":
                if allowed is not None:
                    assert {h.row for h in hits} <= allowed, name
                got = {h[0] if isinstance(h, tuple) else h.id for h in hits}
                recall[name].append(len(got & set(exact[i])) / 10)
    return ms, recall


def print_plans(ms: dict[str, list[float]], recall: dict[str, list[float]], width: int) -> None:
    """p50, its ratio to the unfiltered plan's, p95 and recall@10 of each plan."""
    ref = float(np.median(ms["unfiltered"]))
    for name in ms:
        p50 = float(np.median(ms[name]))
        r = f"{np.mean(recall[name]):.3f}" if recall[name] else "—"
        print(f"  {name:{width}s} p50 {p50:6.2f} ms  {p50 / ref:5.2f}x  p95 {np.percentile(ms[name], 95):6.2f}  "
              f"recall@10 {r}", flush=True)


if __name__ == "__main__":
    main()
