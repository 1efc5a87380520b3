"""`ask --json` and `retrieve --json` of two source trees on the demo index, each a cold CLI process, compared
with the timings dropped: the proof that moving imports changed no answer.

    python benchmarks/cli_parity.py --index $AMSRAG_HOME/demo-index --src OLD/src --out before.json
    python benchmarks/cli_parity.py --index $AMSRAG_HOME/demo-index --src src --out after.json --against before.json
    # with `amsrag serve --index $AMSRAG_HOME/demo-index` running: ask through the discovered service
    python benchmarks/cli_parity.py --index ... --commands ask --ask-args= --out served.json --against before.json

The questions: every demo question (one-hop, multi-hop and comparison: the graph and the audit's NER), the
demo's table questions (the table route), and two corpus-wide ones (the themes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "src" / "amsrag" / "data" / "demo"
CORPUS_QUESTIONS = ["What topics do these documents cover?", "Summarize the main themes of the corpus."]


def questions(sample: bool = False) -> list[str]:
    """Every demo question, table question and corpus-wide question; `sample`: the first four demo questions
    (multi-hop bridge and comparison among them), two table questions and the corpus-wide ones."""
    found = []
    for name, first in (("questions.jsonl", 4), ("table_questions.jsonl", 2)):
        rows = [json.loads(line)["question"] for line in (DEMO / name).read_text("utf-8").splitlines() if line]
        found += rows[:first] if sample else rows
    return found + CORPUS_QUESTIONS


def untimed(value: Any) -> Any:
    """`value` without its timings (keys `ms`, `*_ms`, `timings_ms`): the only fields allowed to differ."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "ms" and not k.endswith("_ms")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def run(src: Path, command: list[str]) -> Any:
    env = {**os.environ, "PYTHONPATH": str(src.resolve()), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", *command], capture_output=True, text=True, env=env,
                          check=False)
    if proc.returncode != 0:
        return {"exit": proc.returncode, "stderr": proc.stderr.strip().splitlines()[-1:]}
    return untimed(json.loads(proc.stdout))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the source tree to run (PYTHONPATH)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--against", type=Path, help="an earlier --out to compare with (on the commands run)")
    ap.add_argument("--sample", action="store_true", help="8 of the questions, every kind (a busy machine)")
    ap.add_argument("--commands", default="ask,retrieve", help="which of ask,retrieve to run")
    ap.add_argument("--ask-args", default="--no-log", help="extra ask options (--no-log answers locally)")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for q in questions(args.sample):
        for command in args.commands.split(","):
            extra = args.ask_args.split() if command == "ask" else []
            results[f"{command}: {q}"] = run(args.src, [command, q, "--index", args.index, "--json", *extra])
            print(f"{command}: {q[:70]}", file=sys.stderr, flush=True)
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
    if args.against:
        before = json.loads(args.against.read_text("utf-8"))
        differ = [key for key in sorted(results) if before.get(key) != results[key]]
        print(f"{len(results)} outputs, {len(differ)} differ from {args.against}")
        for key in differ:
            print(f"  differs: {key}")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
