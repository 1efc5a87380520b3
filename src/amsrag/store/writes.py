"""What both store backends share about writing: passage validation, insert planning (skipping
identical re-adds and duplicate content), the reports of an add or delete, and the parameters each
derived index must have been built with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import DIMENSION, model_id_for
from amsrag.errors import InputError
from amsrag.indexes.bm25 import BM25Index
from amsrag.indexes.entity_graph import ZH_PARAMS, EntityGraph
from amsrag.text.language import detect_language
from amsrag.types import Passage, is_blank


@dataclass
class IngestReport:
    received: int = 0
    added: int = 0
    skipped_existing: int = 0  # same id and same content already stored
    skipped_duplicate_content: int = 0  # same content stored (or earlier in the input) under another id
    embedded: int = 0  # added passages embedded by this call (the rest had a given, staged or stored vector)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class DeleteReport:
    deleted: int = 0  # passages
    documents: int = 0  # whole documents deleted (delete_documents)
    seconds: dict[str, float] = field(default_factory=dict)


class StoredLookup(Protocol):
    """What `plan_insert` asks a backend's passage table (inside the write transaction `conn`)."""

    def existing(self, conn: Any, ids: Sequence[str], hashes: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
        """(id -> content hash of the given ids stored, content hash -> id of the given hashes stored)."""
        ...


def expected_params(config: AmsragConfig) -> dict[str, dict[str, Any]]:
    """What each derived index must have been built with to be usable by this installation."""
    return {
        "bm25": BM25Index.params(config.bm25),
        "dense": {"model_id": model_id_for(config.embedding), "dim": DIMENSION,
                  **config.dense.model_dump(mode="json")},
        "graph": EntityGraph.expected_params(config.graph),
    }


def with_legacy_tokenizer(config: AmsragConfig, stored_bm25: dict[str, Any]) -> AmsragConfig:
    """`config` as an index built before BM25 tokenised Chinese must be read: its manifest's BM25 parameters
    have no `cjk` (`BM25Index.params` leaves it out for "none"), and its Han runs were single tokens."""
    if stored_bm25 and "cjk" not in stored_bm25 and config.bm25.cjk != "none":
        return config.model_copy(update={"bm25": config.bm25.model_copy(update={"cjk": "none"})})
    return config


def param_differences(stored: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(expected))
    return [f"{k}: index has {stored.get(k)!r}, this installation uses {expected.get(k)!r}"
            for k in keys if stored.get(k) != expected.get(k)]


def refusing_differences(name: str, stored: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """The `param_differences` that make a derived index unusable: all but the graph's Chinese entity
    settings (`zh_graph_problem`)."""
    if name != "graph":
        return param_differences(stored, expected)
    return param_differences({k: v for k, v in stored.items() if k not in ZH_PARAMS},
                             {k: v for k, v in expected.items() if k not in ZH_PARAMS})


def zh_graph_problem(stored: dict[str, Any], expected: dict[str, Any],
                     spaceless_passages: Callable[[], int]) -> str | None:
    """What `index check` says of a graph recorded with other Chinese entity settings (`ZH_PARAMS`) than this
    installation uses, when some passages hold Han or kana text (`spaceless_passages()` counts them; the others'
    entities are the same either way); None when there is nothing to say."""
    diffs = param_differences({k: stored[k] for k in ZH_PARAMS if k in stored},
                              {k: expected[k] for k in ZH_PARAMS if k in expected})
    if not diffs:
        return None
    n = spaceless_passages()
    if not n:
        return None
    what = ("was built before amsrag recorded its Chinese entity settings" if not any(k in stored for k in ZH_PARAMS)
            else f"was built with other Chinese entity settings ({'; '.join(diffs)})")
    return (f"graph: {what}; the entities of its {n} passage(s) with Chinese or Japanese text may "
            f"differ from this installation's: rebuild it with `amsrag index repair --component graph`")


def stored_metadata(p: Passage) -> dict[str, Any]:
    """The metadata a backend stores for `p`: its own, plus `lang`, the detected language of its title and
    text (kept when the caller set one)."""
    if "lang" in p.metadata:
        return p.metadata
    return {**p.metadata, "lang": detect_language(f"{p.title}\n{p.text}" if p.title else p.text).code}


def with_language(p: Passage) -> Passage:
    """`p` with `stored_metadata` (its detected language), so a backend need not detect it again."""
    return p if "lang" in p.metadata else replace(p, metadata=stored_metadata(p))


def ids_to_delete(ids: Sequence[str], what: str) -> list[str]:
    """`ids` once each, in order; an InputError when there are none (`what`: "passage" or "document")."""
    unique = list(dict.fromkeys(ids))
    if not unique:
        raise InputError(f"no {what} ids given to delete")
    return unique


def validate_passages(passages: list[Passage]) -> list[tuple[Passage, str]]:
    """(passage, content hash) of each input passage; an InputError for a non-Passage, an empty id or
    text, or an id given twice."""
    seen: dict[str, int] = {}
    out = []
    for n, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise InputError(f"item {n} is not a Passage")
        if not p.id or not p.id.strip():
            raise InputError(f"passage {n} has an empty id")
        if not p.text or is_blank(p.text):
            raise InputError(f"passage {p.id!r} has empty text (nothing but whitespace and control characters)")
        if p.id in seen:
            raise InputError(f"duplicate passage id {p.id!r} in the input (items {seen[p.id]} and {n}); "
                             f"ids must be unique; nothing was added")
        seen[p.id] = n
        out.append((p, p.content_hash))
    return out


def plan_insert(table: StoredLookup, conn: Any, items: list[tuple[Passage, str]]) -> tuple[list[int], int, int]:
    """Indices of items to insert, and counts of those skipped as already stored / duplicate content."""
    by_id, by_hash = table.existing(conn, [p.id for p, _ in items], [h for _, h in items])
    new: list[int] = []
    same, dup = 0, 0
    batch_hashes: set[str] = set()
    for i, (p, h) in enumerate(items):
        if p.id in by_id:
            if by_id[p.id] != h:
                raise InputError(f"passage id {p.id!r} is already in the index with different content; replace "
                                 f"its document (`index add --replace`, `index sync`, PUT /v1/documents/DOC_ID) "
                                 f"or delete it first; nothing was added")
            same += 1
        elif h in by_hash or h in batch_hashes:
            dup += 1
        else:
            batch_hashes.add(h)
            new.append(i)
    return new, same, dup
