"""The semantic parser on WikiTableQuestions' held-out tables, and its cost on a 100k-row table.

    OMP_NUM_THREADS=1 python benchmarks/wtq.py [--limit N]

Held-out tables: `amsrag.learn.tables.data.is_test_table` (20 % of the tables by path hash; the shipped
ranker never trained or tuned on them). Per question, given its table in an in-memory SQLite database, the
shipped parser answers as `SemanticParser.answer` does — MiniLM of the question and column names, candidate
programs, execution, ranking — timed one question at a time; the answer is scored with `denotation_match`.
Also: the oracle (some candidate's answer is right: the ceiling of any ranker over these candidates),
accuracy per chosen program kind, and the confidence's calibration. The 100k-row table: a synthetic table
(player, country, year, goals, club, time), the mention search + program enumeration per question (the
part that touches the table before any candidate runs) and the whole answer, without indexes and with
`COLLATE NOCASE` indexes on the text columns. Results: docs/benchmarks/wtq.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

from amsrag.embed.encoder import MiniLMEncoder
from amsrag.learn.tables.data import SqliteRunner
from amsrag.learn.tables.evaluate import held_out, percentiles
from amsrag.structured.parser import SemanticParser
from amsrag.structured.programs import candidate_programs
from amsrag.tables.table import Table, memory_table
from common import ROOT, SHARED_DATA

DOCS = ROOT / "docs" / "benchmarks"
COMMAND = "OMP_NUM_THREADS=1 python benchmarks/wtq.py"
BIG_QUESTIONS = (
    "how many players are from brazil?",
    "which player scored the most goals?",
    "what country is player 5123 from?",
    "who scored more goals, player 3 or player 7?",
    "how many players scored more than 20 goals?",
    "what club did player 99 play for?",
    "what is the total number of goals scored by players from kenya?",
    "which club appears the most?",
    "in what year did player 42017 play?",
    "who was listed after player 10?",
)


def synthetic_table(n_rows: int, seed: int = 13) -> Table:
    rng = random.Random(seed)
    countries = ["Brazil", "France", "Germany", "Italy", "Spain", "Japan", "Kenya", "Peru", "Chile", "Norway"]
    clubs = [f"Club {chr(65 + i)}{chr(65 + j)}" for i in range(26) for j in range(4)]
    rows = tuple((f"Player {i}", rng.choice(countries), str(1950 + rng.randrange(70)), str(rng.randrange(41)),
                  rng.choice(clubs), f"{rng.randrange(1, 99)}:{rng.randrange(10, 60)}") for i in range(n_rows))
    return Table("synthetic-100k", ("Player", "Country", "Year", "Goals", "Club", "Time"), rows)


def big_table(parser: SemanticParser, n_rows: int, repeats: int) -> dict[str, Any]:
    table = synthetic_table(n_rows)
    conn, profile = memory_table(table)
    encoder = MiniLMEncoder()
    out: dict[str, Any] = {"rows": n_rows, "columns": len(profile.columns), "questions": len(BIG_QUESTIONS)}
    for setting in ("no index", "nocase indexes"):
        if setting == "nocase indexes":
            for c in profile.columns:
                if c.type != "number":
                    conn.execute(f"CREATE INDEX i_{c.sql_name} ON t ({c.sql_name} COLLATE NOCASE)")
        runner = SqliteRunner(conn)
        enumerate_ms, answer_ms, counts = [], [], []
        for _ in range(repeats):
            for q in BIG_QUESTIONS:
                start = time.perf_counter()
                _, programs = candidate_programs(q, profile, runner)
                enumerate_ms.append((time.perf_counter() - start) * 1000)
                counts.append(len(programs))
        for q in BIG_QUESTIONS:  # the whole answer once per question: it runs every candidate over 100k rows
            start = time.perf_counter()
            parser.answer(q, profile, runner, encoder)
            answer_ms.append((time.perf_counter() - start) * 1000)
        out[setting] = {"mentions_and_programs": percentiles(enumerate_ms), "answer": percentiles(answer_ms),
                        "programs_mean": round(statistics.mean(counts), 1)}
    conn.close()
    return out


def render(result: dict[str, Any]) -> str:
    h, big, card = result["held_out"], result["big_table"], result["card"]
    lines = ["# Semantic parser on WikiTableQuestions (held-out tables)", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}; one question at a time.", "",
             f"Held-out tables: `amsrag.learn.tables.data.is_test_table` — {h['tables']} tables, {h['questions']} "
             "questions, never trained or tuned on. The shipped ranker: "
             f"{card['model']} (`src/amsrag/data/tables/parser.json`, trained by `{card['rebuild']}`).", "",
             "| measure | value | target |", "|---|---:|---:|",
             f"| denotation accuracy, given the table | {h['accuracy']:.4f} | >= 0.40 (floating parser 0.371) |",
             f"| oracle (some candidate right) | {h['oracle']:.4f} | |",
             f"| answer latency p50 / p95 (ms) | {h['latency']['p50_ms']} / {h['latency']['p95_ms']} | |",
             f"| 100k rows: mentions + programs p50 (ms), no index | "
             f"{big['no index']['mentions_and_programs']['p50_ms']} | <= 30 |",
             f"| 100k rows: mentions + programs p50 (ms), NOCASE indexes | "
             f"{big['nocase indexes']['mentions_and_programs']['p50_ms']} | <= 30 |",
             f"| 100k rows: whole answer p50 (ms), no index | {big['no index']['answer']['p50_ms']} | |",
             f"| 100k rows: whole answer p50 (ms), NOCASE indexes | {big['nocase indexes']['answer']['p50_ms']} | |",
             f"| confidence ECE (15 bins) | {h['calibration']['ece']} | |", "",
             "## Per chosen program kind", "",
             "| kind | chosen | accuracy | questions some candidate of this kind answers |", "|---|---:|---:|---:|"]
    for kind, m in h["per_kind"].items():
        lines.append(f"| {kind} | {m['chosen']} | {m['accuracy']:.4f} | {m['oracle_questions']} |")
    lines += ["", "## Model selection (calibration tables, part of the training tables)", "",
              "| ranker | accuracy on the calibration tables | on the test tables (reported, not used) |",
              "|---|---:|---:|"]
    for name, acc in card["metrics"]["selection"].items():
        lines.append(f"| {name} | {acc} | {card['metrics']['test_tables_accuracy_by_model'][name]} |")
    lines += ["", result["notes"], ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None, help="a seeded sample of the held-out questions")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=DOCS)
    args = ap.parse_args()
    parser = SemanticParser.load()
    result: dict[str, Any] = {
        "command": COMMAND + (f" --limit {args.limit}" if args.limit else ""),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPUs (shared)",
        "held_out": held_out(parser, args.limit, SHARED_DATA),
        "big_table": big_table(parser, args.rows, args.repeats),
        "card": {"model": parser.card["model"], "rebuild": parser.card["rebuild"],
                 "metrics": {k: parser.card["metrics"][k] for k in ("selection", "test_tables_accuracy_by_model")}},
    }
    result["notes"] = notes(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wtq.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "wtq.md").write_text(render(result), encoding="utf-8")
    print(render(result))


def notes(result: dict[str, Any]) -> str:
    h, big = result["held_out"], result["big_table"]
    acc, miss = h["accuracy"], 0.40 - h["accuracy"]
    enum_ms = big["no index"]["mentions_and_programs"]["p50_ms"]
    parts = ["## What is met and what is not", ""]
    verdict = "target 0.40 met." if miss <= 0 else f"target 0.40 missed by {miss:.4f}."
    parts.append(f"- Accuracy {acc:.4f}: {verdict}")
    parts.append(f"- 100k rows, the table-touching part (mentions + programs) without any index: {enum_ms} ms p50 "
                 + ("(target met)." if enum_ms <= 30 else f"(target 30 ms missed by {enum_ms - 30:.1f} ms)."))
    parts.append(f"- The whole answer on 100k rows runs every candidate (a scan each): "
                 f"{big['no index']['answer']['p50_ms']} ms p50 without indexes — not interactive at that size.")
    parts += [
        "",
        "Why the 100k-row numbers are what they are: columns whose distinct values the profile holds are matched "
        "in Python; the others (here Player, Club, Time and the Year numbers) in one `SELECT … WHERE cN COLLATE "
        "NOCASE IN (n-grams) OR …` pass. Without an index that pass is a full scan with one IN probe per row and "
        "column (~15 ms per text column at 100k rows); with NOCASE indexes SQLite still scans, because the "
        "`cN_num IN (…)` term of the OR has no index. The whole answer then runs each of the ~260 candidates, "
        "most of them a scan of their own.",
        "",
        "Weak spots: the oracle is far above the accuracy (many candidates are spuriously right, and the ranker "
        "picks the wrong column or kind); superlatives are chosen most and right a third of the time; "
        "max / min / average are almost never chosen although they are the only right program for some "
        "questions; answers that are part of a cell ('Paris' in 'Paris, France') and conditions on a part of a "
        "cell are out of reach of the candidates. The logistic regression ranks at about 0.24: a linear model "
        "over these features has no kind × trigger interactions, which the trees learn.",
    ]
    return "\n".join(parts)


if __name__ == "__main__":
    main()
