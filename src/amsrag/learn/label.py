"""Silver complexity labels for the user's own generator, the Adaptive-RAG way (DESIGN §3).

Each question is answered three ways: no retrieval (closed book), one step (one retrieval pass,
`one_step_system`, k passages) and multi step (`multi_step_system`, more passages). The label is the
cheapest strategy that answers correctly: zero_hop (A) / one_hop (B) / multi_hop (C); when none does,
the data set's hop count decides (multi-hop data sets C, others B). Rows are written in the layout of
the Adaptive-RAG silver file that `amsrag.ingest.datasets.load_silver3` reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.generate.base import Generation, Generator
from amsrag.generate.metrics import exact_match, token_f1
from amsrag.ingest.dataset_facts import MULTI_HOP_DATASETS, hop_of_dataset
from amsrag.types import Complexity, QAExample

LETTERS: dict[Complexity, str] = {"zero_hop": "A", "one_hop": "B", "multi_hop": "C"}
STRATEGY_NAMES = {"zero_hop": "zero", "one_hop": "one", "multi_hop": "multiple"}  # total_answer, as Adaptive-RAG
# load_silver3 knows these `dataset_name` values; other data sets are read with the row's own `hop`
SILVER_NAMES = {"triviaqa": "trivia"}


@dataclass(frozen=True, slots=True)
class LabelSettings:
    one_step_system: str = "dense"
    one_step_k: int = 5
    multi_step_system: str = "fixed"
    multi_step_k: int = 10
    match: str = "em"  # "em" or "f1" (token F1 >= f1_threshold)
    f1_threshold: float = 0.5


@dataclass(frozen=True, slots=True)
class SilverLabel:
    question: QAExample
    label: Complexity
    correct: dict[str, bool]  # strategy -> answered correctly
    answers: dict[str, str]
    by_dataset: bool  # no strategy answered: the data set's hop count decided

    def to_row(self, generator: str) -> dict[str, Any]:
        q = self.question
        right = [STRATEGY_NAMES[s] for s in ("zero_hop", "one_hop", "multi_hop") if self.correct.get(s)]
        return {"id": q.id, "dataset_name": SILVER_NAMES.get(q.dataset, q.dataset), "question": q.question,
                "answer": LETTERS[self.label], "total_answer": right or ["none"], "complexity": self.label,
                "gold_answers": q.answers, "predictions": self.answers, "by_dataset": self.by_dataset,
                "generator": generator, "hop": hop_of_question(q)}


def hop_of_question(q: QAExample) -> str:
    """The question's hop structure for the hop head: its data set's hop count, else its own complexity."""
    hop = hop_of_dataset(q.dataset)
    if hop is None:
        hop = "multi_hop" if q.complexity == "multi_hop" or len(q.gold_passage_ids) > 1 else "one_hop"
    return hop


def is_correct(g: Generation, answers: list[str], settings: LabelSettings) -> bool:
    if g.abstained or not answers:
        return False
    if settings.match == "f1":
        return token_f1(g.answer, answers) >= settings.f1_threshold
    return bool(exact_match(g.answer, answers))


def dataset_hop(q: QAExample) -> Complexity:
    if q.complexity in ("one_hop", "multi_hop"):
        return q.complexity
    return "multi_hop" if q.dataset in MULTI_HOP_DATASETS else "one_hop"


def label_question(q: QAExample, generator: Generator, retrieve: Callable[[str, str, int], list],
                   settings: LabelSettings) -> SilverLabel:
    """`retrieve(question, system, k)` -> passages (the engine's). Runs all three strategies (the
    Adaptive-RAG file records every strategy that answered right)."""
    runs: dict[str, Generation] = {"zero_hop": generator.closed_book(q.question)}
    runs["one_hop"] = generator.generate(q.question, retrieve(q.question, settings.one_step_system,
                                                              settings.one_step_k))
    runs["multi_hop"] = generator.generate(q.question, retrieve(q.question, settings.multi_step_system,
                                                                settings.multi_step_k))
    correct = {s: is_correct(g, q.answers, settings) for s, g in runs.items()}
    cheapest = next((s for s in ("zero_hop", "one_hop", "multi_hop") if correct[s]), None)
    label: Complexity = cheapest or dataset_hop(q)  # type: ignore[assignment]
    return SilverLabel(q, label, correct, {s: g.answer for s, g in runs.items()}, cheapest is None)


def write_labels(labels: Iterable[SilverLabel], path: Path, generator: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for lab in labels:
            f.write(json.dumps(lab.to_row(generator), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)  # never leave a half-written label file where a good one was
    return n



LABEL_KEYS = ("hop", "complexity", "label")  # where a {question, hop} row may keep its label


def read_hop_labels(path: Path, fmt: str = "auto") -> tuple[list[str], list[str]]:
    """(questions, hop labels) of FILE: rows {question, hop} (the label may also be under `complexity` or
    `label`), or any QA file `load_qa` reads, labelled by `hop_of_question`. Bad rows are an InputError
    naming the file and line; nothing is returned unless every row is good."""
    from amsrag.errors import InputError
    from amsrag.ingest import load_qa
    from amsrag.ingest.formats import detect_format
    from amsrag.ingest.readers import first_record

    if fmt == "auto" and path.is_file() and detect_format(path) == "questions":
        first = first_record(path)
        if isinstance(first, dict) and any(k in first for k in LABEL_KEYS):
            return _label_rows(path)
    qa = load_qa(path, fmt=fmt)
    if not qa.questions:
        raise InputError(f"{path}: no questions in it; give rows {{\"question\": ..., \"hop\": \"one_hop\" | "
                         f"\"multi_hop\"}} or a QA file")
    return [q.question for q in qa.questions], [hop_of_question(q) for q in qa.questions]


def _label_rows(path: Path) -> tuple[list[str], list[str]]:
    from amsrag.classify.library import HOP_LABELS
    from amsrag.errors import InputError
    from amsrag.ingest.readers import iter_records
    from amsrag.text.normalise import normalise_question

    questions: list[str] = []
    hops: list[str] = []
    for place, row in iter_records(path):
        if not isinstance(row, dict):
            raise InputError(f"{place}: a row must be a JSON object {{question, hop}}, got a JSON {type(row).__name__}")
        question = row.get("question")
        if not isinstance(question, str) or not normalise_question(question):
            raise InputError(f"{place}: `question` must be a non-empty question, got {question!r}")
        labels = [row[k] for k in LABEL_KEYS if k in row]
        if not labels:
            raise InputError(f"{place}: no hop label for {question!r}: give `hop` (or `complexity`, `label`) as "
                             f"{' or '.join(HOP_LABELS)}")
        if any(label != labels[0] for label in labels):
            raise InputError(f"{place}: conflicting labels {labels} for {question!r}")
        hop = labels[0]
        if hop not in HOP_LABELS:
            hint = ("; zero_hop is a complexity, not a hop structure: label single-hop questions one_hop"
                    if hop == "zero_hop" else "")
            raise InputError(f"{place}: unknown hop label {hop!r} for {question!r}; "
                             f"use {' or '.join(HOP_LABELS)}{hint}")
        questions.append(question)
        hops.append(hop)
    if not questions:
        raise InputError(f"{path}: no rows in it; nothing was learned")
    return questions, hops
