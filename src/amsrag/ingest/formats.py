"""Input formats and their detection from the file extension and the first record's keys."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amsrag.errors import InputError
from amsrag.ingest.parsers import DOCUMENT_FORMATS, DOCUMENT_SUFFIXES
from amsrag.ingest.readers import base_suffix, first_record, read_text
from amsrag.ingest.sidecar import SIDECAR
from amsrag.types import lone_surrogate_at

log = logging.getLogger("amsrag.ingest")

FORMAT_DESCRIPTIONS: dict[str, str] = {
    "jsonl": "passage JSON Lines {id?, title?, text | contents, metadata?}",
    "text": "plain text (.txt), chunked",
    "markdown": "Markdown (.md, .markdown), split at headings and chunked",
    "pdf": "PDF (.pdf) with a text layer: pages, outline headings; passages cite their pages",
    "html": "HTML (.html, .htm, .xhtml): the main content, split at headings",
    "docx": "Word (.docx; the documents extra): split at heading styles",
    "pptx": "PowerPoint (.pptx; the documents extra): one page per slide",
    "epub": "EPUB books (.epub): the chapters in reading order, split at headings",
    "hotpotqa": "HotpotQA (Hugging Face, original and IRCoT layouts; also 2WikiMultihopQA)",
    "musique": "MuSiQue {id, paragraphs[{idx, title, paragraph_text, is_supporting}], answer, ...}",
    "nq": "NQ-open with ctxs (lost-in-the-middle), and question-only NQ / TriviaQA / PopQA files",
    "squad": "SQuAD v1.1 {data: [articles]} or [{context, question, answer}]",
    "flashrag": "FlashRAG Wikipedia corpus {id, contents: '\"Title\"\\ntext'}",
    "questions": "question lists {question, answer[]} and other question-only files",
    "qa-jsonl": "amsrag QA JSONL {id, question, answers, gold_passages?, paragraphs?, gold_passage_ids?}",
    "retrievalqa": "RetrievalQA {question_id, question, ground_truth, context[{title, text}]}",
    "corpus": "a JSON corpus: [{title, text}] or {title: [sentences] | text}",
}
FORMATS: tuple[str, ...] = tuple(FORMAT_DESCRIPTIONS)
PASSAGE_FORMATS: tuple[str, ...] = ("jsonl", "text", "markdown", *DOCUMENT_FORMATS)
DATASET_FORMATS: tuple[str, ...] = tuple(f for f in FORMATS if f not in PASSAGE_FORMATS)

# Extensions read from a directory, by format.
DIRECTORY_SUFFIXES: dict[str, tuple[str, ...]] = {
    "jsonl": (".jsonl",),
    "text": (".txt",),
    "markdown": (".md", ".markdown"),
    **DOCUMENT_SUFFIXES,
}
_TEXT_SUFFIXES = {".txt": "text", ".md": "markdown", ".markdown": "markdown",
                  **{suffix: fmt for fmt, suffixes in DOCUMENT_SUFFIXES.items() for suffix in suffixes}}
_JSON_SUFFIXES = (".json", ".jsonl")

_QUESTION_ONLY_ANSWER_KEYS = ("golden_answers", "short_answers")


def format_list() -> str:
    return ", ".join(FORMATS)


def check_format(fmt: str) -> str:
    """`fmt` itself when it names a format or is "auto"; InputError otherwise."""
    if fmt == "auto" or fmt in FORMAT_DESCRIPTIONS:
        return fmt
    raise InputError(f"unknown format {fmt!r}; use auto or one of: {format_list()}")


def _undetectable(path: Path, why: str) -> InputError:
    return InputError(f"{path}: cannot detect the input format ({why}); pass --format, one of: {format_list()}")


def _labels_error(path: Path, what: str) -> InputError:
    return InputError(
        f"{path}: this is a complexity-label file ({what}), not QA data or passages; "
        "it trains the complexity classifier"
    )


def _is_hotpot(keys: set[str]) -> bool:
    return {"question_text", "contexts"} <= keys or {"context", "supporting_facts"} <= keys


def _is_musique(record: dict[str, Any]) -> bool:
    paragraphs = record.get("paragraphs")
    return (
        isinstance(paragraphs, list)
        and "question" in record
        and any(isinstance(p, dict) and "paragraph_text" in p for p in paragraphs)
    )


def _is_squad(record: dict[str, Any]) -> bool:
    data = record.get("data")
    if isinstance(data, list):
        return all(isinstance(a, dict) and "paragraphs" in a for a in data[:3])
    return (
        isinstance(record.get("context"), str) and {"question", "answer"} <= set(record) and ("dataset" not in record)
    )


def _is_labels(record: dict[str, Any]) -> str | None:
    keys = set(record)
    if "total_answer" in keys or ("dataset_name" in keys and record.get("answer") in ("A", "B", "C")):
        return "Adaptive-RAG silver labels"
    if "judgement" in keys and "question" in keys:
        return "SKR retrieval-helpfulness judgements"
    return None


def _is_question_only_nq(record: dict[str, Any]) -> bool:
    if any(k in record for k in _QUESTION_ONLY_ANSWER_KEYS):
        return True
    return "dataset" in record and ("answer" in record or "context" in record)


def _is_passage(record: dict[str, Any]) -> bool:
    return "question" not in record and ("text" in record or "contents" in record)


def _format_of_record(record: Any, path: Path) -> str:
    if not isinstance(record, dict):
        raise _undetectable(path, f"the first record is a JSON {type(record).__name__}, not an object")
    keys = set(record)
    labels = _is_labels(record)
    if labels:
        raise _labels_error(path, labels)
    checks: tuple[tuple[str, bool], ...] = (
        ("hotpotqa", _is_hotpot(keys)),
        ("musique", _is_musique(record)),
        ("nq", "ctxs" in keys and "question" in keys),
        ("squad", _is_squad(record)),
        ("retrievalqa", {"question", "ground_truth"} <= keys),
        ("nq", "question" in keys and _is_question_only_nq(record)),
        ("qa-jsonl", "question" in keys and "answers" in keys),
        ("questions", "question" in keys),
        ("flashrag", "contents" in keys and keys <= {"id", "contents"}),
    )
    for fmt, matched in checks:
        if matched:
            return fmt
    if _is_passage(record):
        return "jsonl" if base_suffix(path) == ".jsonl" else "corpus"
    raise _undetectable(path, f"first record has keys {sorted(keys)[:12]}")


def _is_title_map(data: Any) -> bool:
    """A JSON object mapping titles to sentence lists or texts (HippoRAG HotpotQA corpus)."""
    if not isinstance(data, dict) or not data or {"text", "contents", "question", "data"} & set(data):
        return False
    values = list(data.values())[:5]
    return all(isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v)) for v in values)


def _detect_json(path: Path) -> str:
    record = first_record(path)
    if record is None:
        if base_suffix(path) == ".jsonl":
            return "jsonl"  # an empty passage file: the caller reports the empty corpus
        raise _undetectable(path, "it holds no records")
    if base_suffix(path) == ".json" and _is_title_map(record):
        return "corpus"
    return _format_of_record(record, path)


def _detect_csv(path: Path) -> str:
    header = read_text(path).partition("\n")[0].lower()
    if "label" in header and "question" in header:
        raise _labels_error(path, "CSV of complexity labels")
    raise _undetectable(path, "CSV files are not an input format")


def printable_path(path: Path) -> str:
    """`path` as text that can be printed and stored: a byte of its name that is not UTF-8 as `\\xNN`."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


