"""What the entity graph is assembled from, kept so that an update touches only what changed.

A full build matches every title against every passage. `GraphParts` keeps the edges by their
source — a passage's own title, its named entities, the titles found in its text — with entities
under stable internal ids, plus how many passages carry each surface form. An update then runs
NER and title matching on the new passages only, and matches the old passages again only where
the set of titles changed: passages that contain a newly introduced title (found through the
BM25 postings of its words, then confirmed by the matcher) and passages that mentioned a title
that is gone. The assembled graph equals a full build of the same passages.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from amsrag.indexes.entities import SurfaceMatcher, collapsed_key, entity_key, key_is_matchable, title_surfaces
from amsrag.types import PassageRow, normalise_whitespace

NerCache = dict[int, tuple[int, tuple[str, ...]]]  # row -> (crc32 of the text, NER surfaces)
KINDS = ("title", "ner", "match")
PARTS_FILE = "graph_parts.npz"


class PassageSource(Protocol):
    """The passages an update may need to read again, and a prefilter for title matching."""

    def rows(self, numbers: Sequence[int]) -> list[PassageRow]: ...

    def containing(self, surface: str) -> np.ndarray | None:
        """Rows whose text may contain `surface` as whole words (a superset); None when unknown."""
        ...


@dataclass
class GraphParts:
    titles: dict[int, str]
    ids: dict[int, str]
    key_table: list[str]  # internal entity id -> key (append-only)
    edges: dict[str, tuple[np.ndarray, np.ndarray]]  # kind -> (rows, internal ids), unique pairs
    title_count: dict[str, int] = field(default_factory=dict)  # title surface with a key -> passages
    ner_count: dict[str, int] = field(default_factory=dict)  # matchable NER surface -> passages
    _key_index: dict[str, int] = field(default_factory=dict)
    _keys: dict[str, str] = field(default_factory=dict)  # surface -> key
    _matchable: dict[str, bool] = field(default_factory=dict)  # surface -> may be searched for in text

    @classmethod
    def empty(cls) -> GraphParts:
        empty = np.zeros(0, np.int64)
        return cls({}, {}, [], {k: (empty, empty) for k in KINDS})

    def copy(self) -> GraphParts:
        return GraphParts(dict(self.titles), dict(self.ids), list(self.key_table), dict(self.edges),
                          dict(self.title_count), dict(self.ner_count), dict(self._key_index), dict(self._keys),
                          dict(self._matchable))

    # ---- surfaces -------------------------------------------------------------------------
    def key_of(self, surface: str) -> str:
        key = self._keys.get(surface)
        if key is None:
            # surfaces are whitespace-collapsed already: skip that step of entity_key where it can
            key = self._keys[surface] = collapsed_key(surface) if surface.isascii() else entity_key(surface)
        return key

    def matchable(self, surface: str, min_chars: int) -> bool:
        ok = self._matchable.get(surface)
        if ok is None:  # min_chars is structural: fixed for the life of an index
            ok = self._matchable[surface] = key_is_matchable(surface, self.key_of(surface), min_chars)
        return ok

    def kid(self, surface: str) -> int:
        key = self.key_of(surface)
        i = self._key_index.get(key)
        if i is None:
            i = self._key_index[key] = len(self.key_table)
            self.key_table.append(key)
        return i

    def title_group(self, title: str) -> list[str]:
        return sorted({s for s in title_surfaces(title) if self.key_of(s)})

    def ner_group(self, surfaces: Iterable[str], min_chars: int) -> list[str]:
        return sorted({s for s in surfaces if self.matchable(s, min_chars)})

    def patterns(self, min_chars: int) -> set[str]:
        """Title surfaces searched for in text."""
        return {s for s in self.title_count if self.matchable(s, min_chars)}

    # ---- updates ----------------------------------------------------------------------------
    def remove(self, rows: Sequence[int], ner: NerCache, min_chars: int) -> None:
        """Forget passages `rows` (their counts and edges); `ner` still holds their NER results."""
        gone = np.asarray(sorted(int(r) for r in rows if int(r) in self.ids), dtype=np.int64)
        if not len(gone):
            return
        for r in gone.tolist():
            for s in self.title_group(self.titles.pop(r)):
                _decrement(self.title_count, s)
            for s in self.ner_group(ner[r][1] if r in ner else (), min_chars):
                _decrement(self.ner_count, s)
            del self.ids[r]
        self.drop_edges(gone, KINDS)

    def drop_edges(self, rows: np.ndarray, kinds: Iterable[str]) -> None:
        for kind in kinds:
            er, ek = self.edges[kind]
            keep = ~np.isin(er, rows)
            self.edges[kind] = (er[keep], ek[keep])

    def add(self, rows: Sequence[PassageRow], ner: NerCache, min_chars: int) -> None:
        """Count passages `rows` and add their title and NER edges (title matching is separate)."""
        new: dict[str, tuple[list[int], list[int]]] = {"title": ([], []), "ner": ([], [])}
        for r in rows:
            self.titles[r.row], self.ids[r.row] = r.title, r.id
            for s in self.title_group(r.title):
                self.title_count[s] = self.title_count.get(s, 0) + 1
                new["title"][0].append(r.row)
                new["title"][1].append(self.kid(s))
            for s in self.ner_group(ner[r.row][1], min_chars):
                self.ner_count[s] = self.ner_count.get(s, 0) + 1
                new["ner"][0].append(r.row)
                new["ner"][1].append(self.kid(s))
        for kind, (er, ek) in new.items():
            self.append_edges(kind, np.asarray(er, dtype=np.int64), np.asarray(ek, dtype=np.int64))

    def append_edges(self, kind: str, rows: np.ndarray, kids: np.ndarray) -> None:
        """Add edges of passages that have none of this kind yet (new, or just dropped by `drop_edges`),
        so only the new pairs need deduplicating; the lists are unordered."""
        old_rows, old_kids = self.edges[kind]
        width = max(len(self.key_table), 1)
        code = np.unique(rows * width + kids)
        self.edges[kind] = (np.concatenate([old_rows, code // width]), np.concatenate([old_kids, code % width]))

    def match(self, rows: Sequence[PassageRow], min_chars: int) -> None:
        """Replace the title-mention edges of `rows` with a fresh match of every current title."""
        numbers = np.asarray([r.row for r in rows], dtype=np.int64)
        self.drop_edges(numbers, ("match",))
        if not rows:
            return
        surfaces = sorted(self.patterns(min_chars))
        matcher = SurfaceMatcher(surfaces, [self.kid(s) for s in surfaces])
        which, found = matcher.find_in_texts([normalise_whitespace(r.text) for r in rows])
        self.append_edges("match", numbers[which], found)

    def rows_to_rematch(self, before: set[str], min_chars: int, source: PassageSource,
                        all_rows: Callable[[], Iterable[PassageRow]], skip: set[int]) -> list[PassageRow]:
        """Kept passages whose title mentions may have changed with the set of titles: those that
        may contain a new title, and those that mentioned a title no passage carries any more."""
        after = self.patterns(min_chars)
        introduced, vanished = after - before, before - after
        wanted: set[int] = set()
        if vanished:
            gone_kids = np.asarray(sorted({self._key_index[self.key_of(s)] for s in vanished}), dtype=np.int64)
            er, ek = self.edges["match"]
            wanted.update(er[np.isin(ek, gone_kids)].tolist())
        scan = False
        for s in introduced:
            found = source.containing(s)
            if found is None:
                scan = True
                break
            wanted.update(found.tolist())
        if scan:
            return [r for r in all_rows() if r.row in self.ids and r.row not in skip]
        keep = sorted(r for r in wanted if r in self.ids and r not in skip)
        return source.rows(keep) if keep else []

    # ---- storage ------------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        rows = np.asarray(sorted(self.titles), dtype=np.int64)
        arrays = {f"{k}_rows": self.edges[k][0] for k in KINDS} | {f"{k}_kids": self.edges[k][1] for k in KINDS}
        packed = {"titles": [self.titles[r] for r in rows.tolist()], "key_table": self.key_table,
                  "title_surfaces": list(self.title_count), "ner_surfaces": list(self.ner_count)}
        for name, strings in packed.items():
            arrays[f"{name}_data"], arrays[f"{name}_offsets"] = _pack(strings)
        arrays["rows"] = rows
        arrays["title_counts"] = np.asarray(list(self.title_count.values()), np.int64)
        arrays["ner_counts"] = np.asarray(list(self.ner_count.values()), np.int64)
        np.savez(directory / PARTS_FILE, allow_pickle=False, **arrays)

    @classmethod
    def load(cls, directory: Path, ids: list[str]) -> GraphParts | None:
        path = directory / PARTS_FILE
        if not path.is_file():
            return None  # written before parts were kept: the first update rebuilds them
        with np.load(path, allow_pickle=False) as z:
            rows = z["rows"].tolist()
            strings = {n: _unpack(z[f"{n}_data"], z[f"{n}_offsets"])
                       for n in ("titles", "key_table", "title_surfaces", "ner_surfaces")}
            edges = {k: (z[f"{k}_rows"], z[f"{k}_kids"]) for k in KINDS}
            title_count = dict(zip(strings["title_surfaces"], z["title_counts"].tolist(), strict=True))
            ner_count = dict(zip(strings["ner_surfaces"], z["ner_counts"].tolist(), strict=True))
        key_table = strings["key_table"]
        return cls(dict(zip(rows, strings["titles"], strict=True)), {r: ids[r] for r in rows}, key_table, edges,
                   title_count, ner_count, {k: i for i, k in enumerate(key_table)})


def _pack(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and their offsets (numpy unicode arrays pad every string)."""
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _unpack(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    raw = data.tobytes()
    bounds = offsets.tolist()
    return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]


def _decrement(counts: dict[str, int], surface: str) -> None:
    n = counts.get(surface, 0) - 1
    if n > 0:
        counts[surface] = n
    else:
        counts.pop(surface, None)
