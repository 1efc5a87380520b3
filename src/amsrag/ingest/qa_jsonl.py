"""The loader of amsrag's own QA JSONL (one question per line, its passages inline or by id), checked field by
field."""

from __future__ import annotations

from typing import Any, cast

from amsrag.errors import InputError
from amsrag.ingest.qa_records import QABuilder, Record, answers_of
from amsrag.types import COMPLEXITIES, Complexity, QAExample


def _require(cond: bool, place: str, message: str) -> None:
    if not cond:
        raise InputError(f"{place}: {message}")


def _qa_passages(b: QABuilder, value: Any, rec: Record, key: str, dataset: str) -> list[str]:
    if value is None:
        return []
    _require(isinstance(value, list), rec.place, f"`{key}` must be a list of {{title, text}} objects")
    ids = []
    for item in value:
        _require(
            isinstance(item, dict) and isinstance(item.get("text"), str),
            rec.place,
            f"each of `{key}` must be an object with a string `text`",
        )
        pid = b.passage(item.get("title"), item["text"], dataset)
        if pid:
            ids.append(pid)
    return ids


def _qa_complexity(value: Any, place: str) -> Complexity | None:
    if value is None:
        return None
    _require(value in COMPLEXITIES, place, f"`complexity` must be one of {', '.join(COMPLEXITIES)}, got {value!r}")
    return cast(Complexity, value)


def _qa_gold_ids(value: Any, place: str) -> list[str]:
    if value is None:
        return []
    _require(
        isinstance(value, list) and all(isinstance(v, str) for v in value),
        place,
        "`gold_passage_ids` must be a list of strings",
    )
    return list(value)


def add_qa_jsonl(b: QABuilder, rec: Record) -> None:
    data = rec.data
    question = data.get("question")
    _require(isinstance(question, str) and bool(question.strip()), rec.place, "`question` must be a non-empty string")
    metadata = data.get("metadata")
    _require(metadata is None or isinstance(metadata, dict), rec.place, "`metadata` must be a JSON object")
    dataset = str(data.get("dataset") or "")
    source = dataset or rec.base
    _qa_passages(b, data.get("paragraphs"), rec, "paragraphs", source)
    gold = _qa_passages(b, data.get("gold_passages"), rec, "gold_passages", source)
    qtype = data.get("qtype")
    b.question(
        QAExample(
            id=rec.id("id"),
            question=cast(str, question),  # checked by _require above
            answers=answers_of(data.get("answers")),
            gold_passage_ids=gold + _qa_gold_ids(data.get("gold_passage_ids"), rec.place),
            dataset=dataset,
            complexity=_qa_complexity(data.get("complexity"), rec.place),
            qtype=str(qtype) if qtype is not None else None,
            metadata=dict(metadata or {}),
        )
    )
