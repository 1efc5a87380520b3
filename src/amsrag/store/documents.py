"""Documents as the unit of change: what a document replacement is, what the store reports about the
documents it holds, and the backend-independent planning of a replacement (which stored passages stay,
which go, which are new)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from amsrag.errors import InputError
from amsrag.types import Passage


@dataclass(frozen=True, slots=True)
class Document:
    """A document's complete new content: its passages (in order) and a fingerprint of its source
    (the file's sha256 for files; `fingerprint_passages` otherwise) that tells a later sync whether the
    source changed."""

    doc_id: str
    passages: tuple[Passage, ...]
    content_hash: str = ""
    source: str = ""

    @classmethod
    def of(cls, doc_id: str, passages: Iterable[Passage], content_hash: str = "", source: str = "") -> Document:
        ps = tuple(passages)
        return cls(doc_id, ps, content_hash or fingerprint_passages(ps), source)


@dataclass(frozen=True, slots=True)
class DocumentMeta:
    """What a document's row says about it beyond its passages, and what `tag` and `modified` filters read:
    its title where known, its file's last modification (UTC `YYYY-MM-DDTHH:MM:SSZ`) and size in bytes, and
    its tags (sorted, each once). Rewritten alone when only these change (a retag, a touched file)."""

    title: str | None = None
    modified: str | None = None
    size: int | None = None
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", tuple(sorted(set(self.tags))))


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A stored document: its passage count, the fingerprint recorded when it was last written in
    full ("" when unknown: added passage by passage, or partly deleted since), and its row's metadata."""

    doc_id: str
    passages: int
    content_hash: str
    source: str = ""
    title: str | None = None
    modified: str | None = None
    size: int | None = None
    tags: tuple[str, ...] = ()

    @property
    def meta(self) -> DocumentMeta:
        return DocumentMeta(self.title, self.modified, self.size, self.tags)


@dataclass
class PutReport:
    """What replacing documents did."""

    documents: int = 0
    created: int = 0  # documents that were not stored before
    unchanged: int = 0  # documents whose passages were all stored already, identical
    added: int = 0  # passages inserted
    removed: int = 0  # passages deleted
    kept: int = 0  # passages left as they were (same id, same content)
    reused_vectors: int = 0  # inserted passages whose vector was already stored (not re-embedded)
    embedded: int = 0  # inserted passages embedded now
    skipped_duplicate_content: int = 0  # content stored under another document
    deleted_documents: int = 0  # documents deleted as a whole (`delete`)
    seconds: dict[str, float] = field(default_factory=dict)


def fingerprint_passages(passages: Sequence[Passage]) -> str:
    """A document fingerprint from its passages (ids and content), for documents that are not files."""
    h = hashlib.sha256()
    for p in passages:
        h.update(p.id.encode("utf-8"))
        h.update(b"\x1e")
        h.update(p.content_hash.encode("ascii"))
        h.update(b"\x1f")
    return h.hexdigest()


def check_documents(docs: Sequence[Document]) -> list[Document]:
    """The documents with every passage's doc_id set to its document's; InputError for an empty or
    repeated doc_id, a non-Document, or a passage id given twice across the documents."""
    seen: set[str] = set()
    ids: dict[str, str] = {}
    out = []
    for n, d in enumerate(docs):
        if not isinstance(d, Document):
            raise InputError(f"item {n} is not a Document")
        if not d.doc_id or not d.doc_id.strip():
            raise InputError(f"document {n} has an empty doc_id")
        if d.doc_id in seen:
            raise InputError(f"document {d.doc_id!r} is given twice; nothing was changed")
        seen.add(d.doc_id)
        if not d.passages:
            raise InputError(f"document {d.doc_id!r} has no passages (delete it instead); nothing was changed")
        fixed = []
        for p in d.passages:
            if p.id in ids:
                raise InputError(f"passage id {p.id!r} is given in documents {ids[p.id]!r} and {d.doc_id!r}; "
                                 f"nothing was changed")
            ids[p.id] = d.doc_id
            fixed.append(p if p.doc_id == d.doc_id else Passage(p.id, p.text, p.title, d.doc_id, p.metadata))
        out.append(Document(d.doc_id, tuple(fixed), d.content_hash, d.source))
    return out


class StoredDocuments(Protocol):
    """What `plan_put` asks a backend (inside the write transaction `conn`)."""

    def document_rows(self, conn: Any, doc_ids: Sequence[str]) -> list[tuple[int, str, str, str]]:
        """(row, passage id, doc_id, content hash) of every stored passage of the given documents."""
        ...

    def existing(self, conn: Any, ids: Sequence[str], hashes: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
        """(id -> content hash of the given ids stored, content hash -> id of the given hashes stored)."""
        ...


@dataclass
class PutPlan:
    removed_rows: list[int]  # stored rows to delete
    removed_hashes: set[str]  # their content hashes
    insert: list[tuple[Passage, str]]  # (passage, content hash) to insert
    kept: int
    skipped_duplicate_content: int
    created: int
    unchanged: list[str]  # doc ids whose passages are all stored, identical


def plan_put(table: StoredDocuments, conn: Any, docs: Sequence[Document], delete: Sequence[str] = ()) -> PutPlan:
    """Rows to delete and passages to insert so each document holds exactly its new passages and the
    documents in `delete` are gone; a passage with the same id and content as a stored one of the
    same document stays where it is. An unknown document in `delete` is an InputError."""
    doc_ids = [d.doc_id for d in docs]
    both = sorted(set(delete) & set(doc_ids))
    if both:
        raise InputError(f"document(s) {', '.join(map(repr, both[:5]))} given both to replace and to delete; "
                         f"nothing was changed")
    stored = table.document_rows(conn, [*doc_ids, *delete])
    by_doc: dict[str, dict[str, tuple[int, str]]] = {d: {} for d in [*doc_ids, *delete]}
    for row, pid, doc_id, h in stored:
        by_doc[doc_id][pid] = (row, h)
    unknown = [d for d in delete if not by_doc[d]]
    if unknown:
        shown = ", ".join(map(repr, unknown[:10])) + (" ..." if len(unknown) > 10 else "")
        raise InputError(f"{len(unknown)} document(s) to delete are not in the index: {shown}; nothing was changed")
    new_items = [(p, p.content_hash) for d in docs for p in d.passages]
    by_id, by_hash = table.existing(conn, [p.id for p, _ in new_items], [h for _, h in new_items])
    own_rows = {pid for rows in by_doc.values() for pid in rows}
    own_hashes = {h for rows in by_doc.values() for _, h in rows.values()}
    foreign = [p.id for p, _ in new_items if p.id in by_id and p.id not in own_rows]
    if foreign:
        shown = ", ".join(repr(i) for i in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise InputError(f"passage id(s) {shown} already belong to another document of the index; passage ids "
                         f"must be unique across documents; nothing was changed")
    removed_rows: list[int] = []
    removed_hashes: set[str] = set()
    insert: list[tuple[Passage, str]] = []
    dup = created = 0
    unchanged: list[str] = []
    keeps: dict[str, set[str]] = {}
    for d in docs:
        old = by_doc[d.doc_id]
        keeps[d.doc_id] = {p.id for p in d.passages if p.id in old and old[p.id][1] == p.content_hash}
    kept = sum(len(k) for k in keeps.values())
    batch_hashes = {by_doc[doc][pid][1] for doc, k in keeps.items() for pid in k}
    for doc_id in delete:
        for row, h in by_doc[doc_id].values():
            removed_rows.append(row)
            removed_hashes.add(h)
    for d in docs:
        old, keep = by_doc[d.doc_id], keeps[d.doc_id]
        if not old:
            created += 1
        for pid, (row, h) in old.items():
            if pid not in keep:
                removed_rows.append(row)
                removed_hashes.add(h)
        changed = False
        for p in d.passages:
            if p.id in keep:
                continue
            changed = True
            h = p.content_hash
            # content stored under another document (not one being replaced here), or given twice
            if (h in by_hash and h not in own_hashes) or h in batch_hashes:
                dup += 1
                continue
            batch_hashes.add(h)
            insert.append((p, h))
        if old and not changed and len(keep) == len(old):
            unchanged.append(d.doc_id)
    return PutPlan(sorted(removed_rows), removed_hashes, insert, kept, dup, created, unchanged)
