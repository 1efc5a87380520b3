"""Chinese entities for the entity graph: NER quality and speed, and the graph retriever on CMRC 2018.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/zh_entities.py [--data ../shared/data] \
        [--baseline-src ../main/src] [--out docs/benchmarks/zh-entities]

1. Mention quality on 45 hand-labelled sentences of CMRC train paragraphs (`benchmarks/data/zh_ner_gold.jsonl`,
   91 entities: persons, places, organisations, works, named facilities and products, Latin-script names
   included; a gold entity may list accepted variants, "冯素弗墓|冯素弗"). Precision: predicted surfaces that
   are a gold variant; recall: gold entities with a variant predicted; one set per sentence.
2. Title recall on the CMRC train paragraphs: other passages' titles (and aliases, at least two Han
   characters) that occur in a paragraph are gold mentions; the share of them an extractor outputs
   exactly. It tells how often NER alone finds a name the graph knows as a title.
3. Speed: passages per second over 400 CMRC paragraphs, one thread.
4. English unchanged: title matching over HotpotQA's distractor dev paragraphs (up to 5,000 distinct: 2,937;
   their titles as patterns) and NER on 500 of them, outputs and times, this tree against `--baseline-src`
   (each in a child process).
5. The graph retriever alone on the CMRC test questions (806) over all 2,827 paragraphs: Recall@5 of the
   gold paragraph, the walk seeded by BM25's top 5 and the question's entities. BM25 here is bm25s over
   jieba words (search mode), not amsrag's retriever. "today" is the graph of `--baseline-src` (the
   main checkout: whole-word title matching, spaCy English NER on every passage) built in a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "benchmarks" / "data" / "zh_ner_gold.jsonl"
GRAPH_LABELS = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW", "LANGUAGE")
SEEDS = 5
K = 5
SPEED_PASSAGES = 400
GRAPH_RUNS = (  # (name, source tree, NER on?)
    ("today", "baseline", "ner"),
    ("titles only (CJK title matching, no NER)", "this", "no_ner"),
    ("with Chinese entities", "this", "ner"),
)

Extractor = Callable[[Sequence[str]], list[set[str]]]


# ---- extractors --------------------------------------------------------------------------------------------
def ours(texts: Sequence[str]) -> list[set[str]]:
    from amsrag.indexes.entities_zh import extract_ner_zh

    return [set(found) for found in extract_ner_zh(texts, GRAPH_LABELS)]


def jieba_tags(texts: Sequence[str]) -> list[set[str]]:
    """jieba's proper-noun tags as they come (nr*, ns*, nt, nz; two characters or more)."""
    from amsrag.indexes.entities_zh import _tagger

    tagger = _tagger()
    return [{p.word for p in tagger.cut(t) if p.flag in ("nr", "nrfg", "nrt", "ns", "nsf", "nt", "nz")
             and len(p.word) >= 2} for t in texts]


def spacy_en(texts: Sequence[str]) -> list[set[str]]:
    """What the graph ran on Chinese passages before: en_core_web_sm's NER."""
    from amsrag.indexes.entities import extract_ner

    return [set(found) for found in extract_ner(texts, GRAPH_LABELS, chinese=False)]


EXTRACTORS: dict[str, Extractor] = {"jieba+rules (entities_zh)": ours, "jieba tags only": jieba_tags,
                                    "spaCy en_core_web_sm (today)": spacy_en}


# ---- 1. gold sentences ---------------------------------------------------------------------------------------
def gold_scores(extract: Extractor) -> dict[str, float]:
    rows = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]
    predicted = extract([r["sentence"] for r in rows])
    tp_pred = n_pred = tp_gold = n_gold = 0
    for row, pred in zip(rows, predicted, strict=True):
        variants = [set(v) for v in row["entities"]]
        accepted = set().union(*variants) if variants else set()
        n_pred += len(pred)
        tp_pred += len(pred & accepted)
        n_gold += len(variants)
        tp_gold += sum(1 for v in variants if v & pred)
    p = tp_pred / n_pred if n_pred else 0.0
    r = tp_gold / n_gold if n_gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "predicted": n_pred,
            "gold": n_gold}


