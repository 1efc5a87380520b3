"""The public QA data sets (../shared/data): what library code knows about them, and their loaders.

- Facts: where the data folder is (`default_data_dir`), which data sets are multi-hop / one-hop
  (`MULTI_HOP_DATASETS`, `hop_of_dataset`), the shared-data files the trainers read (`SILVER3_FILE`, ...),
  the question normalisation used to deduplicate across files (`normalise_question`).
- Silver complexity label files in the Adaptive-RAG A/B/C layout (`load_silver3`; `amsrag train classifier label`
  writes it) -> `LabelledQuestion` rows.
- Loaders of the QA layouts and of amsrag's own QA JSONL. Every loader fills a `QASet`: passages
  deduplicated by content (first occurrence wins, id `passage_id_for(title, text)`, so the same
  paragraph gets the same id in every file) and questions whose `gold_passage_ids` name passages of the set.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from amsrag.errors import InputError
from amsrag.ingest.readers import base_name, iter_records, split_flashrag_contents
from amsrag.text.normalise import normalise_question
from amsrag.types import COMPLEXITIES, Complexity, Passage, QAExample, QASet, content_hash

MULTI_HOP_DATASETS = ("hotpotqa", "musique", "2wikimultihopqa")
ONE_HOP_DATASETS = ("nq", "squad", "triviaqa", "popqa")
DATASET_COMPLEXITY: dict[str, Complexity] = {
    **{d: "multi_hop" for d in MULTI_HOP_DATASETS},
    **{d: "one_hop" for d in ONE_HOP_DATASETS},
}
_ROW_DATASETS = {"nq": "nq", "trivia": "triviaqa", "triviaqa": "triviaqa", "popqa": "popqa", "squad": "squad"}
_TWO_WIKI_TYPES = frozenset({"compositional", "inference", "bridge_comparison"})
_HOPS = re.compile(r"(\d+)hop")


def dataset_from_name(path: Path) -> str:
    """The data set a file name points at ("" when it names none)."""
    name = path.name.lower()
    tokens = set(re.split(r"[^a-z0-9]+", name))
    hints = (
        ("2wikimultihopqa", "2wiki" in name),
        ("musique", "musique" in name),
        ("hotpotqa", "hotpot" in name or "hq" in tokens),
        ("squad", "squad" in name),
        ("triviaqa", "trivia" in name),
        ("popqa", "popqa" in name),
        ("nq", "nq" in tokens or "natural_questions" in name or "nq-open" in name),
        ("wiki", "wiki" in tokens),
    )
    return next((dataset for dataset, hit in hints if hit), "")


def hop_of_dataset(dataset: str) -> Complexity | None:
    """multi_hop / one_hop for a data set of known hop count, else None."""
    return DATASET_COMPLEXITY.get(dataset)


# ---------------------------------------------------------------- the shared data folder


def default_data_dir() -> Path:
    """`$AMSRAG_DATA`, else ``../shared/data`` relative to the working directory."""
    env = os.environ.get("AMSRAG_DATA")
    return Path(env) if env else Path("..") / "shared" / "data"


# Files of the data folder that library code reads (paths relative to it).
# Adaptive-RAG's FLAN-T5-XL silver complexity labels, three-way A/B/C (the evaluation's zero-hop group).
SILVER3_FILE = "complexity_labels/adaptiverag_flan_t5_xl_silver_train_reconstructed.jsonl"
# Dataset-derived hop labels of the classifier: every QA file of these folders (corpora excluded). RetrievalQA
# is left out: its questions come from mixed sources whose hop count is unknown.
DATASET_DIRS: tuple[str, ...] = (
    "hotpotqa", "musique", "2wikimultihopqa", "nq", "squad", "triviaqa", "popqa", "question_lists",
)
# The retrieval evaluator's candidate pools: HotpotQA distractor setting, MuSiQue, the NQ-open oracle, and
# Wikipedia passages (the NQ pools' easy negatives).
HOTPOT_FILES = ("hotpotqa/rpt_hotpot_distractor_validation_train.jsonl",
                "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl",
                "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl")
MUSIQUE_FILES = ("musique/migres_musique_200.jsonl", "musique/hipporag_musique_train_100.json")
NQ_FILE = "nq/lostinthemiddle_nq-open-oracle.jsonl.gz"
WIKI_FILE = "flashrag/wiki_sample_corpus_1000.jsonl"
# The evaluation benchmark's default mix: per group, its source files.
EVAL_FILES: dict[str, tuple[str, ...]] = {
    "nq": (NQ_FILE,),
    "squad": ("squad/squad_v1.1_subset_20articles.json", "squad/routerlens_squad_dev_4330.json"),
    "hotpotqa": ("hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl",
                 "hotpotqa/rpt_hotpot_distractor_validation_train.jsonl",
                 "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl", "hotpotqa/migres_hotpot_200.jsonl",
                 "hotpotqa/hipporag_hotpotqa_train_100.json"),
    "musique": MUSIQUE_FILES,
}
# The span reader's training data (learn/reader), in the order it reads them: the first copy of a question wins.
READER_FILES: dict[str, tuple[str, ...]] = {
    "squad": EVAL_FILES["squad"],
    "nq": (NQ_FILE,),
    "hotpotqa": (*HOTPOT_FILES, "hotpotqa/migres_hotpot_200.jsonl", "hotpotqa/hipporag_hotpotqa_train_100.json"),
    "musique": MUSIQUE_FILES,
}
# Where zero-hop (silver A) questions find their answers.
ANSWER_FILES = ("question_lists/honesty_hq_dev.jsonl", "question_lists/honesty_2wikimultihopqa_dev.jsonl",
                "question_lists/honesty_musique_dev.jsonl", "question_lists/honesty_squad_dev.jsonl",
                "question_lists/honesty_nq_test.jsonl", "nq/flashrag_nq_test_sub1000.jsonl",
                "triviaqa/flashrag_triviaqa_test_sub1000.jsonl", "nq/migres_odqa_nq200_trivia200.jsonl")



# ---------------------------------------------------------------- silver complexity label files

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




# ---------------------------------------------------------------- building a QASet


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
class _Record:
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


# ---------------------------------------------------------------- answers


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


def _ircot_answers(objects: Any) -> list[str]:
    found: list[Any] = []
    for obj in objects or []:
        found.append(obj.get("spans"))
        found.append(obj.get("number") or None)
        date = obj.get("date") or {}
        found.append(" ".join(str(date.get(k) or "") for k in ("day", "month", "year")).strip() or None)
    return answers_of(*found)


# ---------------------------------------------------------------- HotpotQA (and 2WikiMultihopQA)


def _hotpot_paragraphs(context: Any) -> list[tuple[str, Any]]:
    """(title, sentences) of the Hugging Face layout (dict of lists) or the original ([[title, sents]])."""
    if isinstance(context, dict):
        return list(zip(context["title"], context["sentences"], strict=True))
    return [(item[0], item[1]) for item in context]


def _join_sentences(sentences: Any, separator: str) -> str:
    if isinstance(sentences, str):
        return sentences.strip()
    if separator:
        return separator.join(s.strip() for s in sentences).strip()
    return "".join(sentences).strip()


def _support_titles(facts: Any) -> set[str]:
    if isinstance(facts, dict):
        return set(facts.get("title", []))
    return {fact[0] for fact in facts}


def _is_2wiki(rec: _Record) -> bool:
    data = rec.data
    return "evidences" in data or data.get("type") in _TWO_WIKI_TYPES or rec.name_dataset == "2wikimultihopqa"


def _load_hotpot_layout(b: QABuilder, rec: _Record) -> None:
    data = rec.data
    dataset = "2wikimultihopqa" if _is_2wiki(rec) else "hotpotqa"
    separator = " " if dataset == "2wikimultihopqa" else ""  # 2Wiki sentences carry no leading space
    support = _support_titles(data["supporting_facts"])
    gold: list[str] = []
    for title, sentences in _hotpot_paragraphs(data["context"]):
        pid = b.passage(title, _join_sentences(sentences, separator), dataset)
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


def _load_ircot(b: QABuilder, rec: _Record) -> None:
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


def _load_hotpot(b: QABuilder, rec: _Record) -> None:
    if "contexts" in rec.data:
        _load_ircot(b, rec)
    else:
        _load_hotpot_layout(b, rec)


# ---------------------------------------------------------------- MuSiQue


def _musique_gold_indices(data: dict[str, Any]) -> set[Any]:
    paragraphs = data["paragraphs"]
    if any("is_supporting" in p for p in paragraphs):
        return {p.get("idx", i) for i, p in enumerate(paragraphs) if p.get("is_supporting")}
    steps = data.get("question_decomposition") or []
    return {s.get("paragraph_support_idx") for s in steps} - {None}


def _load_musique(b: QABuilder, rec: _Record) -> None:
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


# ---------------------------------------------------------------- NQ, TriviaQA, PopQA


def _nq_dataset(rec: _Record) -> str:
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


def _nq_gold(b: QABuilder, rec: _Record, dataset: str) -> list[str]:
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


def _load_nq(b: QABuilder, rec: _Record) -> None:
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


# ---------------------------------------------------------------- SQuAD


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


def _load_squad(b: QABuilder, rec: _Record) -> None:
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


# ---------------------------------------------------------------- question-only files, RetrievalQA


def _load_questions(b: QABuilder, rec: _Record) -> None:
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


def _load_retrievalqa(b: QABuilder, rec: _Record) -> None:
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


# ---------------------------------------------------------------- amsrag QA JSONL


def _require(cond: bool, place: str, message: str) -> None:
    if not cond:
        raise InputError(f"{place}: {message}")


def _qa_passages(b: QABuilder, value: Any, rec: _Record, key: str, dataset: str) -> list[str]:
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


def _load_qa_jsonl(b: QABuilder, rec: _Record) -> None:
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


# ---------------------------------------------------------------- corpora (passages only)

_TEXT_KEYS = frozenset({"text", "contents", "paragraph_text"})


def _corpus_pairs(data: Any) -> Iterator[tuple[Any, Any]]:
    """(title, text) of one corpus record: a passage object, or an object mapping titles to texts."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    if not _TEXT_KEYS & set(data):
        for title, value in data.items():
            yield title, _join_sentences(value, "")
        return
    title, text = data.get("title"), data.get("text", data.get("paragraph_text"))
    if text is None:
        split_title, text = split_flashrag_contents(str(data["contents"]))
        title = split_title if title is None else title
    yield title, text


