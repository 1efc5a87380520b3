"""PostgreSQL dense search within a filter: partial HNSW indexes and an in-process gather against the shipped
plan, interleaved query by query on one held index (issue 38).

    OMP_NUM_THREADS=1 python benchmarks/pg_dense_within.py --hold          # prints the index's URL
    OMP_NUM_THREADS=1 python benchmarks/pg_within_plans.py --url URL [--queries 150] [--efs 40,64,100,128]

On the index of benchmarks/filters.py (25k passages), for the benchmark's large filters (20-51 % of the passages):
- `unfiltered`: `search` (pgvector's HNSW over every passage, ef `hnsw_ef_search`), the ratio's reference;
- `shipped`: `search_within` with the total (the store's plan at that share: since issue 38's gather commit, the
  gather below as the store keeps it), `iterative`: the plan shipped before it (pgvector's iterative HNSW scan with
  the allowed rows as a bitmap, ef 400, from 25 % of the passages), `exact`: the exact scan by key;
- `partial efN`: a partial HNSW index per frequent `type` value (`WHERE metadata->>'type' = 'pdf'`, built here
  once, its build seconds and size printed) searched with the same WHERE, iteratively (`relaxed_order`) with
  the rest of the filter as the shipped bitmap check, LIMIT 20, re-scored exactly;
- `gather`: the allowed rows' vectors read once into the process (binary, the first query's cost printed), each
  query a float32 matrix-vector product, the rows tied with the k-th score and better described in one
  statement with the generation (as the BM25 retriever's in-process index): exact.
Each plan's p50 as a ratio of the same run's unfiltered p50, and recall@10 against the exact scan.
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
from filters import main_data
from pg_dense_within import BITS, bitmap, print_plans, time_plans

FILTERS = (("type=pdf source=guides/1*", ["type=pdf", "source=guides/1*"], "pdf"),
           ("type=html", ["type=html"], "html"),
           ("modified 2024", ["modified>=2024-01-01", "modified<2025-01-01"], None),
           ("type=pdf", ["type=pdf"], "pdf"))
PARTIAL_SQL = ("SELECT prow, id, title, embedding FROM passages WHERE metadata->>'type' = %(kind)s {extra} "
               "ORDER BY embedding <=> %(q)s LIMIT 20")
DESCRIBE_SQL = ("SELECT (SELECT (value::text)::bigint FROM meta WHERE key = 'generation'), "
                "array_agg(prow), array_agg(id), array_agg(title) FROM passages WHERE prow = ANY(%s::bigint[])")


def partial_indexes(dsn: str, kinds: list[str]) -> None:
    """A partial HNSW index per type value (the store's m, ef_construction), its build time and size printed."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET search_path = amsrag, public")
        c.execute("SET maintenance_work_mem = '256MB'")
        for kind in kinds:
            name = f"passages_hnsw_type_{kind}"
            if c.execute("SELECT to_regclass(%s)", (f"amsrag.{name}",)).fetchone()[0] is None:
                t = time.perf_counter()
                c.execute(f"CREATE INDEX {name} ON passages USING hnsw (embedding vector_cosine_ops) "
                          f"WITH (m = 16, ef_construction = 200) WHERE metadata->>'type' = '{kind}'")
                print(f"built {name} in {time.perf_counter() - t:.1f} s", flush=True)
            size = c.execute("SELECT pg_relation_size(%s)", (f"amsrag.{name}",)).fetchone()[0]
            full = c.execute("SELECT pg_relation_size('amsrag.passages_embedding_hnsw')").fetchone()[0]
            print(f"{name}: {size / 2**20:.1f} MB (the full HNSW index: {full / 2**20:.1f} MB)", flush=True)


def partial_plan(dense: Any, kind: str, ef: int, narrower: dict[str, Any] | None) -> Any:
    sql = PARTIAL_SQL.format(extra=f"AND {BITS}" if narrower else "")

    def run(qvec: np.ndarray) -> list[Any]:
        def fetch(c: Any) -> list[tuple]:
            with c.pipeline(), c.transaction():
                c.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                          "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                          "set_config('enable_seqscan', 'off', true), "
                          "set_config('max_parallel_workers_per_gather', '0', true)", (str(ef),))
                cur = c.execute(sql, {"q": qvec, "kind": kind, **(narrower or {})}, binary=True)
            return cur.fetchall()
        return dense._ranked(dense.index.read(fetch), qvec, 10)
    return run


def gather_plan(dense: Any, rows: np.ndarray) -> tuple[Any, float]:
    """The gather plan and the seconds its gather took."""
    t = time.perf_counter()
    got = dense.index.read(lambda c: c.execute(
        "SELECT prow, embedding FROM passages WHERE prow = ANY(%s::text::bigint[]) ORDER BY prow",
        ("{" + ",".join(map(str, rows.tolist())) + "}",), binary=True).fetchall())
    kept = np.asarray([r for r, _ in got], dtype=np.int64)
    matrix = np.stack([np.asarray(v, dtype=np.float32) for _, v in got])
    took = time.perf_counter() - t

    def run(qvec: np.ndarray) -> list[tuple[str, float]]:
        scores = matrix @ qvec
        cand = np.argpartition(scores, len(scores) - 10)[len(scores) - 10:]
        cand = np.flatnonzero(scores >= scores[cand].min())
        _, prows, ids, _ = dense.index.read(lambda c: c.execute(DESCRIBE_SQL, (kept[cand].tolist(),)).fetchone())
        by_row = dict(zip(prows, ids, strict=True))
        ranked = sorted(((by_row[int(kept[i])], float(scores[i])) for i in cand), key=lambda x: (-x[1], x[0]))
        return ranked[:10]
    return run, took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=25_000)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--efs", default="40,64,100,128")
    ap.add_argument("--url", required=True, help="an index benchmarks/pg_dense_within.py --hold keeps")
    args = ap.parse_args()
    _, _, _, pairs = main_data(args.passages, args.queries, np.random.default_rng(0))
    qvecs = [v for _, v in pairs]
    from amsrag.retrievers import retriever_for
    from amsrag.store.open import open_index
    with open_index(args.url) as idx:
        dense = retriever_for(idx, "dense")
        partial_indexes(args.url, ["pdf", "html"])
        n = args.passages
        for label, specs, kind in FILTERS:
            rows = np.asarray(idx.allowed_rows(Where.parse(specs)).rows, dtype=np.int64)
            exact = [[h.id for h in dense.search_within("q", 10, rows, v)] for v in qvecs]
            plans: dict[str, Any] = {
                "unfiltered": lambda v: dense.search("q", 10, query_vector=v),
                "exact": lambda v, rows=rows: dense.search_within("q", 10, rows, v),
                "shipped": lambda v, rows=rows: dense.search_within("q", 10, rows, v, total=n),
                "iterative": lambda v, rows=rows: dense._iterative_within(v, 10, rows)}
            if kind:
                narrower = None if specs == [f"type={kind}"] else {"bits": bitmap(rows, int(rows.max())),
                                                                   "last": int(rows.max())}
                for ef in [int(e) for e in args.efs.split(",")]:
                    plans[f"partial ef{ef}"] = partial_plan(dense, kind, ef, narrower)
            plans["gather"], took = gather_plan(dense, rows)
            print(f"\n{label}: {len(rows)} allowed ({len(rows) / n:.0%}); gather {took * 1000:.0f} ms", flush=True)
            print_plans(*time_plans(plans, qvecs, exact), width=14)


if __name__ == "__main__":
    main()