# ---- 2. title recall -----------------------------------------------------------------------------------------
def title_gold(paragraphs: list[Any], train_ids: set[str]) -> list[tuple[str, set[str]]]:
    import ahocorasick_rs

    from amsrag.indexes.entities import is_matchable, title_surfaces
    from amsrag.indexes.entities_zh import has_han

    surfaces = sorted({s for p in paragraphs for s in title_surfaces(p.title) if has_han(s) and is_matchable(s, 3)})
    ac = ahocorasick_rs.AhoCorasick(surfaces)
    out = []
    for p in paragraphs:
        if p.id not in train_ids:
            continue
        own = set(title_surfaces(p.title))
        found = {surfaces[i] for i, _, _ in ac.find_matches_as_indexes(p.context, overlapping=True)} - own
        if found:
            out.append((p.context, found))
    return out


def title_recall(extract: Extractor, gold: list[tuple[str, set[str]]]) -> dict[str, float]:
    predicted = extract([text for text, _ in gold])
    hit = sum(len(g & pred) for (_, g), pred in zip(gold, predicted, strict=True))
    total = sum(len(g) for _, g in gold)
    return {"recall": hit / total, "gold_mentions": total, "passages": len(gold)}


# ---- 3. speed ------------------------------------------------------------------------------------------------
def speed(extract: Extractor, texts: list[str]) -> float:
    extract(texts[:5])  # load models
    t0 = time.perf_counter()
    extract(texts)
    return len(texts) / (time.perf_counter() - t0)


# ---- 4. graph retrieval --------------------------------------------------------------------------------------
def bm25_seeds(paragraphs: list[Any], questions: list[Any]) -> tuple[list[list[tuple[int, float]]], float]:
    """bm25s over jieba search-mode words: each question's top hits (row, score) and the wall time."""
    import bm25s
    import jieba

    def words(text: str) -> list[str]:
        return [w for w in jieba.lcut_for_search(text.lower()) if w.strip() and any(c.isalnum() for c in w)]

    t0 = time.perf_counter()
    index = bm25s.BM25()
    index.index([words(f"{p.title}\n{p.context}") for p in paragraphs], show_progress=False)
    docs, scores = index.retrieve([words(q.question) for q in questions], k=20, show_progress=False, n_threads=1)
    seeds = [[(int(d), float(s)) for d, s in zip(drow, srow, strict=True)] for drow, srow in zip(docs, scores,
                                                                                                  strict=True)]
    return seeds, time.perf_counter() - t0


def graph_worker(job: Path, out: Path) -> None:
    """Build the graph over the job's passages and rank its questions (run under either source tree)."""
    from amsrag.config import GraphConfig
    from amsrag.indexes.entity_graph import EntityGraph
    from amsrag.types import PassageRow

    spec = json.loads(job.read_text(encoding="utf-8"))
    rows = [PassageRow(i, pid, title, text) for i, (pid, title, text) in enumerate(spec["passages"])]
    t0 = time.perf_counter()
    graph = EntityGraph.build(rows, GraphConfig(ner=spec.get("ner", True)))
    build_s = time.perf_counter() - t0
    ranked, with_query_entities = [], 0
    t0 = time.perf_counter()
    for question, seeds in zip(spec["questions"], spec["seeds"], strict=True):
        with_query_entities += bool(graph.query_entities(question))
        ranked.append([pid for _, _, pid in graph.rank(question, [tuple(s) for s in seeds[:SEEDS]], K)])
    rank_ms = 1000 * (time.perf_counter() - t0) / max(len(spec["questions"]), 1)
    out.write_text(json.dumps({"ranked": ranked, "build_s": build_s, "rank_ms": rank_ms,
                               "entities": graph.n_entities, "edges": graph.n_edges,
                               "questions_with_entities": with_query_entities}), encoding="utf-8")


