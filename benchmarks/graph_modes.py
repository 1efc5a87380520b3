"""Entity graph with spaCy NER (`graph.ner = true`, the default) vs title/alias-only (`graph.ner = false`).

    cd benchmarks && python graph_modes.py            # -> docs/benchmarks/graph-modes.{md,json}
    cd benchmarks && python graph_modes.py --reuse    # reuse bench-cache/corpus-index-title (build from the json)

Needs bench-cache/corpus-index (benchmarks/retrieval.py builds it, with NER); it is only read.
Builds bench-cache/corpus-index-title from the same stored passages and vectors (nothing is
re-embedded) with `AmsragConfig()` and `graph.ner = False`, and times the add's graph stage; the
NER index's graph-stage time comes from bench-cache/build-report.json.

Both indexes answer the same seeded sample of benchmark questions whose gold paragraphs are all in
the corpus (HotpotQA, MuSiQue: multi-hop; NQ: single-hop): the `graph` retriever alone and the
full pipeline (`Engine.retrieve(system="full")`, classifier routing, no corrective step). Reported:
Recall@5/@10, nDCG@5 per mode and the difference title - ner with a paired bootstrap 95% interval
(one resample matrix shared by both modes, amsrag.evaluate.bootstrap); graph size; latency one
query at a time, the two modes interleaved in one process (alternating which goes first).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.evaluate.bootstrap import Bootstrap
from amsrag.pipeline import Engine
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from common import CACHE, ROOT, Timer, load_benchmark, ndcg_at, percentiles, recall_at

MODES = ("ner", "title")
SYSTEMS = ("graph", "full")
MULTI_HOP = ("hotpotqa", "musique")
COMMAND = "cd benchmarks && OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python graph_modes.py"


def config_diff(a: AmsragConfig, b: AmsragConfig) -> dict:
    """Fields that differ between two configurations, section.field -> [a, b]."""
    da, db = a.model_dump(), b.model_dump()
    out = {}
    for section, fields in da.items():
        if isinstance(fields, dict):
            for k, v in fields.items():
                if v != db[section].get(k):
                    out[f"{section}.{k}"] = [v, db[section].get(k)]
        elif fields != db[section]:
            out[section] = [fields, db[section]]
    return out


def build_title_index(source: EmbeddedIndex, path: Path) -> tuple[EmbeddedIndex, dict]:
    rows = source.stored_rows()
    passages = source.passages_by_rows(rows)
    vectors = np.asarray(source.vectors_for_rows(rows), dtype=np.float32)
    if path.exists():
        shutil.rmtree(path)
    config = AmsragConfig()
    config.graph.ner = False
    index = EmbeddedIndex.create(path, config)
    t = time.perf_counter()
    report = index.add(passages, vectors=vectors)
    total = time.perf_counter() - t
    graph_s = report.seconds["graph"]
    return index, {"passages": report.added, "seconds_total_add": round(total, 2),
                   "seconds_by_stage": {k: round(v, 2) for k, v in report.seconds.items()},
                   "graph_seconds": round(graph_s, 2), "graph_passages_per_s": round(report.added / graph_s, 1),
                   "load_avg_1m_after": round(os.getloadavg()[0], 2)}


def ner_build_info() -> dict:
    b = json.loads((CACHE / "build-report.json").read_text())
    g = b["seconds_by_stage"]["graph"]
    return {"passages": b["passages"], "graph_seconds": g, "graph_passages_per_s": round(b["passages"] / g, 1),
            "seconds_by_stage": b["seconds_by_stage"], "from": "bench-cache/build-report.json"}


def groups_of(dataset: str) -> tuple[str, ...]:
    hop = "multi-hop" if dataset in MULTI_HOP else "single-hop"
    return dataset, hop, "all"


def sample_questions(questions, index: EmbeddedIndex, n: int, seed: int):
    qs = [q for q in questions if all(index.get(g) is not None for g in q.gold_passage_ids)]
    qs.sort(key=lambda q: q.id)
    random.Random(seed).shuffle(qs)
    return qs[:n]


def evaluate(indexes: dict[str, EmbeddedIndex], qs) -> dict:
    encoder = indexes["ner"].encoder  # same model for both indexes; as the engine embeds a query itself
    vectors = [encoder.encode_query(q.question) for q in qs]
    graphs = {m: retriever_for(ix, "graph") for m, ix in indexes.items()}
    engines = {m: Engine(ix) for m, ix in indexes.items()}
    for m in MODES:  # warm-up: lazy loads (query matcher, classifier, ...)
        graphs[m].search("warm up question about a film director", k=10, query_vector=vectors[0])
        engines[m].retrieve("warm up question about a film director", system="full", query_vector=vectors[0])
    # per (system, mode): metric -> per-question values, aligned with qs
    values = {(s, m): defaultdict(list) for s in SYSTEMS for m in MODES}
    lat = defaultdict(list)
    graph_runs = {m: Counter() for m in MODES}
    top5_differs = {s: [] for s in SYSTEMS}
    # The two indexes' BM25 and dense parts were built separately (HNSW is approximate, ties may break
    # differently): how often do the graph's seeds (top `seed_hits` of each) agree?
    seed_k = indexes["ner"].config.graph.seed_hits
    seed_same = Counter()
    for q, vec in zip(qs, vectors, strict=True):
        for name in ("bm25", "dense"):
            tops = [[h.id for h in retriever_for(indexes[m], name).search(q.question, k=seed_k, query_vector=vec)]
                    for m in MODES]
            seed_same[f"{name} top-{seed_k} identical"] += tops[0] == tops[1]
    for i, (q, vec) in enumerate(zip(qs, vectors, strict=True)):
        order = MODES if i % 2 == 0 else MODES[::-1]
        ranked = {}
        for m in order:
            with Timer() as t:
                hits = graphs[m].search(q.question, k=10, query_vector=vec)
            lat[f"graph retriever ({m})"].append(t.ms)
            ranked[("graph", m)] = [h.id for h in hits]
            seeds = graphs[m].seed_rows(q.question, query_vector=vec)
            with Timer() as t:
                indexes[m].entity_graph.rank(q.question, seeds, 10)
            lat[f"graph rank only, seeds given ({m})"].append(t.ms)
        for m in order:
            with Timer() as t:
                r = engines[m].retrieve(q.question, system="full", k=10, query_vector=vec)
            lat[f"full pipeline, query vector given ({m})"].append(t.ms)
            ranked[("full", m)] = [p.id for p in r.passages]
            runs = [run for run in r.trace.runs if run.name == "graph"]
            graph_runs[m]["queries with a graph run"] += bool(runs)
            graph_runs[m]["graph run errors"] += sum(run.error is not None for run in runs)
            graph_runs[m]["queries with a second hop"] += r.trace.second_hop is not None
        for (s, m), ids in ranked.items():
            v = values[(s, m)]
            v["recall@5"].append(recall_at(ids, q.gold_passage_ids, 5))
            v["recall@10"].append(recall_at(ids, q.gold_passage_ids, 10))
            v["ndcg@5"].append(ndcg_at(ids, q.gold_passage_ids, 5))
        for s in SYSTEMS:
            top5_differs[s].append(ranked[(s, "ner")][:5] != ranked[(s, "title")][:5])
        if (i + 1) % 100 == 0:
            print(f"{i + 1}/{len(qs)} questions", flush=True)
    membership = defaultdict(list)
    for i, q in enumerate(qs):
        for g in groups_of(q.dataset):
            membership[g].append(i)
    quality = {}
    for s in SYSTEMS:
        quality[s] = {}
        for g, idx in membership.items():
            sel = np.asarray(idx)
            boot = Bootstrap.draw(len(sel), seed=0)
            row: dict = {"questions": len(sel)}
            for m in MODES:
                row[m] = {k: round(float(np.mean(np.asarray(v)[sel])), 4) for k, v in values[(s, m)].items()}
            row["title - ner"] = {k: round(row["title"][k] - row["ner"][k], 4) for k in row["ner"]}
            for k in ("ndcg@5", "recall@5"):
                a = np.asarray(values[(s, "title")][k])[sel]
                b = np.asarray(values[(s, "ner")][k])[sel]
                lo, hi = boot.ci(a - b)
                row[f"{k} diff 95% CI"] = [round(lo, 4), round(hi, 4)]
                row[f"{k} diff paired p"] = round(boot.paired_p(a, b), 4)
            row["top-5 list differs"] = round(float(np.mean(np.asarray(top5_differs[s])[sel])), 4)
            quality[s][g] = row
    return {"questions": dict(Counter(q.dataset for q in qs)), "quality": quality,
            "latency_ms": {k: percentiles(v) for k, v in sorted(lat.items())},
            "full_pipeline_routes": {m: dict(c) for m, c in graph_runs.items()},
            "seed_agreement": {k: round(v / len(qs), 4) for k, v in seed_same.items()}}


# Rows of the quality table ("single-hop" is left out: NQ is the only single-hop dataset, same rows).
GROUP_ORDER = {"all": "all", "multi-hop": "multi-hop", "hotpotqa": "hotpotqa", "musique": "musique",
               "nq": "nq (single-hop)"}


def write_report(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "graph-modes.json").write_text(json.dumps(result, indent=2) + "\n")
    if "eval" not in result:
        return
    b, ev, size = result["build"], result["eval"], result["graph_size"]
    lines = [
        "# Entity graph: spaCy NER vs title/alias-only", "",
        f"Command: `{result['command']}`  ",
        f"Machine: {result['machine']}, run {result['date']}; shared 2-core VM under load "
        f"(1-min load average {result['load_avg_1m_start']} at start): read times as ratios, not promises.", "",
        "What was measured: the ~25k-passage benchmark index `bench-cache/corpus-index` (graph with spaCy NER, "
        "the default) against `bench-cache/corpus-index-title`, built from the same stored passages and vectors "
        "(nothing re-embedded) with `AmsragConfig()` and `graph.ner = false`: entities are passage titles and "
        "their aliases, matched in passage text. Configuration differences between the two indexes besides "
        f"`graph.ner`: {result['config_diff_besides_ner'] or 'none'}.", "",
        f"Questions: a seeded sample (seed {result['seed']}) of {sum(ev['questions'].values())} benchmark questions "
        f"whose gold paragraphs are all in the corpus: {ev['questions']}. HotpotQA and MuSiQue are multi-hop, "
        "NQ single-hop. Systems: the `graph` retriever alone (`retriever(\"graph\").search(q, k=10)`, which seeds "
        "its walk from BM25 + dense hits) and the full pipeline (`Engine.retrieve(q, system=\"full\", k=10)`: "
        "classifier routing, fusion, second hop; no corrective step). Both get the same query vector. "
        "Difference = title − ner; interval = paired bootstrap 95% percentile interval over questions "
        "(1,000 resamples, `amsrag.evaluate.bootstrap`), p = its paired two-sided p-value.", "",
        "## Build and size", "",
        "| mode | passages | graph stage (s) | graph passages/s | entities | edges |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for m in MODES:
        lines.append(f"| {m} | {b[m]['passages']} | {b[m]['graph_seconds']} | {b[m]['graph_passages_per_s']} | "
                     f"{size[m]['entities']} | {size[m]['edges']} |")
    lines += ["", f"NER build: {b['ner']['from']} (the run of benchmarks/retrieval.py that built the index; "
              "24,473 passages in one add, the remaining 1,000 added incrementally later). Title-only: one add of "
              f"every stored passage in this run, stages (s) {b['title']['seconds_by_stage']}.", "",
              "## Quality", "",
              "| system | group | n | R@5 ner | R@5 title | Δ R@5 | R@10 ner | R@10 title | Δ R@10 | "
              "nDCG@5 ner | nDCG@5 title | Δ nDCG@5 [95% CI] | p | top-5 differs |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for s in SYSTEMS:
        for g, label in GROUP_ORDER.items():
            row = ev["quality"][s].get(g)
            if row is None:
                continue
            n, t, d = row["ner"], row["title"], row["title - ner"]
            lo, hi = row["ndcg@5 diff 95% CI"]
            lines.append(f"| {s} | {label} | {row['questions']} | {n['recall@5']} | {t['recall@5']} | "
                         f"{d['recall@5']:+.4f} | {n['recall@10']} | {t['recall@10']} | {d['recall@10']:+.4f} | "
                         f"{n['ndcg@5']} | {t['ndcg@5']} | {d['ndcg@5']:+.4f} [{lo:+.4f}, {hi:+.4f}] | "
                         f"{row['ndcg@5 diff paired p']} | {row['top-5 list differs']} |")
    lines += ["", "`top-5 differs`: share of questions whose top-5 id list is not identical in the two modes.", "",
              f"Full pipeline routing per mode: {ev['full_pipeline_routes']}", "",
              "Seeds: share of questions whose BM25 / dense top hits (the graph's seeds) are identical in the two "
              f"indexes, built separately: {ev.get('seed_agreement', 'not measured')}.", "",
              "## Latency, one query at a time, modes interleaved (ms)", "",
              "| what | p50 | p95 | mean |", "|---|---:|---:|---:|"]
    for k, v in ev["latency_ms"].items():
        lines.append(f"| {k} | {v['p50']} | {v['p95']} | {v['mean']} |")
    lines += ["", "The graph retriever's time includes its BM25 + dense seeding (query vector given); "
              "`rank only` is the walk from precomputed seeds.", "", "## Reading", "",
              result.get("reading", "(not written yet)"), ""]
    (out / "graph-modes.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=600)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--reuse", action="store_true", help="reuse bench-cache/corpus-index-title if it exists")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    ap.add_argument("--render", action="store_true", help="only re-render graph-modes.md from graph-modes.json")
    args = ap.parse_args()
    if args.render:
        write_report(json.loads((args.out / "graph-modes.json").read_text()), args.out)
        return
    result: dict = {"command": COMMAND, "machine": f"{platform.machine()}, {platform.python_version()}",
                    "date": time.strftime("%Y-%m-%d"), "load_avg_1m_start": round(os.getloadavg()[0], 2),
                    "seed": args.seed}
    source = EmbeddedIndex.open(CACHE / "corpus-index")
    title_path = CACHE / "corpus-index-title"
    if args.reuse and title_path.exists():
        title = EmbeddedIndex.open(title_path)
        title_build = json.loads((args.out / "graph-modes.json").read_text())["build"]["title"]
    else:
        title, title_build = build_title_index(source, title_path)
        print(json.dumps(title_build), flush=True)
    expected = source.config.model_copy(deep=True)
    expected.graph.ner = False
    result["config_diff_besides_ner"] = config_diff(expected, title.config)
    result["build"] = {"ner": ner_build_info(), "title": title_build}
    result["graph_size"] = {m: {**ix.stats()["graph"], "passages": len(ix)}
                            for m, ix in (("ner", source), ("title", title))}
    write_report(result, args.out)  # keeps the build numbers should the evaluation fail
    _, questions = load_benchmark()
    qs = sample_questions(questions, source, args.questions, args.seed)
    result["eval"] = evaluate({"ner": source, "title": title}, qs)
    write_report(result, args.out)
    print(json.dumps(result["eval"]["quality"]["graph"]["all"], indent=1))
    print(json.dumps(result["eval"]["quality"]["full"]["all"], indent=1))


if __name__ == "__main__":
    main()
