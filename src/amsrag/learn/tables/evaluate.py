"""The semantic parser on WikiTableQuestions' held-out tables, given the table (`benchmarks/wtq.py` reports it
with the 100k-row costs; `amsrag eval --sections tables` runs it): denotation accuracy, the oracle over the
candidates, accuracy per chosen program kind, latency, and the confidence's calibration."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.calibration import ece
from amsrag.embed.encoder import MiniLMEncoder
from amsrag.learn.tables.data import SqliteRunner, is_test_table, load_questions, load_tables
from amsrag.structured.denotation import denotation_match
from amsrag.structured.parser import SemanticParser, build_candidates, column_texts
from amsrag.tables.table import memory_table


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.median(a)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2),
            "mean_ms": round(float(a.mean()), 2)}


def held_out(parser: SemanticParser, limit: int | None, data_dir: Path) -> dict[str, Any]:
    questions = [q for q in load_questions(data_dir) if is_test_table(q.table)]
    if limit:
        questions = random.Random(13).sample(questions, min(limit, len(questions)))
    tables = load_tables(data_dir, sorted({q.table for q in questions}))
    databases = {path: memory_table(t) for path, t in tables.items()}
    encoder = MiniLMEncoder()
    encoder.encode_query("warm up")
    correct, oracle, conf, latency = [], [], [], []
    by_kind: dict[str, list[float]] = defaultdict(list)
    oracle_kinds: Counter[str] = Counter()
    for q in questions:
        conn, profile = databases[q.table]
        runner = SqliteRunner(conn)
        start = time.perf_counter()
        vectors = encoder.encode([q.utterance, *column_texts(profile)])  # exactly what `answer` does
        candidates = build_candidates(q.utterance, profile, runner, vectors[0], vectors[1:])
        answer = parser.choose(q.utterance, profile, runner, candidates)
        latency.append((time.perf_counter() - start) * 1000)
        ok = float(bool(answer.answer) and denotation_match(answer.answer, q.targets))
        correct.append(ok)
        conf.append(answer.confidence)
        by_kind[answer.program or "none"].append(ok)
        right = {e.program.kind for e in candidates.executed if denotation_match(e.answer, q.targets)}
        oracle.append(float(bool(right)))
        oracle_kinds.update(right)
    c, y = np.asarray(conf), np.asarray(correct)
    n = len(questions)
    return {
        "questions": n, "tables": len(tables), "accuracy": round(float(y.mean()), 4),
        "oracle": round(float(np.mean(oracle)), 4),
        "per_kind": {k: {"chosen": len(v), "accuracy": round(float(np.mean(v)), 4),
                         "oracle_questions": oracle_kinds.get(k, 0)}
                     for k, v in sorted(by_kind.items(), key=lambda kv: -len(kv[1]))},
        "latency": percentiles(latency),
        "calibration": {"ece": round(ece(c, y), 4), "mean_confidence": round(float(c.mean()), 4),
                        "accuracy_at_confidence_0.5": round(float(y[c >= 0.5].mean()), 4) if (c >= 0.5).any() else None,
                        "share_confidence_0.5": round(float((c >= 0.5).mean()), 4)},
    }


def held_out_accuracy(data_dir: Path, limit: int | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The shipped parser on every held-out question (or a seeded sample of `limit`)."""
    log("tables: the shipped parser on the held-out WikiTableQuestions tables")
    return held_out(SemanticParser.load(), limit, data_dir)


def markdown(result: dict[str, Any]) -> list[str]:
    lat = result["latency"]
    return ["## WikiTableQuestions, held-out tables, given the table", "",
            "| questions | tables | denotation accuracy | oracle | p50 ms | p95 ms | confidence ECE |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {result['questions']} | {result['tables']} | {result['accuracy']} | {result['oracle']} | "
            f"{lat['p50_ms']} | {lat['p95_ms']} | {result['calibration']['ece']} |", ""]