def _load_passages(b: QABuilder, path: Path, dataset: str, limit: int | None) -> None:
    for place, data in iter_records(path):
        try:
            for title, text in _corpus_pairs(data):
                if limit is not None and len(b.qaset.passages) >= limit:
                    return
                b.passage(title, text, dataset)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _record_error(place, "passage", exc) from None


# ---------------------------------------------------------------- dispatch

_RecordLoader = Callable[[QABuilder, _Record], None]
_LOADERS: dict[str, _RecordLoader] = {
    "hotpotqa": _load_hotpot,
    "musique": _load_musique,
    "nq": _load_nq,
    "squad": _load_squad,
    "questions": _load_questions,
    "retrievalqa": _load_retrievalqa,
    "qa-jsonl": _load_qa_jsonl,
}


def _record_error(place: str, fmt: str, exc: Exception) -> InputError:
    detail = f"missing field {exc.args[0]!r}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
    return InputError(f"{place}: not a valid {fmt} record ({detail})")


def _load_records(b: QABuilder, path: Path, fmt: str) -> None:
    loader = _LOADERS[fmt]
    base, name_dataset = base_name(path), dataset_from_name(path)
    for index, (place, data) in enumerate(iter_records(path), start=1):
        if b.full:
            return
        if not isinstance(data, dict):
            raise InputError(f"{place}: expected a JSON object, got {type(data).__name__}")
        try:
            loader(b, _Record(data, place, index, base, name_dataset))
        except InputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise _record_error(place, fmt, exc) from None


def load_dataset(path: Path, fmt: str, limit: int | None = None) -> QASet:
    """A file of a dataset format (see `formats.DATASET_FORMATS`) as a QASet.

    `limit` caps the questions; for corpora without questions (flashrag, corpus) the passages.
    """
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}")
    if fmt in ("flashrag", "corpus"):
        builder = QABuilder(source=str(path))
        dataset = "wiki" if fmt == "flashrag" else dataset_from_name(path) or "corpus"
        _load_passages(builder, path, dataset, limit)
    else:
        builder = QABuilder(source=str(path), limit=limit)
        _load_records(builder, path, fmt)
    return builder.qaset