PassedOver = list[tuple[Path, str]]  # (file, why it was not read) of the files a folder scan left out


def passed_over_reason(path: Path, fmt: str) -> str | None:
    """Why a visible file of a folder is not read as passages, or None when it is read elsewhere (a table
    file: the table reader takes it)."""
    from amsrag.ingest.tables import TABLE_SUFFIXES

    suffix = base_suffix(path)
    if suffix in TABLE_SUFFIXES or (fmt == "auto" and suffix == ".csv"):
        return None
    if fmt != "auto" and any(suffix in group for group in DIRECTORY_SUFFIXES.values()):
        return f"not {fmt} (--format {fmt})"
    if suffix == ".json":
        return "a .json file in a folder is not read (give the file itself as an input)"
    return "unsupported format"


def _iter_dir(path: Path, suffixes: tuple[str, ...], passed_over: PassedOver | None = None,
              fmt: str = "auto") -> Iterator[Path]:
    """The files under `path` with one of `suffixes` (hidden ones skipped). A file name that is not UTF-8 is
    an InputError naming it; a symbolic link leading outside `path` and what is not a regular file (a FIFO,
    a device, a socket, a broken link) are skipped with a warning naming them. Visible files not read are
    added to `passed_over` with the reason."""
    root = path.resolve()
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.name == SIDECAR:  # the folder's tags (amsrag.ingest.sidecar), read at its top only
            if passed_over is not None and len(rel.parts) > 1:
                passed_over.append((p, f"an {SIDECAR} is read only at the top of a folder given to index "
                                       f"add|build|sync"))
            continue
        if base_suffix(p) not in suffixes:
            if passed_over is not None and not p.is_dir() and (why := passed_over_reason(p, fmt)) is not None:
                passed_over.append((p, why))
            continue
        if lone_surrogate_at(str(p)) is not None:
            raise InputError(f"{printable_path(p)}: the file name is not UTF-8 (the bytes shown as \\x..); rename "
                             f"the file, or move it out of {printable_path(path)}")
        if not p.resolve().is_relative_to(root):
            log.warning("skipped %s: a symbolic link leads outside %s (to %s)", p, path, p.resolve())
            if passed_over is not None:
                passed_over.append((p, f"a symbolic link leading outside {printable_path(path)}"))
            continue
        if p.is_dir():
            continue
        if not p.is_file():
            log.warning("skipped %s: not a regular file (a FIFO, device, socket or broken link)", p)
            if passed_over is not None:
                passed_over.append((p, "not a regular file (a FIFO, device, socket or broken link)"))
            continue
        yield p


