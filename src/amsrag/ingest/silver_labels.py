"""Silver complexity label files in the Adaptive-RAG A/B/C layout (`load_silver3`; `amsrag train classifier label`
writes it) -> `LabelledQuestion` rows."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from amsrag.errors import InputError
from amsrag.ingest.dataset_facts import hop_of_dataset
from amsrag.text.normalise import normalise_question
from amsrag.types import Complexity

Split = Literal["train", "cal", "test"]
SPLITS: tuple[Split, ...] = ("train", "cal", "test")
LabelSource = Literal["silver3", "dataset"]
SILVER_LETTERS: dict[str, Complexity] = {"A": "zero_hop", "B": "one_hop", "C": "multi_hop"}
_SILVER_DATASETS = {"trivia": "triviaqa", "triviaqa": "triviaqa", "nq": "nq", "squad": "squad",
                    "hotpotqa": "hotpotqa", "musique": "musique", "2wikimultihopqa": "2wikimultihopqa"}
_HOP_ID = re.compile(r"^\d+hop")
_HEX = re.compile(r"^[0-9a-f]+$")


@dataclass(frozen=True, slots=True)
class LabelledQuestion:
    """A question with its complexity labels: the hop label (one_hop / multi_hop) always, the three-way
    label for silver3 rows only; `split` is set by the classifier's training data (`amsrag.learn`)."""

    key: str  # normalised question
    question: str
    dataset: str
    source: LabelSource
    hop: Complexity  # one_hop | multi_hop
    three: Complexity | None = None  # silver3 rows only
    split: Split = "train"

    @property
    def dataset_hop(self) -> Complexity | None:
        return hop_of_dataset(self.dataset)


def _bad(path: Path, line: int, message: str) -> InputError:
    return InputError(f"{path}:{line}: {message}")


def _read_label_file(path: Path) -> str:
    if not path.is_file():
        raise InputError(f"{path}: label file not found")
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc})") from None


def load_silver3(path: Path) -> list[LabelledQuestion]:
    """The A/B/C silver JSONL: ``{question, answer: A|B|C, dataset_name, ...}`` per line."""
    rows: list[LabelledQuestion] = []
    for n, line in enumerate(_read_label_file(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(path, n, f"not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise _bad(path, n, f"expected a JSON object, got {type(rec).__name__}")
        question, letter = rec.get("question"), rec.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise _bad(path, n, "`question` must be a non-empty string")
        if letter not in SILVER_LETTERS:
            raise _bad(path, n, f"`answer` must be one of A, B, C, got {letter!r}")
        name = str(rec.get("dataset_name", "")).strip()
        dataset = _SILVER_DATASETS.get(name.lower())
        given_hop = rec.get("hop")  # `amsrag train classifier label` writes it: other data sets need it
        if given_hop is not None and given_hop not in ("one_hop", "multi_hop"):
            raise _bad(path, n, f"`hop` must be one_hop or multi_hop, got {given_hop!r}")
        if dataset is None:
            if given_hop is None or not name:
                raise _bad(path, n, f"unknown `dataset_name` {rec.get('dataset_name')!r} and no `hop` "
                                    "(one_hop|multi_hop) to take the hop structure from")
            dataset = name.lower()
        three = SILVER_LETTERS[letter]
        # the hop is the question's structure: a silver B/C says what one generator managed, not that
        hop = given_hop or hop_of_dataset(dataset) or (three if three != "zero_hop" else None)
        if hop is None:
            raise _bad(path, n, f"no hop structure for a zero_hop row of data set {dataset!r}: add `hop`")
        rows.append(LabelledQuestion(normalise_question(question), question.strip(), dataset, "silver3", hop, three))
    return rows
