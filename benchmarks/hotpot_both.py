"""HotpotQA's "both" questions ("Are both A and B film directors?", answered yes or no) that no part of amsrag
trained on and no committed compose run holds, in HotpotQA's original layout, for `amsrag eval --qa`:

    python benchmarks/hotpot_both.py --out bench-cache/hotpot_both.json
    amsrag eval --qa bench-cache/hotpot_both.json --systems full-plain,full --scope gold --noise 300 \
        --no-audit --out OUT

The questions are the comparison questions of the staged HotpotQA files (`../shared/data/hotpotqa`, every layout)
with a yes / no answer whose comparative the decomposer reads as "both", less the decomposer's training questions
(Break's HotpotQA rows) and every question of `docs/benchmarks/compose/*/predictions.jsonl`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amsrag.decompose.tagger import operator_of
from amsrag.ingest.datasets import default_data_dir
from amsrag.learn.decomposer.data import BREAK_FILE, load_break_hotpot
from amsrag.text.normalise import normalise_question

ROOT = Path(__file__).resolve().parents[1]
FILES = ("hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl", "hotpotqa/rpt_hotpot_distractor_validation_train.jsonl",
         "hotpotqa/migres_hotpot_200.jsonl", "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl")


def _original(row: dict[str, Any]) -> dict[str, Any] | None:
    """One row of any staged layout in HotpotQA's original layout, None when it has no answer."""
    if "contexts" in row:  # IRCoT
        answers = [s for a in row.get("answers_objects", []) for s in a.get("spans", [])]
        paragraphs = row["contexts"]
        return {"_id": row["question_id"], "question": row["question_text"], "answer": answers[0] if answers else "",
                "type": "comparison", "context": [[p["title"], [p["paragraph_text"]]] for p in paragraphs],
                "supporting_facts": [[p["title"], 0] for p in paragraphs if p.get("is_supporting")]}
    context = row["context"]
    if isinstance(context, dict):  # Hugging Face
        context = [[t, s] for t, s in zip(context["title"], context["sentences"], strict=True)]
        facts = row["supporting_facts"]
        facts = [[t, i] for t, i in zip(facts["title"], facts["sent_id"], strict=True)]
    else:
        facts = row["supporting_facts"]
    return {"_id": row.get("_id") or row["id"], "question": row["question"], "answer": row["answer"],
            "type": row.get("type", "comparison"), "context": context, "supporting_facts": facts}


def _rows(data: Path) -> Iterator[dict[str, Any]]:
    for name in FILES:
        with (data / name).open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = _original(json.loads(line))
                    if row is not None and row["answer"]:
                        yield row


def _read_questions() -> set[str]:
    seen: set[str] = set()
    for path in (ROOT / "docs" / "benchmarks" / "compose").glob("*/predictions.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                seen.add(normalise_question(json.loads(line)["question"]))
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    data = args.data or default_data_dir()
    excluded = {normalise_question(e.question) for e in load_break_hotpot(data / BREAK_FILE)} | _read_questions()
    kept: dict[str, dict[str, Any]] = {}
    for row in _rows(data):
        key = normalise_question(row["question"])
        if key in excluded or key in kept or row["type"] != "comparison":
            continue
        if row["answer"].strip().lower() in ("yes", "no") and operator_of(row["question"]) == "both":
            kept[key] = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(list(kept.values())), encoding="utf-8")
    print(f"{len(kept)} both questions -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
