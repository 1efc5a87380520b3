"""The public entry points: `load_qa` (questions + passages of one file) and `iter_passages` (index input)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path

from amsrag.config import ChunkConfig
from amsrag.errors import InputError
from amsrag.ingest.chunking import TokenCounter
from amsrag.ingest.datasets import load_dataset
from amsrag.ingest.documents import read_document
from amsrag.ingest.formats import DATASET_FORMATS, check_format, detect_format, directory_files
from amsrag.ingest.readers import read_passage_jsonl
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


class _IdRegistry:
    """Rejects a passage id seen before, unless both are content ids of the same content."""

    def __init__(self) -> None:
        self._places: dict[str, tuple[str, str]] = {}  # id -> (place, content hash)

    def admit(self, passage: Passage, place: str) -> bool:
        seen = self._places.get(passage.id)
        if seen is None:
            self._places[passage.id] = (place, passage.content_hash)
            return True
        first_place, first_hash = seen
        is_content_id = passage.id == passage_id_for(passage.title, passage.text)
        if is_content_id and first_hash == passage.content_hash:
            return False
        raise InputError(
            f"duplicate passage id {passage.id!r}: first at {first_place}, again at {place}; "
            "passage ids must be unique across the inputs"
        )


class _Reader:
    """Reads the passages of input files; the token counter is loaded on first use."""

    def __init__(self, chunking: ChunkConfig | None) -> None:
        self.chunking = chunking or ChunkConfig()
        self._counter: TokenCounter | None = None

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter()
        return self._counter

    def file(self, path: Path, fmt: str, doc_id: str) -> Iterator[tuple[str, Passage]]:
        """(place, passage) of one file."""
        if fmt == "auto":
            fmt = detect_format(path)
        if fmt == "jsonl":
            yield from read_passage_jsonl(path)
        elif fmt in ("text", "markdown"):
            for passage in read_document(path, doc_id, fmt, self.chunking, self.counter):
                yield f"{path} (chunk {passage.metadata['chunk']})", passage
        else:
            for passage in load_dataset(path, fmt).passages:
                yield str(path), passage

    def input(self, root: Path, fmt: str) -> Iterator[tuple[str, Passage]]:
        """(place, passage) of one input path: a file, or a directory read recursively."""
        if not root.is_dir():
            yield from self.file(root, fmt, root.name)
            return
        for path in directory_files(root, fmt):
            yield from self.file(path, fmt, path.relative_to(root).as_posix())


def iter_passages(
    paths: Sequence[Path | str] | Path | str,
    fmt: str = "auto",
    chunking: ChunkConfig | None = None,
) -> Iterator[Passage]:
    """The passages of index inputs: passage JSONL, text / Markdown files or folders (chunked), or
    any dataset format (its QASet passages). Passage ids must be unique across all inputs; the same
    dataset paragraph met twice (same content id) is yielded once.
    """
    fmt = check_format(fmt)
    roots = [_existing(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    if not roots:
        raise InputError("no input paths given")
    registry = _IdRegistry()
    reader = _Reader(chunking)
    for root in roots:
        for place, passage in reader.input(root, fmt):
            if registry.admit(passage, place):
                yield passage
