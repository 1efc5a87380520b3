"""Loaders of the one-hop QA layouts: NQ, TriviaQA and PopQA rows, SQuAD, question-only files and RetrievalQA.
Each adds one record to a `QABuilder`."""

from __future__ import annotations

from typing import Any

from amsrag.ingest.dataset_facts import ONE_HOP_DATASETS, hop_of_dataset
from amsrag.ingest.qa_records import QABuilder, Record, answers_of
from amsrag.types import QAExample

_ROW_DATASETS = {"nq": "nq", "trivia": "triviaqa", "triviaqa": "triviaqa", "popqa": "popqa", "squad": "squad"}


def _nq_dataset(rec: Record) -> str:
    row = rec.data.get("dataset")
    if isinstance(row, str) and row.lower() in _ROW_DATASETS:
        return _ROW_DATASETS[row.lower()]
    meta = rec.data.get("metadata")
    if isinstance(meta, dict) and "s_pop" in meta:
        return "popqa"
    return rec.name_dataset if rec.name_dataset in ONE_HOP_DATASETS else "nq"


def _popqa_metadata(data: dict[str, Any]) -> dict[str, Any]:
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        return {}
    return {k: meta[k] for k in ("prop", "s_pop", "o_pop") if k in meta}


def _nq_gold(b: QABuilder, rec: Record, dataset: str) -> list[str]:
    data = rec.data
    ctxs = data.get("ctxs")
    if isinstance(ctxs, list):
        flagged = any("isgold" in c for c in ctxs)
        gold = []
        for ctx in ctxs:
            pid = b.passage(ctx.get("title"), ctx.get("text"), dataset)
            if pid and (ctx.get("isgold") if flagged else False):
                gold.append(pid)
        return gold
    context = data.get("context")
    if isinstance(context, str) and context.strip():
        pid = b.passage(data.get("title"), context, dataset)
        return [pid] if pid else []
    return []


def add_nq(b: QABuilder, rec: Record) -> None:
    data = rec.data
    dataset = _nq_dataset(rec)
    gold = _nq_gold(b, rec, dataset)
    raw_id = rec.id("id", "example_id", prefix=f"{dataset}-")
    b.question(
        QAExample(
            id=raw_id,
            question=str(data["question"]),
            answers=answers_of(
                data.get("answers"), data.get("golden_answers"), data.get("answer"), data.get("short_answers")
            ),
            gold_passage_ids=gold,
            dataset=dataset,
            complexity=hop_of_dataset(dataset),
            metadata=_popqa_metadata(data) if dataset == "popqa" else {},
        )
    )


def _squad_article(b: QABuilder, article: dict[str, Any], id_prefix: str) -> None:
    title = str(article.get("title") or "").replace("_", " ")
    for p, para in enumerate(article["paragraphs"]):
        pid = b.passage(title, para["context"], "squad")
        for q, qa in enumerate(para.get("qas", [])):
            b.question(
                QAExample(
                    id=str(qa.get("id") or f"{id_prefix}.{p}.{q}"),
                    question=str(qa["question"]),
                    answers=answers_of(qa.get("answers")),
                    gold_passage_ids=[pid] if pid else [],
                    dataset="squad",
                    complexity="one_hop",
                )
            )
            if b.full:
                return


def add_squad(b: QABuilder, rec: Record) -> None:
    data = rec.data
    if "data" in data:
        for a, article in enumerate(data["data"]):
            _squad_article(b, article, f"{rec.base}:{a}")
            if b.full:
                return
        return
    title = str(data.get("title") or "").replace("_", " ")
    pid = b.passage(title, data["context"], "squad")
    b.question(
        QAExample(
            id=rec.id("id"),
            question=str(data["question"]),
            answers=answers_of(data.get("answer"), data.get("answers")),
            gold_passage_ids=[pid] if pid else [],
            dataset="squad",
            complexity="one_hop",
        )
    )


def add_questions(b: QABuilder, rec: Record) -> None:
    data = rec.data
    dataset = _ROW_DATASETS.get(str(data.get("dataset", "")).lower(), rec.name_dataset)
    b.question(
        QAExample(
            id=rec.id("id", "_id", "question_id"),
            question=str(data["question"]),
            answers=answers_of(
                data.get("answer"), data.get("answers"), data.get("golden_answers"), data.get("ground_truth")
            ),
            dataset=dataset,
            complexity=hop_of_dataset(dataset),
        )
    )


def add_retrievalqa(b: QABuilder, rec: Record) -> None:
    data = rec.data
    for ctx in data.get("context") or []:  # retrieved snippets (not annotated as gold); ToolQA's are bare strings
        if isinstance(ctx, str):
            b.passage("", ctx, "retrievalqa")
        else:
            b.passage(ctx.get("title"), ctx.get("text"), "retrievalqa")
    metadata = {"data_source": data["data_source"]} if "data_source" in data else {}
    b.question(
        QAExample(
            id=rec.id("question_id", "id"),
            question=str(data["question"]),
            answers=answers_of(data.get("ground_truth")),
            dataset="retrievalqa",
            complexity="one_hop",
            metadata=metadata,
        )
    )
