"""What a passage index backend provides, by capability. `PassageIndex` is the read side a query needs
(passages, rows and vectors by id, the encoder, the configuration); writing (`PassageWriter`), health
(`IndexHealth`), scanning every passage (`PassageScan`), tables (`TableStorage`), themes (`ThemeStorage`) and
the query library (`LibraryStorage`) are Protocols of their own. Both backends (`amsrag.store.embedded.EmbeddedIndex`,
`amsrag.store.postgres.store.PostgresIndex`) implement all of them; `QueryIndex` is what the engine reads and
`Store` is every capability at once (what `amsrag.store.open.open_index` returns)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import Encoder
from amsrag.progress import Progress
from amsrag.types import Passage

if TYPE_CHECKING:
    from amsrag.filters import Where
    from amsrag.indexes.allowed_rows import AllowedRows
    from amsrag.indexes.themes import Themes
    from amsrag.store.documents import Document, DocumentInfo, DocumentMeta, PutReport
    from amsrag.store.health import CheckReport, RepairReport
    from amsrag.store.query_library import QueryLibrary
    from amsrag.store.writes import DeleteReport, IngestReport
    from amsrag.tables.base import TableSource
    from amsrag.tables.catalog import TableDeleteReport, TableWriteReport
    from amsrag.tables.table import Table


@runtime_checkable
class PassageIndex(Protocol):
    """The read side of a passage index: what a query needs. Changes are all-or-nothing (`PassageWriter`)."""

    backend: str  # "embedded" or "postgres"
    config: AmsragConfig  # what the index was built with (query-time settings may be updated)
    # What the layers above build over the current passages and settings, by name (the retrievers of
    # `amsrag.retrievers`); the index empties it whenever its passages or settings change.
    built: dict[str, object]

    @property
    def location(self) -> str:
        """Where the index is, for messages: its directory or its URL without the password."""
        ...

    @property
    def encoder(self) -> Encoder:
        """The passage/query embedding model of the index (loaded on first use)."""
        ...

    def __len__(self) -> int: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def close(self) -> None: ...

    def get(self, pid: str) -> Passage | None: ...

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """Internal rows of the given passage ids (unknown ids are left out)."""
        ...

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        """(passage id, title) per row, in the given order."""
        ...

    def passages_by_rows(self, rows: Sequence[int]) -> list[Passage]: ...

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray: ...

    def allowed_rows(self, where: Where) -> AllowedRows:
        """The store rows of the passages `where` allows (`amsrag.filters`); an `InputError` on a store that
        cannot filter."""
        ...


@runtime_checkable
class PassageScan(Protocol):
    """Every stored passage, for builders and exports (a query never scans)."""

    def stored_rows(self) -> list[int]:
        """The internal rows of every stored passage, ascending."""
        ...

    def iter_passages(self) -> Iterator[Passage]:
        """Every passage, in row order."""
        ...


@runtime_checkable
class PassageWriter(Protocol):
    """Writing passages and documents, each change in one transaction, and the query-time settings."""

    def add(self, passages: Iterable[Passage], progress: Progress | None = None,
            vectors: np.ndarray | None = None, doc_hashes: Mapping[str, tuple[str, str]] | None = None
            ) -> IngestReport:
        """Add passages in one transaction; identical re-adds and duplicate content are skipped; vectors
        staged or stored for the same content are reused. `doc_hashes` ({doc_id: (fingerprint, source)})
        records the documents this add completes."""
        ...

    def put_documents(self, documents: Sequence[Document], progress: Progress | None = None,
                      delete: Sequence[str] = ()) -> PutReport:
        """Make each document hold exactly its given passages and delete the documents in `delete`, in
        one transaction (new documents are added, changed ones replaced; unchanged passages and stored
        vectors are kept)."""
        ...

    def delete_documents(self, doc_ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete whole documents in one transaction; an unknown doc_id is an error, nothing is deleted."""
        ...

    def delete(self, ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete passages by id in one transaction; unknown ids are an error and nothing is deleted."""
        ...

    def documents(self, prefix: str | None = None) -> dict[str, DocumentInfo]:
        """Stored documents by doc_id (those whose doc_id or source starts with `prefix` when given)."""
        ...

    def put_document_meta(self, metas: Mapping[str, DocumentMeta]) -> int:
        """Rewrite the rows of the stored documents among `metas` with their title, modification time, size
        and tags, their passages untouched (documents not stored are passed over); how many were written."""
        ...

    def unembedded(self, hashes: Sequence[str]) -> list[str]:
        """The content hashes among `hashes` that have no stored or staged vector."""
        ...

    def count_staged(self, hashes: Sequence[str]) -> int:
        """How many of `hashes` have a staged vector but no stored passage (an interrupted ingest's work)."""
        ...

    def stage_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Commit vectors for content not stored yet, durably and outside any passage change: a killed
        ingest resumes from them."""
        ...

    def update_config(self, config: AmsragConfig) -> None:
        """Replace query-time settings; settings the stored indexes depend on need a rebuild."""
        ...


@runtime_checkable
class IndexHealth(Protocol):
    """Verifying and repairing the derived indexes, following other processes' writes, statistics."""

    def check(self, progress: Progress | None = None) -> CheckReport:
        """Verify the stored data and every derived index; reads only."""
        ...

    def repair(self, components: Sequence[str] | None = None, progress: Progress | None = None) -> RepairReport:
        """Rebuild damaged (or the named) derived indexes from the stored passages and vectors."""
        ...

    def stale(self) -> bool:
        """True when another process published a write this object has not loaded yet."""
        ...

    def refresh(self) -> bool:
        """Load a write another process published; True when there was one to load."""
        ...

    def stats(self) -> dict[str, Any]: ...


@runtime_checkable
class TableStorage(Protocol):
    """The tables of the structured route, stored with the passages."""

    def tables(self) -> TableSource | None:
        """The index's tables (the structured route's source), or None while it holds none."""
        ...

    def put_tables(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        """Store tables in one transaction (all or nothing); a table id stored with other content is an
        InputError unless `replace`."""
        ...

    def delete_tables(self, table_ids: Sequence[str]) -> TableDeleteReport: ...


@runtime_checkable
class ThemeStorage(Protocol):
    """The corpus themes of the global route."""

    def themes(self) -> Themes | None:
        """The corpus themes of the global route, as last saved by any process (None: not built)."""
        ...

    def save_themes(self, themes: Themes) -> None: ...


@runtime_checkable
class LibraryStorage(Protocol):
    """The labelled queries stored with the index (the classifier's query library)."""

    def query_library(self) -> QueryLibrary:
        """The labelled queries stored with the index (empty when none are), as last saved by any
        process. Shared and cached: treat it as read-only and `copy()` it to change it."""
        ...

    def save_query_library(self, library: QueryLibrary) -> None:
        """Replace the stored query library with `library` (vectors of the index's dimension), all or
        nothing: a failure or a crash mid-save keeps the previous one. Passages are not touched."""
        ...


@runtime_checkable
class QueryIndex(PassageIndex, TableStorage, ThemeStorage, LibraryStorage, Protocol):
    """What the engine reads: the passages and the tables, themes and query library a query may use."""


@runtime_checkable
class Store(QueryIndex, PassageScan, PassageWriter, IndexHealth, Protocol):
    """Every capability: a backend as `open_index` returns it, for the CLI, the service and the jobs."""
