"""The public entry points: `load_qa` (questions + passages of one file) and `iter_passages` (index input)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.errors import InputError
from amsrag.ingest.blocks import document_passages
from amsrag.ingest.datasets import iter_corpus_passages, load_dataset
from amsrag.ingest.document_tables import document_tables
from amsrag.ingest.documents import read_document
from amsrag.ingest.formats import DATASET_FORMATS, PassedOver, check_format, detect_format, directory_files
from amsrag.ingest.parsers import DOCUMENT_FORMATS, ParseBudget, parse_document
from amsrag.ingest.readers import check_size, file_fingerprint, read_passage_jsonl
from amsrag.tables.table import Table
from amsrag.types import Passage, QASet, passage_id_for


def _existing(path: Path | str) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    return path


def load_qa(path: Path | str, fmt: str = "auto", limit: int | None = None) -> QASet:
    """Questions and passages of one file of any format (auto-detected by default).

    Dataset formats give questions whose `gold_passage_ids` name passages of the set; passage
    formats (jsonl, text, markdown; a directory of them too) give passages and no questions.
    `limit` caps the questions (the passages for files without questions).
    """
    path = _existing(path)
    fmt = check_format(fmt)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt in DATASET_FORMATS:
        if path.is_dir():
            raise InputError(f"{path}: is a directory; {fmt} data is read from a single file")
        return load_dataset(path, fmt, limit)
    passages = iter_passages([path], "auto" if fmt == "mixed" else fmt)
    return QASet(passages=list(islice(passages, limit)), questions=[], source=str(path))


class IdRegistry:
    """Rejects a passage id seen before, unless both are content ids of the same content.

    The chunks of a document (ids `DOC#0`, `DOC#1`, ... placed `FILE (chunk n)`, in order) are kept as one
    entry per document, their number and place: a file of a million chunks costs no more than one chunk."""

    def __init__(self) -> None:
        self._places: dict[str, tuple[str, str]] = {}  # id -> (place, content hash)
        self._chunked: dict[str, tuple[str, int]] = {}  # doc id -> (place less " (chunk n)", chunks admitted)

    def _first_place(self, pid: str) -> str | None:
        seen = self._places.get(pid)
        if seen is not None:
            return seen[0]
        doc, sep, n = pid.rpartition("#")
        chunked = self._chunked.get(doc) if sep and n.isdigit() and n == str(int(n)) else None
        return f"{chunked[0]} (chunk {n})" if chunked is not None and int(n) < chunked[1] else None

    def admit(self, passage: Passage, place: str) -> bool:
        first_place = self._first_place(passage.id)
        if first_place is None:
            self._remember(passage, place)
            return True
        seen = self._places.get(passage.id)
        is_content_id = passage.id == passage_id_for(passage.title, passage.text)
        if is_content_id and seen is not None and seen[1] == passage.content_hash:
            return False
        raise InputError(
            f"duplicate passage id {passage.id!r}: first at {first_place}, again at {place}; "
            "passage ids must be unique across the inputs"
        )

    def _remember(self, passage: Passage, place: str) -> None:
        n = passage.metadata.get("chunk") if passage.doc_id else None
        suffix = f" (chunk {n})"
        if isinstance(n, int) and passage.id == f"{passage.doc_id}#{n}" and place.endswith(suffix):
            prefix = place[: -len(suffix)]
            known = self._chunked.get(str(passage.doc_id))
            if (known is None and n == 0) or (known is not None and known == (prefix, n)):
                self._chunked[str(passage.doc_id)] = (prefix, n + 1)
                return
        self._places[passage.id] = (place, passage.content_hash)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One input file and the document key it is indexed under: `NAME/relative/path` for a file found
    in a folder declared as NAME (by default the folder's own name), the file name for a file given
    directly. Text and Markdown passages get doc_id = key and ids `key#n`."""

    key: str
    path: Path
    fmt: str  # a format name, or "auto"
    relative: str = ""  # the path inside its folder (posix); "" for a file given directly

    @property
    def source(self) -> str:
        """What passages cite as their `source`: the path relative to the folder, else the file name."""
        return self.relative or self.path.name

    def fingerprint(self) -> str:
        return file_fingerprint(self.path)


