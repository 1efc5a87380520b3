"""Building a `QASet` from QA records: the builder (passages deduplicated by content, questions by id), one
record as a loader sees it, and the answer strings of the many layouts."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from amsrag.types import Passage, QAExample, QASet, content_hash


class QABuilder:
    """Accumulates passages (deduplicated by content hash) and questions (deduplicated by id)."""

    def __init__(self, source: str, limit: int | None = None) -> None:
        self.qaset = QASet(source=source)
        self.limit = limit
        self._ids_by_hash: dict[str, str] = {}
        self._question_ids: set[str] = set()

    @property
    def full(self) -> bool:
        return self.limit is not None and len(self.qaset.questions) >= self.limit

    def passage(self, title: Any, text: Any, dataset: str) -> str | None:
        """The id of the passage (added when new); None for empty text."""
        title = str(title or "").strip()
        text = str(text or "").strip()
        if not text:
            return None
        key = content_hash(title, text)
        pid = self._ids_by_hash.get(key)
        if pid is None:
            passage = Passage.make(text=text, title=title, metadata={"source": dataset})
            self.qaset.passages.append(passage)
            self._ids_by_hash[key] = pid = passage.id
        return pid

    def question(self, example: QAExample) -> None:
        """Add unless the id was seen (first occurrence wins) or the question is empty."""
        example.question = example.question.strip()
        if self.full or not example.question or example.id in self._question_ids:
            return
        example.gold_passage_ids = _unique(example.gold_passage_ids)
        self._question_ids.add(example.id)
        self.qaset.questions.append(example)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a data set file, as a loader sees it."""

    data: dict[str, Any]
    place: str  # "file:line" or "file[index]"
    index: int  # 1-based record number
    base: str  # file name without extensions
    name_dataset: str  # data set named by the file name

    @property
    def default_id(self) -> str:
        return f"{self.base}:{self.index}"

    def id(self, *keys: str, prefix: str = "") -> str:
        for key in keys:
            value = self.data.get(key)
            if value is not None and str(value).strip():
                return f"{prefix}{str(value).strip()}"
        return self.default_id


def _parse_list_literal(text: str) -> list[Any] | None:
    """`'["a", "b"]'` or `"['a', 'b']"` -> the list; anything else -> None."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            return value
    return None


def _flatten_answers(value: Any) -> Iterator[str]:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        parsed = _parse_list_literal(value)
        if parsed is None:
            yield value
        else:
            yield from (str(v) for v in parsed)
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _flatten_answers(item)
    elif isinstance(value, dict):
        yield from _flatten_answers(value.get("text"))


def answers_of(*values: Any) -> list[str]:
    """Answer strings, stripped, empty ones dropped, duplicates removed (order kept)."""
    return _unique(a.strip() for v in values for a in _flatten_answers(v))


def join_sentences(sentences: Any, separator: str) -> str:
    """A paragraph's sentences as one text (`separator` between them; "": each sentence carries its space)."""
    if isinstance(sentences, str):
        return sentences.strip()
    if separator:
        return separator.join(s.strip() for s in sentences).strip()
    return "".join(sentences).strip()
