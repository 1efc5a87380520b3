"""The five-way router on a mixed question set over one index that holds text and tables (issue 19).

Questions no trained part has seen: text questions of the complexity classifier's test split (their data
set's hop label), WikiTableQuestions questions of its held-out test tables, and aggregation prompts of the
test template family. The index: the demo passages plus every held-out WTQ table (a few hundred), so a
structured question must first find its table among them. Reported: five-way and task-level routing
accuracy, per-class ECE of each class's own confidence, the share of structured questions that missed
the table route, and end to end the denotation accuracy of the structured answers (the open setting).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.calibration import ece
from amsrag.learn.common import seeded_rank
from amsrag.pipeline.trace_parts import TableTrace
from amsrag.types import COMPLEXITIES, QUERY_CLASSES


@dataclass(frozen=True, slots=True)
class MixedQuestion:
    question: str
    truth: str  # one of QUERY_CLASSES (text questions: their data set's hop class)
    source: str
    targets: tuple[str, ...] = ()  # structured: the WTQ answer set


def mixed_questions(data_dir: Path, n_text: int, n_structured: int, n_aggregation: int,
                    seed: int = 13) -> list[MixedQuestion]:
    from amsrag.learn.classifier.data import build_labelled_data
    from amsrag.learn.tables.data import is_test_table, load_questions
    from amsrag.learn.taxonomy.aggregation import aggregation_questions

    text = sorted(build_labelled_data(data_dir, seed=seed).split("test"), key=lambda r: seeded_rank(seed, r.key))
    out = [MixedQuestion(r.question, r.hop, r.dataset) for r in text[:n_text]]
    wtq = sorted((q for q in load_questions(data_dir) if is_test_table(q.table)),
                 key=lambda q: seeded_rank(seed, q.id))
    out += [MixedQuestion(q.utterance, "structured", "wtq:" + q.table, q.targets) for q in wtq[:n_structured]]
    out += [MixedQuestion(q, "aggregation", "templates:test") for q in aggregation_questions("test", n_aggregation,
                                                                                            seed)]
    return out


def build_mixed_index(path: Path, data_dir: Path, log: Callable[[str], None]) -> Any:
    """The demo passages (themes built) plus every held-out WTQ table, at `path` (reused when present)."""
    from importlib import resources

    from amsrag.indexing.themes import refresh_themes
    from amsrag.ingest import iter_passages
    from amsrag.learn.tables.data import is_test_table, load_tables
    from amsrag.store import EmbeddedIndex

    if path.exists():
        return EmbeddedIndex.open(path)
    index = EmbeddedIndex.create(path)
    demo = Path(str(resources.files("amsrag") / "data" / "demo"))
    index.add(list(iter_passages([demo / "passages.jsonl.gz"], fmt="jsonl")))
    tables = [t for p, t in sorted(load_tables(data_dir).items()) if is_test_table(p)]
    index.put_tables(tables)
    refresh_themes(index)
    log(f"mixed index: {len(index)} passages, {len(tables)} tables at {path}")
    return index


def run_mixed(index: Any, questions: Sequence[MixedQuestion], answer_structured: bool = True,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    from amsrag.pipeline import Engine
    from amsrag.structured.denotation import denotation_match

    engine = Engine(index)
    decided: list[tuple[MixedQuestion, Any]] = []
    ms: list[float] = []
    kept_by_table = 0  # text questions sent to the table route that a table then answered (no fallback)
    for i, q in enumerate(questions):
        vec = index.encoder.encode_query(q.question)
        t = time.perf_counter()
        cx = engine.complexity_of(q.question, vec)
        decision, hits = engine.taxonomy.decide(q.question, vec, cx)
        ms.append((time.perf_counter() - t) * 1000)
        decided.append((q, decision))
        if answer_structured and q.truth in COMPLEXITIES and decision.route == "table":
            kept_by_table += engine.table_route.answer(q.question, hits, index.tables()).answered
        if (i + 1) % 200 == 0:
            log(f"taxonomy: {i + 1}/{len(questions)} routed")
    truth = [q.truth for q, _ in decided]
    label = [d.label for _, d in decided]
    task_of: dict[str, str] = {c: ("text" if c in COMPLEXITIES else c) for c in QUERY_CLASSES}
    out: dict[str, Any] = {
        "n": len(decided), "by_truth": dict(Counter(truth)),
        "five_way_accuracy": _r(np.mean([a == b for a, b in zip(truth, label, strict=True)])),
        "task_accuracy": _r(np.mean([task_of[a] == task_of[b] for a, b in zip(truth, label, strict=True)])),
        "decide_ms_p50": _r(float(np.percentile(ms, 50)), 2), "decide_ms_p95": _r(float(np.percentile(ms, 95)), 2),
        "thresholds": engine.taxonomy.thresholds,
    }
    for c in QUERY_CLASSES:
        rows = [(d.probs.get(c, 0.0), q.truth == c) for q, d in decided]
        if any(t for _, t in rows):
            p, y = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
            out[f"ece_{c}"] = _r(ece(p, y))
    struct = [(q, d) for q, d in decided if q.truth == "structured"]
    out["structured_missed_table_route"] = _r(np.mean([d.route != "table" for _, d in struct])) if struct else None
    text = [(q, d) for q, d in decided if q.truth in COMPLEXITIES]
    out["text_sent_elsewhere"] = _r(np.mean([d.route != "retrieval" for _, d in text])) if text else None
    if answer_structured and text:
        out["text_answered_from_a_table"] = _r(kept_by_table / len(text))
    agg = [(q, d) for q, d in decided if q.truth == "aggregation"]
    out["aggregation_missed_global_route"] = _r(np.mean([d.route != "global" for _, d in agg])) if agg else None
    out["confusion"] = {t: dict(Counter(d.label for q, d in decided if q.truth == t)) for t in QUERY_CLASSES}
    if answer_structured and struct:
        out["open_setting"] = open_setting(engine, [q for q, _ in struct], denotation_match, log)
    return out


def open_setting(engine: Any, questions: Sequence[MixedQuestion], match: Callable[..., bool],
                 log: Callable[[str], None]) -> dict[str, Any]:
    """End to end: `Engine.answer` on each structured question (route, table search among every held-out
    table, parser, guarded SQL); right when the answer set matches WTQ's targets."""
    right = table_route = right_table = 0
    ms: list[float] = []
    for i, q in enumerate(questions):
        vec = engine.index.encoder.encode_query(q.question)
        t = time.perf_counter()
        a = engine.answer(q.question, "full", engine.generator, vec)
        ms.append((time.perf_counter() - t) * 1000)
        structured = a.retrieval.trace.structured
        on_table = a.retrieval.trace.strategy == "table"
        table_route += on_table
        table = structured.table if isinstance(structured, TableTrace) else None
        right_table += on_table and table == q.source.removeprefix("wtq:")
        predicted = [v.strip() for v in a.generation.answer.split(" | ")] if on_table else [a.generation.answer]
        right += bool(a.generation.answer) and match(predicted, list(q.targets))
        if (i + 1) % 100 == 0:
            log(f"open setting: {i + 1}/{len(questions)} answered")
    n = len(questions)
    return {"n": n, "accuracy": _r(right / n), "answered_by_table_route": _r(table_route / n),
            "right_table": _r(right_table / n), "answer_ms_p50": _r(float(np.percentile(ms, 50)), 2),
            "answer_ms_p95": _r(float(np.percentile(ms, 95)), 2)}