def hotpot_paragraphs(data: Path, n: int) -> list[tuple[str, str]]:
    """The first `n` distinct (title, text) paragraphs of HotpotQA's distractor dev rows."""
    seen: dict[tuple[str, str], None] = {}
    path = data / "hotpotqa" / "rpt_hotpot_distractor_validation_dev.jsonl"
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            ctx = json.loads(line)["context"]
            for title, sentences in zip(ctx["title"], ctx["sentences"], strict=True):
                seen.setdefault((title, "".join(sentences)), None)
            if len(seen) >= n:
                break
    return list(seen)[:n]


def english_worker(job: Path, out: Path) -> None:
    """Title matching and NER over the job's English paragraphs: a digest of the output and the times."""
    import hashlib

    from amsrag.indexes.entities import SurfaceMatcher, extract_ner, is_matchable, title_surfaces
    from amsrag.types import normalise_whitespace

    spec = json.loads(job.read_text(encoding="utf-8"))
    paragraphs = spec["paragraphs"]
    surfaces = sorted({s for title, _ in paragraphs for s in title_surfaces(title) if is_matchable(s, 3)})
    texts = [normalise_whitespace(text) for _, text in paragraphs]
    t0 = time.perf_counter()
    matcher = SurfaceMatcher(surfaces, list(range(len(surfaces))))
    which, found = matcher.find_in_texts(texts)
    match_s = time.perf_counter() - t0
    extract_ner(texts[:5], GRAPH_LABELS)  # load spaCy
    t0 = time.perf_counter()
    ner = extract_ner(texts[: spec["ner"]], GRAPH_LABELS)
    ner_s = time.perf_counter() - t0
    digest = hashlib.sha256(json.dumps([which.tolist(), found.tolist(), ner]).encode("utf-8")).hexdigest()
    out.write_text(json.dumps({"digest": digest, "match_s": match_s, "ner_s": ner_s, "mentions": len(which),
                               "patterns": len(surfaces), "paragraphs": len(texts), "ner_paragraphs": spec["ner"]}),
                   encoding="utf-8")


def run_child(mode: str, src: Path, job: Path, out: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, __file__, mode, str(job), str(out)], check=True, env=env)
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def recall_at(ranked: list[list[str]], gold: list[str], k: int) -> float:
    return sum(g in r[:k] for r, g in zip(ranked, gold, strict=True)) / len(gold)


