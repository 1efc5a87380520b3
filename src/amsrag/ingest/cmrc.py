"""CMRC 2018 (../shared/data/cmrc2018), the Chinese QA benchmark: its paragraphs, questions and fixed splits.

One split for everything that reads it:
- `train`: every question of `cmrc2018_train.json` (readers and models are fitted here);
- `cal`: the questions of the dev file's articles at even positions in file order (tuning, thresholds);
- `test`: the questions of the dev file's articles at odd positions (reported numbers only).
The retrieval corpus is every paragraph of both files (2,827): a test question's gold paragraph sits
among 2,800 others, train's included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amsrag.errors import InputError

TRAIN_FILE = "cmrc2018/cmrc2018_train.json"
DEV_FILE = "cmrc2018/cmrc2018_dev_even.json"
Split = Literal["train", "cal", "test"]
SPLITS: tuple[Split, ...] = ("train", "cal", "test")


@dataclass(frozen=True, slots=True)
class CmrcParagraph:
    id: str  # the file's paragraph id ("TRAIN_186_P0", "DEV_0")
    title: str
    context: str


@dataclass(frozen=True, slots=True)
class CmrcQuestion:
    id: str
    question: str
    answers: tuple[str, ...]  # distinct answer strings, file order
    paragraph_id: str
    split: Split


def _articles(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InputError(f"CMRC 2018 file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a UTF-8 JSON file in SQuAD layout ({exc})") from exc
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise InputError(f"{path}: no top-level 'data' list (SQuAD v1.1 layout expected)")
    return articles


def _walk(path: Path, split_of: Any) -> Iterator[tuple[CmrcParagraph, list[CmrcQuestion]]]:
    for position, article in enumerate(_articles(path)):
        split: Split = split_of(position)
        for paragraph in article.get("paragraphs", []):
            para = CmrcParagraph(str(paragraph["id"]), str(article.get("title", "")), str(paragraph["context"]))
            questions = []
            for qa in paragraph.get("qas", []):
                answers = tuple(dict.fromkeys(str(a["text"]).strip() for a in qa.get("answers", []) if a.get("text")))
                if answers:
                    questions.append(CmrcQuestion(str(qa["id"]), str(qa["question"]).strip(), answers, para.id, split))
            yield para, questions


@dataclass(frozen=True, slots=True)
class Cmrc:
    paragraphs: list[CmrcParagraph]
    questions: list[CmrcQuestion]

    def split(self, name: Split) -> list[CmrcQuestion]:
        return [q for q in self.questions if q.split == name]

    def paragraph(self, paragraph_id: str) -> CmrcParagraph:
        return self._by_id()[paragraph_id]

    def _by_id(self) -> dict[str, CmrcParagraph]:
        return {p.id: p for p in self.paragraphs}


def load_cmrc(data_dir: Path) -> Cmrc:
    """Both files under `data_dir` (../shared/data), split as the module says."""
    paragraphs: list[CmrcParagraph] = []
    questions: list[CmrcQuestion] = []
    walks = (
        _walk(data_dir / TRAIN_FILE, lambda _pos: "train"),
        _walk(data_dir / DEV_FILE, lambda pos: "cal" if pos % 2 == 0 else "test"),
    )
    for walk in walks:
        for para, qs in walk:
            paragraphs.append(para)
            questions.extend(qs)
    return Cmrc(paragraphs, questions)
