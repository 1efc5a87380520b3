"""Measure the entity graph on a ~27k-passage corpus assembled from ../shared/data.

Build time per stage, rank latency, incremental update time, and the recall that matters: for
HotpotQA bridge questions, the gold paragraph that shares no content word with the question, at
5 and 10, graph (seeded by BM25 top-5 + the query's entities) against BM25 alone.

    python benchmarks/graph_probe.py [--data ../shared/data] [--work /tmp/graph_probe] [--grid]

BM25 here is bm25s directly (stemmed, English stop words), not amsrag's retriever.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer

from amsrag.config import GraphConfig
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.types import PassageRow, content_hash, normalise_whitespace, passage_id_for

SEEDS = 5
DEPTH = 100


@dataclass
class Question:
    id: str
    question: str
    gold: dict[str, str]  # gold title -> its paragraph text
    qtype: str


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _hotpot_rows(data: Path) -> Iterator[tuple[str, str]]:
    for name in ("train", "dev"):
        for ex in _jsonl(data / f"hotpotqa/rpt_hotpot_distractor_validation_{name}.jsonl"):
            ctx = ex["context"]
            yield from ((t, "".join(s)) for t, s in zip(ctx["title"], ctx["sentences"], strict=True))
    for ex in _jsonl(data / "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl"):
        yield from ((c["title"], c["paragraph_text"]) for c in ex["contexts"])
    for ex in _jsonl(data / "hotpotqa/migres_hotpot_200.jsonl"):
        yield from ((t, "".join(s)) for t, s in ex["context"])
    corpus = json.loads((data / "hotpotqa/hipporag_hotpotqa_train_100_corpus.json").read_text())
    yield from ((t, "".join(s)) for t, s in corpus.items())


def _other_rows(data: Path) -> Iterator[tuple[str, str]]:
    for ex in _jsonl(data / "musique/migres_musique_200.jsonl"):
        yield from ((p["title"], p["paragraph_text"]) for p in ex["paragraphs"])
    corpus = json.loads((data / "musique/hipporag_musique_train_100_corpus.json").read_text())
    yield from ((p["title"], p["text"]) for p in corpus)
    for ex in _jsonl(data / "nq/lostinthemiddle_nq-open-oracle.jsonl.gz"):
        yield from ((c["title"], c["text"]) for c in ex["ctxs"])
    squad = json.loads((data / "squad/squad_v1.1_subset_20articles.json").read_text())
    for article in squad["data"]:
        yield from ((article["title"].replace("_", " "), p["context"]) for p in article["paragraphs"])
    for ex in json.loads((data / "squad/routerlens_squad_dev_4330.json").read_text()):
        yield "", ex["context"]
    for ex in _jsonl(data / "flashrag/wiki_sample_corpus_1000.jsonl"):
        title, _, text = ex["contents"].partition("\n")
        yield title.strip().strip('"'), text


def load_corpus(data: Path) -> list[PassageRow]:
    seen: set[str] = set()
    rows: list[PassageRow] = []
    for title, text in [*_hotpot_rows(data), *_other_rows(data)]:
        title, text = normalise_whitespace(title), normalise_whitespace(text)
        key = content_hash(title, text)
        if text and key not in seen:
            seen.add(key)
            rows.append(PassageRow(len(rows), passage_id_for(title, text), title, text))
    return rows


def _comparison_like(question: str, answer: str, gold_titles: list[str]) -> bool:
    """For ircot questions without a type: yes/no answers or every gold title named in the question."""
    q = question.lower()
    return answer.lower() in {"yes", "no"} or all(t.split(" (")[0].lower() in q for t in gold_titles)


def load_questions(data: Path) -> list[Question]:
    out: dict[str, Question] = {}
    for name in ("train", "dev"):
        for ex in _jsonl(data / f"hotpotqa/rpt_hotpot_distractor_validation_{name}.jsonl"):
            ctx = dict(zip(ex["context"]["title"], ex["context"]["sentences"], strict=True))
            gold = {t: normalise_whitespace("".join(ctx[t])) for t in set(ex["supporting_facts"]["title"])}
            out.setdefault(ex["id"], Question(ex["id"], ex["question"], gold, ex["type"]))
    for ex in _jsonl(data / "hotpotqa/migres_hotpot_200.jsonl"):
        ctx = dict((t, s) for t, s in ex["context"])
        gold = {t: normalise_whitespace("".join(ctx[t])) for t, _ in ex["supporting_facts"]}
        out.setdefault(ex["_id"], Question(ex["_id"], ex["question"], gold, ex["type"]))
    for ex in _jsonl(data / "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl"):
        if ex["question_id"] in out:
            continue
        gold = {c["title"]: normalise_whitespace(c["paragraph_text"]) for c in ex["contexts"] if c["is_supporting"]}
        answer = ex["answers_objects"][0]["spans"][0]
        qtype = "comparison" if _comparison_like(ex["question_text"], answer, list(gold)) else "bridge"
        out[ex["question_id"]] = Question(ex["question_id"], ex["question_text"], gold, qtype)
    return [q for q in out.values() if len(q.gold) == 2]


def _tokens(texts: list[str], stemmer: Stemmer.Stemmer) -> list[set[str]]:
    toks = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    return [set(t) for t in toks]


def target_sets(questions: list[Question], stemmer: Stemmer.Stemmer) -> dict[str, list[set[str]]]:
    """Per question, gold titles of three kinds: "nooverlap" shares no content word with the question
    (the set the brief asks for; small), "overlap<=1" shares at most one, "second" is the gold that
    shares fewer than the other gold (no tie)."""
    q_tok = _tokens([q.question for q in questions], stemmer)
    out: dict[str, list[set[str]]] = {"nooverlap": [], "overlap<=1": [], "second": []}
    for q, qt in zip(questions, q_tok, strict=True):
        titles = list(q.gold)
        shared = [len(qt & gt) for gt in _tokens([q.gold[t] for t in titles], stemmer)]
        out["nooverlap"].append({t for t, n in zip(titles, shared, strict=True) if n == 0})
        out["overlap<=1"].append({t for t, n in zip(titles, shared, strict=True) if n <= 1})
        fewest = min(shared)
        out["second"].append({titles[shared.index(fewest)]} if shared.count(fewest) == 1 else set())
    return out


def bm25_run(rows: list[PassageRow], questions: list[Question], stemmer: Stemmer.Stemmer) -> np.ndarray:
    t0 = time.perf_counter()
    corpus = bm25s.tokenize(
        [f"{r.title}\n{r.text}" for r in rows], stopwords="en", stemmer=stemmer, show_progress=False
    )
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    qtok = bm25s.tokenize([q.question for q in questions], stopwords="en", stemmer=stemmer, show_progress=False)
    docs, _ = index.retrieve(qtok, k=DEPTH, show_progress=False, n_threads=1)
    print(f"bm25s index + {len(questions)} queries: {time.perf_counter() - t0:.1f} s")
    return np.asarray(docs)


def build_or_load(rows: list[PassageRow], work: Path, config: GraphConfig) -> tuple[EntityGraph, dict]:
    target = work / "graph"
    if (target / "graph.json").is_file():
        return EntityGraph.load(target), json.loads((work / "build_stats.json").read_text())
    done = [0]
    t0 = time.perf_counter()
    ner_end = [0.0]

    def progress(n: int) -> None:
        done[0] += n
        if done[0] >= len(rows):
            ner_end[0] = time.perf_counter()

    graph = EntityGraph.build(rows, config, progress=progress)
    t1 = time.perf_counter()
    stats = {
        "passages": len(rows),
        "ner_s": ner_end[0] - t0,
        "assemble_s": t1 - ner_end[0],
        "total_s": t1 - t0,
        "ner_passages_per_s": len(rows) / (ner_end[0] - t0),
        "n_entities": graph.n_entities,
        "n_edges": graph.n_edges,
    }
    target.mkdir(parents=True)
    t2 = time.perf_counter()
    graph.save(target)
    stats["save_s"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    EntityGraph.load(target)
    stats["load_s"] = time.perf_counter() - t3
    (work / "build_stats.json").write_text(json.dumps(stats, indent=1))
    return graph, stats


def _hit(titles: list[str], gold: set[str]) -> set[str]:
    return gold & set(titles)


def evaluate(
    graph: EntityGraph,
    rows: list[PassageRow],
    questions: list[Question],
    bm25: np.ndarray,
    targets: dict[str, list[set[str]]],
) -> dict[str, float]:
    found: dict[str, int] = {}
    totals = {name: sum(len(t) for t in sets) for name, sets in targets.items()}
    totals["all"] = sum(len(q.gold) for q in questions)
    times: list[float] = []
    for i, (q, docs) in enumerate(zip(questions, bm25, strict=True)):
        seeds = [(int(r), 1.0 / (j + 1)) for j, r in enumerate(docs[:SEEDS])]
        t0 = time.perf_counter()
        ranked = graph.rank(q.question, seeds, 10)
        times.append((time.perf_counter() - t0) * 1000)
        g_titles = [rows[r].title for r, _, _ in ranked]
        b_titles = [rows[int(r)].title for r in docs[:10]]
        gold = {"all": set(q.gold)} | {name: sets[i] for name, sets in targets.items()}
        for system, titles in (("graph", g_titles), ("bm25", b_titles), ("rrf", _rrf([b_titles, g_titles]))):
            for k in (5, 10):
                for name, wanted in gold.items():
                    key = f"{system}_{name}@{k}"
                    found[key] = found.get(key, 0) + len(wanted & set(titles[:k]))
    out: dict[str, float] = {}
    for key, n in found.items():
        target = key.split("_", 1)[1].split("@")[0]
        out[key] = round(n / max(totals[target], 1), 4)
    out.update({f"n_{name}": float(n) for name, n in totals.items()})
    out.update(p50_ms=_pct(times, 50), p95_ms=_pct(times, 95))
    return out


def _rrf(lists: list[list[str]], k: int = 60) -> list[str]:
    score: dict[str, float] = {}
    for titles in lists:
        for rank, t in enumerate(titles):
            score[t] = score.get(t, 0.0) + 1.0 / (k + rank + 1)
    return sorted(score, key=lambda t: (-score[t], t))


def _pct(values: list[float], p: int) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def measure_update(graph: EntityGraph, rows: list[PassageRow]) -> dict[str, float]:
    """Remove the last 1,000 passages (no NER needed), add them back; compare with the full graph."""
    base, extra = rows[:-1000], rows[-1000:]
    t0 = time.perf_counter()
    smaller = graph.update([], [r.row for r in extra], lambda: base)
    t1 = time.perf_counter()
    ner_done = [0.0]

    def progress(_n: int) -> None:
        ner_done[0] = time.perf_counter()

    grown = smaller.update(extra, [], lambda: rows, progress=progress)
    t2 = time.perf_counter()
    same = (
        grown.entity_keys == graph.entity_keys
        and grown.matrix.shape == graph.matrix.shape
        and (grown.matrix != graph.matrix).nnz == 0
    )
    return {
        "remove_1000_s": round(t1 - t0, 3),
        "add_1000_total_s": round(t2 - t1, 3),
        "add_1000_ner_s": round(ner_done[0] - t1, 3),
        "add_1000_rest_s": round(t2 - ner_done[0], 3),
        "equals_full_build": bool(same),
    }


def latency(graph: EntityGraph, questions: list[Question], bm25: np.ndarray) -> dict[str, float]:
    out = {}
    for label, cfg in (("with_query_ner", {"query_ner": True}), ("without_query_ner", {"query_ner": False})):
        g = graph.with_config(graph.config.model_copy(update=cfg))
        times = []
        for q, docs in zip(questions, bm25, strict=True):
            seeds = [(int(r), 1.0 / (i + 1)) for i, r in enumerate(docs[:SEEDS])]
            t0 = time.perf_counter()
            g.rank(q.question, seeds, 10)
            times.append((time.perf_counter() - t0) * 1000)
        out[f"{label}_p50_ms"] = _pct(times, 50)
        out[f"{label}_p95_ms"] = _pct(times, 95)
        out[f"{label}_mean_ms"] = statistics.fmean(times)
    return out


GRID: list[dict[str, Any]] = [
    {"score": "ppr"},
    {"query_ner": True},
    {"restart": 0.1},
    {"restart": 0.3},
    {"restart": 0.5},
    {"title_weight": 2.0},
    {"title_weight": 5.0},
    {"title_weight": 100.0},
    {"query_entity_weight": 0.2},
    {"query_entity_weight": 0.8},
    {"max_entity_degree": 50},
    {"max_entity_degree": 1000},
    {"iterations": 5},
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/graph_probe"))
    ap.add_argument("--grid", action="store_true", help="evaluate the tuning grid too")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--skip-update", action="store_true")
    ap.add_argument("--reassemble", action="store_true", help="rebuild the structure from the stored NER")
    args = ap.parse_args()
    if args.rebuild and args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = load_corpus(args.data)
    questions = [q for q in load_questions(args.data) if q.qtype == "bridge"]
    print(f"corpus: {len(rows)} passages; bridge questions: {len(questions)}")
    stemmer = Stemmer.Stemmer("english")
    graph, stats = build_or_load(rows, args.work, GraphConfig())
    graph = graph.with_config(GraphConfig())  # today's query-time defaults on a stored graph
    if args.reassemble:  # pick up code changes without re-running NER
        t0 = time.perf_counter()
        graph = graph.update([], [], lambda: rows)
        print(f"reassembled from the stored NER in {time.perf_counter() - t0:.2f} s")
    print("build:", json.dumps(stats))
    bm25 = bm25_run(rows, questions, stemmer)
    targets = target_sets(questions, stemmer)
    print("default:", json.dumps(evaluate(graph, rows, questions, bm25, targets)))
    print("latency:", json.dumps(latency(graph, questions, bm25)))
    if args.grid:
        for override in GRID:
            g = graph.with_config(graph.config.model_copy(update=override))
            print(json.dumps(override), json.dumps(evaluate(g, rows, questions, bm25, targets)))
    if not args.skip_update:
        print("update:", json.dumps(measure_update(graph, rows)))


if __name__ == "__main__":
    main()
