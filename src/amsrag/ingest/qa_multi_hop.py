"""Loaders of the multi-hop QA layouts: HotpotQA (and 2WikiMultihopQA) in the original, Hugging Face and IRCoT
layouts, and MuSiQue. Each adds one record to a `QABuilder`."""

from __future__ import annotations

import re
from typing import Any

from amsrag.ingest.dataset_facts import MULTI_HOP_DATASETS, hop_of_dataset
from amsrag.ingest.qa_records import QABuilder, Record, answers_of, join_sentences
from amsrag.types import QAExample

_TWO_WIKI_TYPES = frozenset({"compositional", "inference", "bridge_comparison"})
_HOPS = re.compile(r"(\d+)hop")


def _ircot_answers(objects: Any) -> list[str]:
    found: list[Any] = []
    for obj in objects or []:
        found.append(obj.get("spans"))
        found.append(obj.get("number") or None)
        date = obj.get("date") or {}
        found.append(" ".join(str(date.get(k) or "") for k in ("day", "month", "year")).strip() or None)
    return answers_of(*found)


def _hotpot_paragraphs(context: Any) -> list[tuple[str, Any]]:
    """(title, sentences) of the Hugging Face layout (dict of lists) or the original ([[title, sents]])."""
    if isinstance(context, dict):
        return list(zip(context["title"], context["sentences"], strict=True))
    return [(item[0], item[1]) for item in context]


def _support_titles(facts: Any) -> set[str]:
    if isinstance(facts, dict):
        return set(facts.get("title", []))
    return {fact[0] for fact in facts}


def _is_2wiki(rec: Record) -> bool:
    data = rec.data
    return "evidences" in data or data.get("type") in _TWO_WIKI_TYPES or rec.name_dataset == "2wikimultihopqa"


def _load_hotpot_layout(b: QABuilder, rec: Record) -> None:
    data = rec.data
    dataset = "2wikimultihopqa" if _is_2wiki(rec) else "hotpotqa"
    separator = " " if dataset == "2wikimultihopqa" else ""  # 2Wiki sentences carry no leading space
    support = _support_titles(data["supporting_facts"])
    gold: list[str] = []
    for title, sentences in _hotpot_paragraphs(data["context"]):
        pid = b.passage(title, join_sentences(sentences, separator), dataset)
        if pid and title in support:
            gold.append(pid)
    metadata = {"level": data["level"]} if data.get("level") else {}
    b.question(
        QAExample(
            id=rec.id("id", "_id"),
            question=str(data["question"]),
            answers=answers_of(data.get("answer")),
            gold_passage_ids=gold,
            dataset=dataset,
            complexity=hop_of_dataset(dataset),
            qtype=data.get("type") or None,
            metadata=metadata,
        )
    )


def _hops(qid: str) -> str | None:
    m = _HOPS.match(qid)
    return f"{m.group(1)}hop" if m else None


def _load_ircot(b: QABuilder, rec: Record) -> None:
    data = rec.data
    dataset = rec.name_dataset if rec.name_dataset in MULTI_HOP_DATASETS else "hotpotqa"
    gold: list[str] = []
    for ctx in data["contexts"]:
        pid = b.passage(ctx.get("title"), ctx.get("paragraph_text"), dataset)
        if pid and ctx.get("is_supporting"):
            gold.append(pid)
    qid = rec.id("question_id")
    b.question(
        QAExample(
            id=qid,
            question=str(data["question_text"]),
            answers=_ircot_answers(data.get("answers_objects")),
            gold_passage_ids=gold,
            dataset=dataset,
            complexity=hop_of_dataset(dataset),
            qtype=_hops(qid) if dataset == "musique" else None,
        )
    )


def add_hotpot(b: QABuilder, rec: Record) -> None:
    if "contexts" in rec.data:
        _load_ircot(b, rec)
    else:
        _load_hotpot_layout(b, rec)


def _musique_gold_indices(data: dict[str, Any]) -> set[Any]:
    paragraphs = data["paragraphs"]
    if any("is_supporting" in p for p in paragraphs):
        return {p.get("idx", i) for i, p in enumerate(paragraphs) if p.get("is_supporting")}
    steps = data.get("question_decomposition") or []
    return {s.get("paragraph_support_idx") for s in steps} - {None}


def add_musique(b: QABuilder, rec: Record) -> None:
    data = rec.data
    gold_indices = _musique_gold_indices(data)
    gold: list[str] = []
    for i, para in enumerate(data["paragraphs"]):
        pid = b.passage(para.get("title"), para.get("paragraph_text"), "musique")
        if pid and para.get("idx", i) in gold_indices:
            gold.append(pid)
    qid = rec.id("id")
    metadata = {"answerable": data["answerable"]} if "answerable" in data else {}
    b.question(
        QAExample(
            id=qid,
            question=str(data["question"]),
            answers=answers_of(data.get("answer"), data.get("answer_aliases")),
            gold_passage_ids=gold,
            dataset="musique",
            complexity="multi_hop",
            qtype=_hops(qid),
            metadata=metadata,
        )
    )
