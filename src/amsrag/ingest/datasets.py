"""The public QA data sets (../shared/data): what library code knows about them, and their loaders.

- Facts: where the data folder is (`default_data_dir`), which data sets are multi-hop / one-hop
  (`MULTI_HOP_DATASETS`, `hop_of_dataset`), the shared-data files the trainers read (`SILVER3_FILE`, ...),
  the question normalisation used to deduplicate across files (`normalise_question`).
- Silver complexity label files in the Adaptive-RAG A/B/C layout (`load_silver3`; `amsrag train classifier label`
  writes it) -> `LabelledQuestion` rows.
- Loaders of the QA layouts and of amsrag's own QA JSONL. Every loader fills a `QASet`: passages
  deduplicated by content (first occurrence wins, id `passage_id_for(title, text)`, so the same
  paragraph gets the same id in every file) and questions whose `gold_passage_ids` name passages of the set.

The modules: `dataset_facts` (the facts), `silver_labels` (the label files), `qa_records` (the `QABuilder`,
answer strings), the loaders by family `qa_multi_hop` (HotpotQA, 2WikiMultihopQA, MuSiQue), `qa_one_hop` (NQ,
TriviaQA, PopQA, SQuAD, question lists, RetrievalQA) and `qa_jsonl` (amsrag's own); here, corpora and the
dispatch by format (`load_dataset`). Every name stays importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from amsrag.errors import InputError
from amsrag.ingest.dataset_facts import (
    ANSWER_FILES,
    DATASET_COMPLEXITY,
    DATASET_DIRS,
    EVAL_FILES,
    HOTPOT_FILES,
    MULTI_HOP_DATASETS,
    MUSIQUE_FILES,
    NQ_FILE,
    ONE_HOP_DATASETS,
    READER_FILES,
    SILVER3_FILE,
    WIKI_FILE,
    dataset_from_name,
    default_data_dir,
    hop_of_dataset,
)
from amsrag.ingest.qa_jsonl import add_qa_jsonl
from amsrag.ingest.qa_multi_hop import add_hotpot, add_musique
from amsrag.ingest.qa_one_hop import add_nq, add_questions, add_retrievalqa, add_squad
from amsrag.ingest.qa_records import QABuilder, Record, answers_of, join_sentences
from amsrag.ingest.readers import base_name, iter_records, split_flashrag_contents
from amsrag.ingest.silver_labels import SILVER_LETTERS, SPLITS, LabelledQuestion, LabelSource, Split, load_silver3
from amsrag.text.normalise import normalise_question
from amsrag.types import Passage, QASet, content_hash

__all__ = [
    "ANSWER_FILES",
    "DATASET_COMPLEXITY",
    "DATASET_DIRS",
    "EVAL_FILES",
    "HOTPOT_FILES",
    "MULTI_HOP_DATASETS",
    "MUSIQUE_FILES",
    "NQ_FILE",
    "ONE_HOP_DATASETS",
    "READER_FILES",
    "SILVER3_FILE",
    "SILVER_LETTERS",
    "SPLITS",
    "WIKI_FILE",
    "LabelSource",
    "LabelledQuestion",
    "QABuilder",
    "Split",
    "answers_of",
    "dataset_from_name",
    "default_data_dir",
    "hop_of_dataset",
    "iter_corpus_passages",
    "load_dataset",
    "load_silver3",
    "normalise_question",
]

# ---------------------------------------------------------------- corpora (passages only)

_TEXT_KEYS = frozenset({"text", "contents", "paragraph_text"})


def _corpus_pairs(data: Any) -> Iterator[tuple[Any, Any]]:
    """(title, text) of one corpus record: a passage object, or an object mapping titles to texts."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    if not _TEXT_KEYS & set(data):
        for title, value in data.items():
            yield title, join_sentences(value, "")
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


def iter_corpus_passages(path: Path, fmt: str) -> Iterator[Passage]:
    """The passages `load_dataset(path, fmt)` gives for a corpus (`flashrag` or `corpus`), as a stream: same
    ids, texts, order and deduplication (first occurrence of a content wins), without holding the corpus."""
    if fmt not in ("flashrag", "corpus"):
        raise InputError(f"format {fmt!r}: only a corpus (flashrag, corpus) is streamed")
    dataset = "wiki" if fmt == "flashrag" else dataset_from_name(path) or "corpus"
    seen: set[bytes] = set()  # content hashes (digests: half the size of their hex)
    for place, data in iter_records(path):
        try:
            pairs = [(str(title or "").strip(), str(text or "").strip()) for title, text in _corpus_pairs(data)]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _record_error(place, "passage", exc) from None
        for title, text in pairs:
            key = bytes.fromhex(content_hash(title, text))
            if text and key not in seen:
                seen.add(key)
                yield Passage.make(text=text, title=title, metadata={"source": dataset})


# ---------------------------------------------------------------- dispatch

_RecordLoader = Callable[[QABuilder, Record], None]
_LOADERS: dict[str, _RecordLoader] = {
    "hotpotqa": add_hotpot,
    "musique": add_musique,
    "nq": add_nq,
    "squad": add_squad,
    "questions": add_questions,
    "retrievalqa": add_retrievalqa,
    "qa-jsonl": add_qa_jsonl,
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
            loader(b, Record(data, place, index, base, name_dataset))
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
