"""One entry point for every index spec: a directory (embedded) or a `postgresql://` URL."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from amsrag.config import AmsragConfig
from amsrag.errors import AmsragError, InputError
from amsrag.indexes.entities_zh import is_mostly_han
from amsrag.indexes.entity_graph import ZH_PARAMS
from amsrag.progress import NullProgress, Progress
from amsrag.store.base import Store
from amsrag.store.embedded import EmbeddedIndex
from amsrag.store.writes import IngestReport, expected_params

if TYPE_CHECKING:
    from amsrag.store.postgres.store import PostgresIndex

URL_PREFIXES = ("postgresql://", "postgres://")


def is_postgres_url(spec: str | Path) -> bool:
    """True for a `postgresql://` or `postgres://` URL (an index spec that is not a directory)."""
    return isinstance(spec, str) and spec.startswith(URL_PREFIXES)


def _postgres() -> type[PostgresIndex]:
    try:
        from amsrag.store.postgres.store import PostgresIndex
    except ImportError as exc:
        raise InputError(f"a postgresql:// index needs the PostgreSQL drivers ({exc.name} is missing): "
                         f"pip install 'amsrag[postgres]'") from exc
    return PostgresIndex


def open_index(spec: str | Path) -> Store:
    """The index at `spec`: an EmbeddedIndex for a directory, a PostgresIndex for a postgresql:// URL."""
    if is_postgres_url(spec):
        return _postgres().open(str(spec))
    return EmbeddedIndex.open(Path(spec))


def open_index_unchecked(spec: str | Path) -> Store:
    """The index at `spec` even when derived indexes are missing or damaged: for `check` and `repair`."""
    if is_postgres_url(spec):
        return _postgres().open(str(spec))
    return EmbeddedIndex.open(Path(spec), check=False)


def remove_empty_index(spec: str | Path) -> bool:
    """Delete an embedded index directory that holds no passages and no staged vectors (what a build
    refused for bad input leaves); True when it was removed. PostgreSQL indexes are left alone."""
    if is_postgres_url(spec):
        return False
    path = Path(spec)
    try:
        with EmbeddedIndex.open(path, check=False) as index:
            if len(index) or index.table.embedding_counts()[1]:
                return False
    except AmsragError:
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def create_index(spec: str | Path, config: AmsragConfig | None = None) -> Store:
    """A new empty index at `spec` (a new directory, or a database without an amsrag index)."""
    if is_postgres_url(spec):
        return _postgres().create(str(spec), config)
    return EmbeddedIndex.create(Path(spec), config)


def export_index(source: EmbeddedIndex, url: str, progress: Progress | None = None) -> IngestReport:
    """Copy an embedded index into a new PostgreSQL index in one transaction: passages, their stored
    vectors and their stored NER results (nothing is re-embedded, spaCy does not run again); then,
    in a second one, its query library."""
    if not is_postgres_url(url):
        raise InputError(f"--to must be a postgresql:// URL, got {url!r}")
    progress = progress or NullProgress()
    rows = source.stored_rows()
    passages, vectors = [], []
    with progress.task("export: read passages", len(rows)) as adv:
        for start in range(0, len(rows), 2000):
            chunk = rows[start : start + 2000]
            passages.extend(source.passages_by_rows(chunk))
            vectors.append(source.vectors_for_rows(chunk))
            adv(len(chunk))
    graph = source.entity_graph
    recorded = source.manifest["components"]["graph"]["params"]
    expected = expected_params(source.config)["graph"]
    # the target records this installation's Chinese entity settings: NER from other ones does not come along
    zh_stale = any(recorded.get(k) != expected.get(k) for k in ZH_PARAMS)
    ner = {p.id: graph.ner[r][1] for r, p in zip(rows, passages, strict=True)
           if r in graph.ner and not (zh_stale and is_mostly_han(p.text))}
    import numpy as np

    target = _postgres().create(url, source.config)
    try:
        report = target.add(passages, progress=progress,
                            vectors=np.concatenate(vectors) if vectors else np.zeros((0, 384), np.float32), ner=ner)
        library = source.query_library()
        if len(library):
            target.save_query_library(library)
        return report
    finally:
        target.close()