# ---- report --------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--baseline-src", type=Path, default=ROOT.parent / "main" / "src")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "zh-entities")
    parser.add_argument("--work", type=Path, default=Path("/tmp/zh_entities_bench"))
    parser.add_argument("--graph-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--english-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.graph_worker:
        graph_worker(*args.graph_worker)
        return
    if args.english_worker:
        english_worker(*args.english_worker)
        return
    from amsrag.ingest.cmrc import load_cmrc

    cmrc = load_cmrc(args.data)
    paragraphs = cmrc.paragraphs
    train_ids = {q.paragraph_id for q in cmrc.split("train")}
    results: dict[str, Any] = {"gold_sentences": {}, "title_recall": {}, "passages_per_s": {}}
    gold = title_gold(paragraphs, train_ids)
    rng = random.Random(21)
    sample = [p.context for p in rng.sample(paragraphs, SPEED_PASSAGES)]
    for name, extract in EXTRACTORS.items():
        results["gold_sentences"][name] = gold_scores(extract)
        results["title_recall"][name] = title_recall(extract, gold)
        results["passages_per_s"][name] = speed(extract, sample)
        print(name, results["gold_sentences"][name], results["title_recall"][name]["recall"],
              f"{results['passages_per_s'][name]:.1f}/s", flush=True)

    args.work.mkdir(parents=True, exist_ok=True)
    english_job = args.work / "english.json"
    english_job.write_text(json.dumps({"paragraphs": hotpot_paragraphs(args.data, 5000), "ner": 500}), "utf-8")
    for name, src in (("baseline", args.baseline_src.resolve()), ("this tree", ROOT / "src")):
        results[f"english {name}"] = run_child("--english-worker", src, english_job, args.work / f"en_{name[0]}.json")
        print("english", name, results[f"english {name}"], flush=True)

    questions = cmrc.split("test")
    seeds, bm25_s = bm25_seeds(paragraphs, questions)
    ids = [p.id for p in paragraphs]
    gold_ids = [q.paragraph_id for q in questions]
    results["bm25"] = {"recall@5": recall_at([[ids[r] for r, _ in s] for s in seeds], gold_ids, K), "seconds": bm25_s}
    job = args.work / "job.json"
    job.write_text(json.dumps({"passages": [(p.id, p.title, p.context) for p in paragraphs],
                               "questions": [q.question for q in questions], "seeds": seeds},
                              ensure_ascii=False), encoding="utf-8")
    no_ner = args.work / "job_no_ner.json"
    no_ner.write_text(json.dumps({**json.loads(job.read_text(encoding="utf-8")), "ner": False}, ensure_ascii=False),
                      encoding="utf-8")
    for name, src, spec in GRAPH_RUNS:
        graph = run_child("--graph-worker", args.baseline_src.resolve() if src == "baseline" else ROOT / "src",
                          job if spec == "ner" else no_ner, args.work / f"{name.split()[0]}_{spec}.json")
        ranked = graph.pop("ranked")
        results[f"graph {name}"] = {"recall@5": recall_at(ranked, gold_ids, K), **graph}
        print(name, results[f"graph {name}"], flush=True)
    write_report(results, args.out, len(questions))


def write_report(results: dict[str, Any], out: Path, n_questions: int) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = [
        "# Chinese entities for the entity graph",
        "",
        "```",
        "PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/zh_entities.py --data ../shared/data "
        "--baseline-src ../main/src",
        "```",
        "",
        "Gold: 45 hand-labelled sentences of CMRC 2018 train paragraphs (`benchmarks/data/zh_ner_gold.jsonl`, "
        "91 entities); title recall: other passages' Chinese titles found in CMRC train paragraphs; speed: "
        f"{SPEED_PASSAGES} CMRC paragraphs, one thread (2 shared cores).",
        "",
        "| extractor | precision | recall | F1 | title recall | passages/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in EXTRACTORS:
        g, t = results["gold_sentences"][name], results["title_recall"][name]
        lines.append(f"| {name} | {g['precision']:.3f} | {g['recall']:.3f} | {g['f1']:.3f} | {t['recall']:.3f} | "
                     f"{results['passages_per_s'][name]:.1f} |")
    first = results["title_recall"][next(iter(EXTRACTORS))]
    base, this = results["english baseline"], results["english this tree"]
    lines += [
        "",
        f"Title recall over {first['gold_mentions']} mentions in {first['passages']} passages.",
        "",
        "## English unchanged",
        "",
        f"Title matching over {this.get('paragraphs', 2937):,} HotpotQA dev paragraphs ({this['patterns']} title "
        f"patterns, {this['mentions']} mentions) and NER over {this.get('ner_paragraphs', 500)} of them (times "
        "on a shared, loaded machine: noise of about 10%):",
        "",
        "| tree | output digest | match s | NER s |",
        "| --- | --- | ---: | ---: |",
        f"| baseline | `{base['digest'][:16]}` | {base['match_s']:.2f} | {base['ner_s']:.1f} |",
        f"| this tree | `{this['digest'][:16]}` | {this['match_s']:.2f} | {this['ner_s']:.1f} |",
        "",
        f"Identical output: {base['digest'] == this['digest']}.",
        "",
        f"## Graph retriever alone, CMRC test ({n_questions} questions, 2,827 paragraphs)",
        "",
        "Seeds: bm25s over jieba words, top 5, plus the entities the question mentions.",
        "",
        "| retriever | Recall@5 | build s | rank ms/q | entities | edges | questions with entities |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| BM25 (bm25s + jieba, reference) | {results['bm25']['recall@5']:.3f} | "
        f"{results['bm25']['seconds']:.1f} | | | | |",
    ]
    for name, _, _ in GRAPH_RUNS:
        g = results[f"graph {name}"]
        lines.append(f"| graph, {name} | {g['recall@5']:.3f} | {g['build_s']:.1f} | {g['rank_ms']:.1f} | "
                     f"{g['entities']} | {g['edges']} | {g['questions_with_entities']} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