def _r(x: Any, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def markdown(result: dict[str, Any]) -> list[str]:
    lines = ["## Five-way routing on a mixed set (text, aggregation, structured)", "",
             f"{result['n']} questions ({', '.join(f'{k} {v}' for k, v in sorted(result['by_truth'].items()))}) "
             "over one index holding the demo passages and every held-out WikiTableQuestions table.", "",
             "| metric | value |", "|---|---:|"]
    for key in ("five_way_accuracy", "task_accuracy", "structured_missed_table_route",
                "aggregation_missed_global_route", "text_sent_elsewhere", "text_answered_from_a_table",
                *[f"ece_{c}" for c in QUERY_CLASSES],
                "decide_ms_p50", "decide_ms_p95"):
        if result.get(key) is not None:
            lines.append(f"| {key.replace('_', ' ')} | {result[key]} |")
    lines += ["", "Confusion (rows: truth, columns: routed class):", "",
              "| truth | " + " | ".join(QUERY_CLASSES) + " |", "|---|" + "---:|" * len(QUERY_CLASSES)]
    for t in QUERY_CLASSES:
        row = result["confusion"].get(t, {})
        lines.append(f"| {t} | " + " | ".join(str(row.get(c, 0)) for c in QUERY_CLASSES) + " |")
    o = result.get("open_setting")
    if o:
        lines += ["", "Structured questions end to end (the open setting: the engine routes, picks the table among "
                  "every held-out table, parses, runs the guarded SQL):", "",
                  "| n | denotation accuracy | took the table route | found its own table | p50 ms | p95 ms |",
                  "|---:|---:|---:|---:|---:|---:|",
                  f"| {o['n']} | {o['accuracy']} | {o['answered_by_table_route']} | {o['right_table']} | "
                  f"{o['answer_ms_p50']} | {o['answer_ms_p95']} |"]
    return [*lines, ""]