@dataclass(frozen=True, slots=True)
class InputRoot:
    """An input path and the namespace of its documents (None for a single file)."""

    path: Path
    name: str | None

    @classmethod
    def parse(cls, spec: str | Path) -> InputRoot:
        """`PATH` or `NAME=PATH`; a folder's namespace defaults to its own name."""
        text = str(spec)
        name: str | None = None
        if not Path(text).exists() and "=" in text:
            name, _, text = text.partition("=")
            name = name.strip().strip("/")
            if not name or any(c in name for c in "#\\"):
                raise InputError(f"{spec}: a folder name (NAME=PATH) must be non-empty, without '#' or '\\'")
        path = _existing(text)
        if path.is_dir():
            return cls(path, name or path.resolve().name or "root")
        return cls(path, name)


def input_roots(paths: Sequence[Path | str]) -> list[InputRoot]:
    """The roots of the inputs; two folders of the same name must be told apart (NAME=PATH)."""
    roots = [InputRoot.parse(p) for p in paths]
    if not roots:
        raise InputError("no input paths given")
    seen: dict[str, Path] = {}
    for root in roots:
        if root.name is None or not root.path.is_dir():
            continue
        if root.name in seen and seen[root.name].resolve() != root.path.resolve():
            raise InputError(f"two input folders are both named {root.name!r} ({seen[root.name]} and {root.path}): "
                             f"their documents would collide; name one of them, e.g. other-{root.name}={root.path}")
        seen[root.name] = root.path
    return roots


def source_files(root: InputRoot, fmt: str, allow_empty: bool = False,
                 passed_over: PassedOver | None = None) -> list[SourceFile]:
    """The passage files of one input root with their document keys, in sorted order (`allow_empty`: a
    folder holding only tables is no error; `passed_over` collects the folder's files not read, and why)."""
    if not root.path.is_dir():
        return [SourceFile(root.name or root.path.name, root.path, fmt)]
    return [SourceFile(f"{root.name}/{rel}", path, fmt, rel)
            for path in directory_files(root.path, fmt, allow_empty, passed_over)
            for rel in (path.relative_to(root.path).as_posix(),)]


class FileReader:
    """Reads the passages of input files; the token counter is loaded on first use."""

    def __init__(self, chunking: ChunkConfig | None, max_file_mb: float | None = None,
                 budget: ParseBudget | None = None, notice: Callable[[str], None] | None = None) -> None:
        self.chunking = chunking or ChunkConfig()
        self.max_file_mb = max_file_mb
        self.budget = budget or ParseBudget()
        self.notice = notice  # hears a long parse's progress (OCR pages)
        self._counter: TokenCounter | None = None

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter()
        return self._counter

    def passages(self, source: SourceFile, tables: list[Table] | None = None) -> Iterator[tuple[str, Passage]]:
        """(place, passage) of one file; the real tables of a document file are added to `tables` when given."""
        path, fmt = source.path, source.fmt
        if self.max_file_mb is not None:
            check_size(path, self.max_file_mb)
        if fmt == "auto":
            fmt = detect_format(path)
        if fmt == "jsonl":
            yield from read_passage_jsonl(path)
        elif fmt in ("text", "markdown"):
            for passage in read_document(path, source.key, fmt, self.chunking, self.counter, source.source):
                yield f"{path} (chunk {passage.metadata['chunk']})", passage
        elif fmt in DOCUMENT_FORMATS:
            parsed = parse_document(path, fmt, self.budget, self.notice)
            if tables is not None:
                tables += document_tables(parsed, source.key, source.source, fmt)
            for passage in document_passages(parsed, source.key, source.source, fmt, self.chunking, self.counter):
                yield f"{path} (chunk {passage.metadata['chunk']})", passage
        elif fmt in ("flashrag", "corpus"):  # streamed: a corpus file is never held whole
            place = str(path)
            for passage in iter_corpus_passages(path, fmt):
                yield place, passage
        else:
            for passage in load_dataset(path, fmt).passages:
                yield str(path), passage


def iter_passages(
    paths: Sequence[Path | str] | Path | str,
    fmt: str = "auto",
    chunking: ChunkConfig | None = None,
) -> Iterator[Passage]:
    """The passages of index inputs: passage JSONL, text / Markdown files or folders (chunked), or
    any dataset format (its QASet passages). Passage ids must be unique across all inputs; the same
    dataset paragraph met twice (same content id) is yielded once. Inputs are `PATH` or `NAME=PATH`
    (see `InputRoot`).
    """
    fmt = check_format(fmt)
    roots = input_roots([paths] if isinstance(paths, str | Path) else paths)
    registry = IdRegistry()
    reader = FileReader(chunking)
    for root in roots:
        for source in source_files(root, fmt):
            for place, passage in reader.passages(source):
                if registry.admit(passage, place):
                    yield passage
