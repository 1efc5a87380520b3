"""Retrieval benchmark on the union of ../shared/data paragraphs (~30k passages).

    python benchmarks/retrieval.py            # builds (or reuses) bench-cache/corpus-index, writes docs/benchmarks/

Measures: build time per stage and passages/s; an incremental add of 1,000 passages and a delete
of 1,000 (no stored passage re-embedded); per-retriever latency one query at a time (p50/p95);
Recall@5/@10 and nDCG@5 against gold paragraphs of the HotpotQA, MuSiQue and NQ questions; for
HotpotQA bridge questions the recall of the gold paragraph sharing no content word with the
question; HNSW recall@10 against exact search.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from amsrag.indexes.bm25 import BM25Tokenizer
from amsrag.progress import RichProgress
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from common import CACHE, ROOT, Timer, load_benchmark, ndcg_at, percentiles, recall_at
from embed_corpus import load_cached

HELD_OUT = 1000  # passages added incrementally after the main build


def build_index(path: Path, passages, fresh: bool) -> tuple[EmbeddedIndex, dict]:
    info: dict = {}
    if fresh and path.exists():
        shutil.rmtree(path)
    rng = random.Random(7)
    order = list(range(len(passages)))
    rng.shuffle(order)
    held = [passages[i] for i in order[:HELD_OUT]]
    base = [passages[i] for i in order[HELD_OUT:]]
    if path.exists():
        index = EmbeddedIndex.open(path)
        info["build"] = json.loads((path.parent / "build-report.json").read_text())
    else:
        index = EmbeddedIndex.create(path)
        cached = load_cached(index.encoder.model_id)
        vectors = None
        if cached is not None:
            pos, all_vectors, meta = cached
            vectors = all_vectors[[pos[p.content_hash] for p in base]]
        t = time.perf_counter()
        with RichProgress() as progress:
            report = index.add(base, progress=progress, vectors=vectors)
        total = time.perf_counter() - t
        stages = {k: round(v, 2) for k, v in report.seconds.items()}
        if cached is not None:  # embedding measured by embed_corpus.py over the whole corpus
            stages["embed"] = round(meta["seconds"] * len(base) / meta["passages"], 1)
            total += stages["embed"]
        info["build"] = {"passages": report.added, "seconds_total": round(total, 2), "seconds_by_stage": stages,
                         "passages_per_s": round(report.added / total, 1),
                         "embed_passages_per_s": round(report.added / stages["embed"], 1),
                         "embedding": "benchmarks/embed_corpus.py (2 threads), vectors handed to add()"
                         if cached is not None else "inside add()"}
        (path.parent / "build-report.json").write_text(json.dumps(info["build"], indent=2))
    # Incremental add then delete of the held-out passages (measured every run, state restored).
    present = {p.id for p in held if index.get(p.id) is not None}
    if present:
        index.delete(sorted(present))
    t = time.perf_counter()
    rep = index.add(held)  # embeds the 1,000 new passages for real
    add_s = time.perf_counter() - t
    info["incremental_add"] = {"onto": len(index) - rep.added, "added": rep.added, "seconds_total": round(add_s, 2),
                               "seconds_by_stage": {k: round(v, 2) for k, v in rep.seconds.items()},
                               "embedded": rep.added}
    held_rows = index.rows_for_ids([p.id for p in held])
    held_vectors = index.vectors_for_rows([held_rows[p.id] for p in held])
    t = time.perf_counter()
    drep = index.delete([p.id for p in held])
    info["incremental_delete"] = {"deleted": drep.deleted, "seconds_total": round(time.perf_counter() - t, 2),
                                  "seconds_by_stage": {k: round(v, 2) for k, v in drep.seconds.items()}}
    index.add(held, vectors=held_vectors)
    return index, info


def no_shared_word_gold(index: EmbeddedIndex, questions, tokenizer: BM25Tokenizer) -> dict[str, list[str]]:
    """HotpotQA bridge question id -> its gold passages that share no content word with the question."""
    out = {}
    for q in questions:
        if q.dataset != "hotpotqa" or q.qtype != "bridge":
            continue
        qwords = tokenizer.content_words(q.question)
        lonely = []
        for pid in q.gold_passage_ids:
            p = index.get(pid)
            if p is not None and not (tokenizer.content_words(p.title + " " + p.text) & qwords):
                lonely.append(pid)
        if lonely:
            out[q.id] = lonely
    return out


def evaluate(index: EmbeddedIndex, questions, limit: int | None) -> dict:
    rng = random.Random(11)
    qs = [q for q in questions if all(index.get(g) is not None for g in q.gold_passage_ids)]
    if limit:
        rng.shuffle(qs)
        qs = qs[:limit]
    tokenizer = BM25Tokenizer(index.config.bm25)
    lonely = no_shared_word_gold(index, qs, tokenizer)
    encoder = index.encoder
    retrievers = {name: retriever_for(index, name) for name in ("bm25", "dense", "graph")}
    # warm-up (first calls pay lazy loads)
    for r in retrievers.values():
        r.search("warm up query", k=10)
    lat = defaultdict(list)
    metrics = defaultdict(lambda: defaultdict(list))
    lonely_hits = defaultdict(lambda: defaultdict(list))
    vectors = {}
    for q in qs:
        with Timer() as t:
            vec = encoder.encode_query(q.question)
        lat["embed"].append(t.ms)
        vectors[q.id] = vec
        ranked = {}
        with Timer() as t:
            hits = retrievers["bm25"].search(q.question, k=10)
        lat["bm25"].append(t.ms)
        ranked["bm25"] = [h.id for h in hits]
        with Timer() as t:
            hits = retrievers["dense"].search(q.question, k=10)  # embeds the query itself
        lat["dense (incl. embedding)"].append(t.ms)
        ranked["dense"] = [h.id for h in hits]
        with Timer() as t:
            hits = retrievers["graph"].search(q.question, k=10, query_vector=vec)
        lat["graph (query vector shared, incl. its bm25+dense seeding)"].append(t.ms)
        ranked["graph"] = [h.id for h in hits]
        for name, ids in ranked.items():
            for group in (q.dataset, "all"):
                metrics[name][f"{group}/recall@5"].append(recall_at(ids, q.gold_passage_ids, 5))
                metrics[name][f"{group}/recall@10"].append(recall_at(ids, q.gold_passage_ids, 10))
                metrics[name][f"{group}/ndcg@5"].append(ndcg_at(ids, q.gold_passage_ids, 5))
            for pid in lonely.get(q.id, []):
                lonely_hits[name]["recall@5"].append(float(pid in ids[:5]))
                lonely_hits[name]["recall@10"].append(float(pid in ids[:10]))
    # graph ranking alone, seeds precomputed (what the graph itself costs)
    graph = retrievers["graph"]
    rank_ms = []
    for q in qs[:300]:
        seeds = graph.seed_rows(q.question, query_vector=vectors[q.id])
        with Timer() as t:
            index.entity_graph.rank(q.question, seeds, 10)
        rank_ms.append(t.ms)
    lat["graph rank only (seeds given)"] = rank_ms
    hnsw = hnsw_recall(index, [vectors[q.id] for q in qs[:500]])
    counts = defaultdict(int)
    for q in qs:
        counts[q.dataset] += 1
    return {
        "questions": dict(counts),
        "bridge_no_shared_word_passages": sum(len(v) for v in lonely.values()),
        "latency_ms": {k: percentiles(v) for k, v in lat.items()},
        "quality": {n: {k: round(float(np.mean(v)), 4) for k, v in m.items()} for n, m in metrics.items()},
        "bridge_no_shared_word": {n: {k: round(float(np.mean(v)), 4) for k, v in m.items()}
                                  for n, m in lonely_hits.items()},
        "hnsw_vs_exact_recall@10": hnsw,
    }


def hnsw_recall(index: EmbeddedIndex, vectors) -> dict:
    dense = retriever_for(index, "dense")
    if index.vector_index.kind != "hnsw":
        return {"kind": "exact", "recall@10": 1.0}
    rec = []
    for v in vectors:
        approx = {h.id for h in dense.search("q", k=10, query_vector=v)}
        exact = {h.id for h in dense.search("q", k=10, query_vector=v, exact=True)}
        rec.append(len(approx & exact) / 10)
    return {"kind": "hnsw", "queries": len(vectors), "recall@10": round(float(np.mean(rec)), 4),
            "params": {"M": index.config.dense.hnsw_m, "ef_construction": index.config.dense.hnsw_ef_construction,
                       "ef_search": index.config.dense.hnsw_ef_search}}


def write_report(result: dict, out_dir: Path, command: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "retrieval.json").write_text(json.dumps(result, indent=2))
    b, ev = result["build"], result["eval"]
    lines = [
        "# Retrieval benchmark (embedded store)", "",
        f"Command: `{command}`  ", f"Machine: {result['machine']}, run {result['date']}. "
        "Shared 2-core VM: read latencies as ratios, not promises.", "",
        f"Corpus: {result['corpus']['passages']} passages (union of ../shared/data paragraphs: HotpotQA, MuSiQue, "
        "NQ oracle, SQuAD, Wikipedia noise; deduplicated by content).", "",
        "## Build", "",
        "Full-build numbers come from the run that built `bench-cache/corpus-index` (`--fresh` rebuilds it); "
        "the incremental add and delete are measured on every run.", "",
        f"- full build of {b['passages']} passages: {b['seconds_total']} s ({b['passages_per_s']} passages/s); "
        f"embedding alone {b['embed_passages_per_s']} passages/s",
        f"- by stage (s): {b['seconds_by_stage']}",
        f"- incremental add of {result['incremental_add']['added']} passages onto "
        f"{result['incremental_add']['onto']}: {result['incremental_add']['seconds_total']} s, by stage "
        f"{result['incremental_add']['seconds_by_stage']}; only the {result['incremental_add']['embedded']} new "
        "passages were embedded",
        f"- delete of {result['incremental_delete']['deleted']}: {result['incremental_delete']['seconds_total']} s, "
        f"by stage {result['incremental_delete']['seconds_by_stage']}", "",
        "## Latency, one query at a time (ms)", "", "| what | p50 | p95 | mean |", "|---|---:|---:|---:|",
    ]
    for k, v in ev["latency_ms"].items():
        lines.append(f"| {k} | {v['p50']} | {v['p95']} | {v['mean']} |")
    lat = ev["latency_ms"]
    lines += ["", "Targets at ~30k passages (p50): "
              f"bm25 ≤ 3 ms → {lat['bm25']['p50']}; dense incl. embedding ≤ 12 ms → "
              f"{lat['dense (incl. embedding)']['p50']}; graph ≤ 10 ms → "
              f"{lat['graph (query vector shared, incl. its bm25+dense seeding)']['p50']} (with its seeding)."]
    lines += ["", f"Questions: {ev['questions']}", "", "## Quality against gold paragraphs", "",
              "| retriever | group | Recall@5 | Recall@10 | nDCG@5 |", "|---|---|---:|---:|---:|"]
    for name, m in ev["quality"].items():
        groups = sorted({k.split('/')[0] for k in m})
        for g in groups:
            lines.append(f"| {name} | {g} | {m[g + '/recall@5']} | {m[g + '/recall@10']} | {m[g + '/ndcg@5']} |")
    lines += ["", f"## HotpotQA bridge: the gold paragraph sharing no content word with the question "
              f"({ev['bridge_no_shared_word_passages']} paragraphs)", "",
              "| retriever | Recall@5 | Recall@10 |", "|---|---:|---:|"]
    for name, m in ev["bridge_no_shared_word"].items():
        lines.append(f"| {name} | {m['recall@5']} | {m['recall@10']} |")
    lines += ["", f"## HNSW vs exact: {ev['hnsw_vs_exact_recall@10']}", ""]
    (out_dir / "retrieval.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh", action="store_true", help="rebuild the cached benchmark index")
    ap.add_argument("--limit", type=int, default=None, help="score at most this many questions")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    ap.add_argument("--render", action="store_true", help="only re-render retrieval.md from retrieval.json")
    args = ap.parse_args()
    if args.render:
        result = json.loads((args.out / "retrieval.json").read_text())
        write_report(result, args.out, result.get("command", "python benchmarks/retrieval.py"))
        return
    passages, questions = load_benchmark()
    CACHE.mkdir(exist_ok=True)
    index, info = build_index(CACHE / "corpus-index", passages, args.fresh)
    result = {"machine": f"{platform.machine()}, {platform.python_version()}",
              "date": time.strftime("%Y-%m-%d"), "corpus": {"passages": len(index)}, **info,
              "eval": evaluate(index, questions, args.limit)}
    cmd = "python benchmarks/retrieval.py" + (f" --limit {args.limit}" if args.limit else "")
    result["command"] = cmd
    write_report(result, args.out, cmd)
    print(json.dumps(result["eval"]["latency_ms"], indent=1))
    print(json.dumps(result["eval"]["bridge_no_shared_word"], indent=1))


if __name__ == "__main__":
    main()