def directory_files(path: Path, fmt: str = "auto", allow_empty: bool = False,
                    passed_over: PassedOver | None = None) -> list[Path]:
    """Supported passage files under a directory, recursively, in sorted order (hidden ones skipped);
    `allow_empty`: a folder without any (it held tables) is no error; `passed_over` collects the visible
    files not read, with the reason."""
    if fmt == "auto":
        suffixes = tuple(s for group in DIRECTORY_SUFFIXES.values() for s in group)
    elif fmt in DIRECTORY_SUFFIXES:
        suffixes = DIRECTORY_SUFFIXES[fmt]
    else:
        raise InputError(f"{path}: a directory can only be read as jsonl, text or markdown, or a document "
                         f"format ({', '.join(DOCUMENT_FORMATS)}), not {fmt}")
    files = list(_iter_dir(path, suffixes, passed_over, fmt))
    if not files and not allow_empty:
        raise InputError(f"{path}: no supported files in this directory (looked for {' '.join(suffixes)})")
    return files


def detect_format(path: Path) -> str:
    """The format name of a file (or of a directory's files when they share one, else "mixed")."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        kinds = {detect_format(p) for p in directory_files(path)}
        return kinds.pop() if len(kinds) == 1 else "mixed"
    suffix = base_suffix(path)
    if suffix in _TEXT_SUFFIXES:
        return _TEXT_SUFFIXES[suffix]
    if suffix in _JSON_SUFFIXES:
        return _detect_json(path)
    if suffix == ".csv":
        return _detect_csv(path)
    raise _undetectable(path, f"unsupported extension {suffix or '(none)'}")
