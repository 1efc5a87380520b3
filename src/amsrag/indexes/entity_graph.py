"""The entity graph a store keeps over its passages, and personalized PageRank from a query's seeds
(the retriever that seeds and walks it is `amsrag.retrieve.graph.GraphRetriever`).

The graph is bipartite: passages on one side, entities (normalised titles, their aliases and
named entities) on the other. An edge's kind is 2 when the entity is the passage's own title and 1
when the passage mentions it. A query is answered by a *local* personalized PageRank: the walk
restarts at the seed passages (top BM25/dense hits) and the entities the query mentions, and runs
on the seeds' neighbourhood only (seeds -> their entities -> those entities' passages), so its cost
does not grow with the corpus. It reaches the second passage of a bridge question: the question
names X, passage X mentions Y, and the walk goes X -> entity Y -> passage "Y".
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from amsrag.config import GraphConfig
from amsrag.errors import IndexCorruptError, IndexMismatchError, InputError
from amsrag.indexes.entities import (
    CJK_MATCHING_VERSION,
    SurfaceMatcher,
    extract_ner,
    query_ner_keys,
    spacy_info,
)
from amsrag.indexes.entities_zh import zh_ner_info
from amsrag.indexes.graph_parts import GraphParts, NerCache, PassageSource
from amsrag.indexes.pagerank import (
    MENTION,
    TITLE,
    entity_idf,
    entity_major,
    extract_subgraph,
    passage_scores,
    seed_weights,
    top_passages,
)
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.types import PassageRow, normalise_whitespace

FORMAT_VERSION = 1
# Config fields that shape the stored graph; the others act at query time only.
STRUCTURAL_FIELDS = ("ner", "ner_labels", "min_mention_chars", "ner_zh")
# The manifest keys of the Chinese entity settings. Graphs built before they were recorded lack them, and only
# passages with Han or kana text depend on them, so a difference does not refuse an index: `index check` reports
# it when the index holds such passages and `index repair --component graph` rebuilds (`store.writes.zh_graph_problem`).
ZH_PARAMS = ("ner_zh", "zh_ner", "jieba_version", "cjk_matching")
_FILES = {"meta": "graph.json", "edges": "graph_edges.npz", "ner": "graph_ner.npz"}

Progress = Callable[[int], None] | None


def text_checksum(text: str) -> int:
    """The checksum stored with a passage's NER results: they are reused while the text is unchanged."""
    return zlib.crc32(text.encode("utf-8"))


def _sorted_rows(rows: Iterable[PassageRow]) -> list[PassageRow]:
    ordered = sorted(rows, key=lambda r: r.row)
    for a, b in itertools.pairwise(ordered):
        if a.row == b.row:
            raise InputError(f"passage row {a.row} given twice to the entity graph")
    if ordered and ordered[0].row < 0:
        raise InputError(f"passage rows must be >= 0, got {ordered[0].row}")
    return ordered


def ner_workers(config: GraphConfig, n_texts: int) -> int:
    """spaCy worker processes for NER over `n_texts` passages: `ner_processes` (at most the CPUs) for a bulk
    job of `ner_bulk_min_texts` or more, else 1."""
    if n_texts < config.ner_bulk_min_texts:
        return 1
    return max(1, min(config.ner_processes, os.cpu_count() or 1))


def _run_ner(rows: Sequence[PassageRow], config: GraphConfig, progress: Progress) -> NerCache:
    if not rows:
        return {}
    if config.ner:
        found = extract_ner(
            [r.text for r in rows], config.ner_labels, batch_size=config.ner_batch_size, progress=progress,
            n_process=ner_workers(config, len(rows)), chinese=config.ner_zh,
        )
    else:
        found = [()] * len(rows)
        if progress is not None:
            progress(len(rows))
    return {r.row: (text_checksum(r.text), surfaces) for r, surfaces in zip(rows, found, strict=True)}


def _edge_matrix(rows: np.ndarray, ents: np.ndarray, kinds: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """Passage x entity CSR whose value is the strongest kind of edge between the two."""
    width = max(shape[1], 1)
    code = rows * width + ents
    order = np.lexsort((kinds, code))
    code, kinds = code[order], kinds[order]
    last = np.ones(len(code), dtype=bool)
    last[:-1] = code[1:] != code[:-1]  # the strongest kind sorts last within a (row, entity) pair
    code, kinds = code[last], kinds[last]
    matrix = sp.csr_array((kinds, (code // width, code % width)), shape=shape, dtype=np.int8)
    matrix.sort_indices()
    return matrix


def _ner_cache(
    table: list[str], rows: np.ndarray, crc: np.ndarray, indptr: np.ndarray, surfaces: np.ndarray
) -> NerCache:
    """The per-row NER results from their saved CSR layout over a table of surface forms."""
    ptr, idx = indptr.tolist(), surfaces.tolist()
    return {
        row: (check, tuple(table[j] for j in idx[ptr[i] : ptr[i + 1]]))
        for i, (row, check) in enumerate(zip(rows.tolist(), crc.tolist(), strict=True))
    }


QUERY_CACHE = 64  # recent queries whose entities are kept


class EntityGraph:
    """Passage-entity bipartite graph with a local personalized PageRank ranking."""

    def __init__(
        self,
        config: GraphConfig,
        ids: list[str],
        keys: list[str],
        matrix: sp.csr_array,
        query_surfaces: list[str],
        query_entities: np.ndarray,
        ner: NerCache,
        parts: GraphParts | None = None,
        parts_dir: Path | None = None,
    ) -> None:
        self.config = config
        self._ner = ner
        self._parts = parts
        self._parts_dir = parts_dir  # where the parts of a loaded graph are read from, on its first update
        self._ids = ids
        self._keys = keys
        self._matrix = matrix
        self._by_entity = entity_major(matrix)
        self._degree = np.diff(self._by_entity.indptr).astype(np.int64)
        self._idf = entity_idf(self._degree, self.n_passages)
        self._query_surfaces = query_surfaces
        self._query_entities = np.asarray(query_entities, dtype=np.int64)
        self._matcher: SurfaceMatcher | None = None
        self._key_index: dict[str, int] | None = None
        self._recent: OrderedDict[str, list[int]] = OrderedDict()  # query -> its entities (the graph, the second
        # hop and the learned fuser's features each ask for the same query's)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def build(cls, rows: Iterable[PassageRow], config: GraphConfig, progress: Progress = None,
              reuse: NerCache | None = None) -> EntityGraph:
        """A graph over `rows`; NER (when enabled) runs on every passage but those `reuse` holds a result
        for (with their text's checksum), `progress` gets a step per passage."""
        ordered = _sorted_rows(rows)
        reuse = reuse or {}
        kept = {r.row: reuse[r.row] for r in ordered if r.row in reuse and reuse[r.row][0] == text_checksum(r.text)}
        ner = {**kept, **_run_ner([r for r in ordered if r.row not in kept], config, progress)}
        if kept and progress is not None:
            progress(len(kept))
        return cls._from_scratch(ordered, {r.row: ner[r.row] for r in ordered}, config)

    def update(
        self,
        added: Sequence[PassageRow],
        removed_rows: Sequence[int],
        all_rows: Callable[[], Iterable[PassageRow]],
        progress: Progress = None,
        source: PassageSource | None = None,
    ) -> EntityGraph:
        """The graph of the passage set after removing `removed_rows` and adding `added`, equal to
        `build` on it; NER runs on `added` only.

        With a `source`, only the new passages and the old ones whose title mentions can have
        changed are matched (see `graph_parts`). Without one (or for a graph saved before parts were
        kept), every passage of `all_rows()` is matched again, reusing the stored NER of unchanged
        passages."""
        stored = self._load_parts() if source is not None else None
        parts = stored.copy() if stored is not None else None
        cache = dict(self._ner)
        if parts is None:
            for row in removed_rows:
                cache.pop(int(row), None)
            cache.update(_run_ner(_sorted_rows(added), self.config, progress))
            ordered = _sorted_rows(all_rows())
            stale = [r for r in ordered if r.row not in cache or cache[r.row][0] != text_checksum(r.text)]
            cache.update(_run_ner(stale, self.config, progress))
            return self._from_scratch(ordered, {r.row: cache[r.row] for r in ordered}, self.config)
        assert source is not None
        new = _sorted_rows(added)
        min_chars = self.config.min_mention_chars
        before = parts.patterns(min_chars)
        removed = [int(r) for r in removed_rows]
        parts.remove(removed, cache, min_chars)
        for row in removed:
            cache.pop(row, None)
        if any(r.row in parts.ids for r in new):
            raise InputError("a passage row added to the entity graph is already in it")
        cache.update(_run_ner(new, self.config, progress))
        parts.add(new, cache, min_chars)
        again = parts.rows_to_rematch(before, min_chars, source, all_rows, {r.row for r in new})
        parts.match([*new, *again], min_chars)
        return self._assemble(parts, cache, self.config)

    def _load_parts(self) -> GraphParts | None:
        if self._parts is None and self._parts_dir is not None:
            try:
                self._parts = GraphParts.load(self._parts_dir, self._ids)
            except OSError:
                self._parts = None  # the folder went with a newer generation: match everything once
            self._parts_dir = None
        return self._parts

    @classmethod
    def _from_scratch(cls, rows: list[PassageRow], ner: NerCache, config: GraphConfig) -> EntityGraph:
        parts = GraphParts.empty()
        parts.add(rows, ner, config.min_mention_chars)
        parts.match(rows, config.min_mention_chars)
        return cls._assemble(parts, ner, config)

    @classmethod
    def _assemble(cls, parts: GraphParts, ner: NerCache, config: GraphConfig) -> EntityGraph:
        """The graph's matrices from its parts: entities are renumbered in key order."""
        title_rows, title_kids = parts.edges["title"]
        ner_rows, ner_kids = parts.edges["ner"]
        match_rows, match_kids = parts.edges["match"]
        present = np.flatnonzero(np.bincount(np.concatenate([title_kids, ner_kids]),
                                             minlength=len(parts.key_table)))
        ordered = sorted(present.tolist(), key=parts.key_table.__getitem__)
        keys = [parts.key_table[k] for k in ordered]
        remap = np.full(len(parts.key_table), -1, dtype=np.int64)
        remap[np.asarray(ordered, dtype=np.int64)] = np.arange(len(ordered), dtype=np.int64)
        n_rows = max(parts.ids) + 1 if parts.ids else 0
        ids = [""] * n_rows
        for r, pid in parts.ids.items():
            ids[r] = pid
        edge_rows = np.concatenate([title_rows, ner_rows, match_rows])
        edge_ents = remap[np.concatenate([title_kids, ner_kids, match_kids])]
        kinds = np.concatenate([np.full(len(title_rows), TITLE, np.int8),
                                np.full(len(ner_rows) + len(match_rows), MENTION, np.int8)])
        matrix = _edge_matrix(edge_rows, edge_ents, kinds, (n_rows, len(keys)))
        min_chars = config.min_mention_chars
        surfaces = sorted(parts.patterns(min_chars) | set(parts.ner_count))
        entities = remap[np.asarray([parts.kid(s) for s in surfaces], dtype=np.int64)]
        return cls(config, ids, keys, matrix, surfaces, entities, ner, parts)

    def with_config(self, config: GraphConfig) -> EntityGraph:
        """The same graph ranking with `config`'s query-time settings (structural ones stay)."""
        clone = copy.copy(self)
        clone.config = config.model_copy(update={f: getattr(self.config, f) for f in STRUCTURAL_FIELDS})
        clone._recent = OrderedDict()
        return clone

    # ---- facts --------------------------------------------------------------------------
    @property
    def n_passages(self) -> int:
        return len(self._ner)

    @property
    def n_entities(self) -> int:
        return len(self._keys)

    @property
    def n_edges(self) -> int:
        return int(self._matrix.nnz)

    @property
    def entity_keys(self) -> list[str]:
        return list(self._keys)

    @property
    def matrix(self) -> sp.csr_array:
        """Passage rows x entities; values are edge kinds (2 = own title, 1 = mention)."""
        return self._matrix

    @property
    def ner(self) -> Mapping[int, tuple[int, tuple[str, ...]]]:
        """Per passage row: (`text_checksum` of its text, the NER surfaces found in it)."""
        return self._ner

    @property
    def query_surfaces(self) -> list[str]:
        """The surface forms a query is matched against (sorted), aligned with `query_surface_entities`."""
        return self._query_surfaces

    @property
    def query_surface_entities(self) -> np.ndarray:
        """The entity id each of `query_surfaces` names."""
        return self._query_entities

    def entities_of(self, row: int) -> list[tuple[str, int]]:
        """(entity key, edge kind) of one passage row."""
        if not 0 <= row < self._matrix.shape[0]:
            return []
        lo, hi = self._matrix.indptr[row], self._matrix.indptr[row + 1]
        pairs = zip(self._matrix.indices[lo:hi].tolist(), self._matrix.data[lo:hi].tolist(), strict=True)
        return [(self._keys[e], k) for e, k in pairs]

    def entity_overlap(self, rows: Sequence[int], entities: Sequence[int]) -> np.ndarray:
        """Per passage row, how many of `entities` it mentions (0 for a row outside the graph)."""
        want = np.asarray(sorted(set(entities)), dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.float64)
        if not len(want):
            return out
        r = np.asarray(rows, dtype=np.int64)
        inside = (r >= 0) & (r < self._matrix.shape[0])
        indptr, indices = self._matrix.indptr, self._matrix.indices
        starts = indptr[r[inside]].astype(np.int64)
        lengths = indptr[r[inside] + 1].astype(np.int64) - starts
        if not lengths.sum():
            return out
        segment = np.repeat(np.arange(len(starts)), lengths)  # which row each gathered entry belongs to
        offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        mentioned = np.isin(indices[starts[segment] + offsets], want)
        out[inside] = np.bincount(segment, weights=mentioned, minlength=len(starts))
        return out

    def bridge_entities(self, rows: Sequence[int], exclude: Iterable[int], limit: int) -> list[tuple[int, int]]:
        """(entity id, passage row) of entities the passages `rows` mention that could lead elsewhere.

        A bridge is an entity a passage mentions but is not titled by, not in `exclude` (the
        query's own entities) and not a hub; taken passage by passage in the given order, rarer
        entities first, each entity once.
        """
        skip = set(int(e) for e in exclude)
        out: list[tuple[int, int]] = []
        m = self._matrix
        for row in rows:
            if not 0 <= row < m.shape[0]:
                continue
            lo, hi = m.indptr[row], m.indptr[row + 1]
            ents = [int(e) for e, kind in zip(m.indices[lo:hi], m.data[lo:hi], strict=True)
                    if kind == MENTION and int(e) not in skip and self._degree[e] <= self.config.max_entity_degree]
            for e in sorted(ents, key=lambda e: (-self._idf[e], self._keys[e])):
                skip.add(e)
                out.append((e, int(row)))
                if len(out) >= limit:
                    return out
        return out

    def entity_key_of(self, entity: int) -> str:
        return self._keys[entity]

    def title_rows(self, entity: int) -> list[int]:
        """Passage rows whose own title is `entity` (the article about it)."""
        b = self._by_entity
        lo, hi = b.indptr[entity], b.indptr[entity + 1]
        return sorted(int(r) for r, kind in zip(b.indices[lo:hi], b.data[lo:hi], strict=True) if kind == TITLE)

    @classmethod
    def expected_params(cls, config: GraphConfig) -> dict[str, Any]:
        """What a graph built with `config` by this installation records in the index manifest: the
        format version, the structural settings and the NER model. A change in any of them needs a
        rebuild; the other settings act at query time only (see `with_config`)."""
        structural = config.model_dump(mode="json", include=set(STRUCTURAL_FIELDS))
        chinese = zh_ner_info() if config.ner and config.ner_zh else {}
        return {"format_version": FORMAT_VERSION, **structural, **spacy_info(), **chinese,
                "cjk_matching": CJK_MATCHING_VERSION}

    def params(self) -> dict[str, Any]:
        """What the index manifest records about this graph (equal to `expected_params` of its config)."""
        return self.expected_params(self.config)

    # ---- persistence --------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write the graph into an existing (empty) directory: JSON and .npz, no pickle."""
        directory = Path(directory)
        if not directory.is_dir():
            raise InputError(f"graph directory does not exist: {directory}")
        ner_rows = np.array(sorted(self._ner), dtype=np.int64)
        ner_table = sorted({s for _, surfaces in self._ner.values() for s in surfaces})
        position = {s: i for i, s in enumerate(ner_table)}
        lists = [self._ner[int(r)][1] for r in ner_rows]
        meta = {
            **self.params(),
            "config": self.config.model_dump(mode="json"),
            "counts": {"passages": self.n_passages, "entities": self.n_entities, "edges": self.n_edges},
            "ids": self._ids,
            "entity_keys": self._keys,
            "query_surfaces": self._query_surfaces,
            "ner_surfaces": ner_table,
        }
        (directory / _FILES["meta"]).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        m = self._matrix
        np.savez(
            directory / _FILES["edges"],
            indptr=m.indptr.astype(np.int64),
            indices=m.indices.astype(np.int64),
            kinds=m.data.astype(np.int8),
            shape=np.array(m.shape, dtype=np.int64),
            query_entities=self._query_entities,
        )
        parts = self._load_parts()
        if parts is not None:
            parts.save(directory)
        np.savez(
            directory / _FILES["ner"],
            rows=ner_rows,
            crc=np.array([self._ner[int(r)][0] for r in ner_rows], dtype=np.uint32),
            indptr=np.cumsum([0] + [len(x) for x in lists], dtype=np.int64),
            surfaces=np.array([position[s] for x in lists for s in x], dtype=np.int64),
        )

    @classmethod
    def load(cls, directory: Path) -> EntityGraph:
        """The graph `save` wrote into `directory`."""
        directory = Path(directory)
        missing = [name for name in _FILES.values() if not (directory / name).is_file()]
        if missing:
            raise IndexCorruptError(f"entity graph in {directory} lacks {', '.join(missing)}: rebuild the index")
        try:
            meta = json.loads((directory / _FILES["meta"]).read_text(encoding="utf-8"))
            version = meta.get("format_version")
            if version != FORMAT_VERSION:
                raise IndexMismatchError(f"entity graph format {version} != {FORMAT_VERSION}: rebuild the index")
            with np.load(directory / _FILES["edges"], allow_pickle=False) as edges:
                shape = (int(edges["shape"][0]), int(edges["shape"][1]))
                matrix = sp.csr_array((edges["kinds"], edges["indices"], edges["indptr"]), shape=shape)
                query_entities = edges["query_entities"]
            with np.load(directory / _FILES["ner"], allow_pickle=False) as ner:
                cache = _ner_cache(meta["ner_surfaces"], ner["rows"], ner["crc"], ner["indptr"], ner["surfaces"])
            # settings a newer version added are ignored: its graph is still this graph
            known = {k: v for k, v in meta["config"].items() if k in GraphConfig.model_fields}
            config = GraphConfig.model_validate(known)
            return cls(config, meta["ids"], meta["entity_keys"], matrix, meta["query_surfaces"], query_entities, cache,
                       parts_dir=directory)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise IndexCorruptError(f"entity graph in {directory} is unreadable ({exc}): rebuild the index") from exc

    # ---- querying -----------------------------------------------------------------------
    def query_entities(self, query: str) -> list[int]:
        """Entity ids the query mentions: known surface forms, plus spaCy NER when `query_ner`."""
        cached = self._recent.get(query)
        if cached is not None:
            return list(cached)
        found = self._find_query_entities(query)
        self._recent[query] = found
        while len(self._recent) > QUERY_CACHE:
            self._recent.popitem(last=False)
        return list(found)

    def _find_query_entities(self, query: str) -> list[int]:
        if self._matcher is None:
            self._matcher = SurfaceMatcher(self._query_surfaces, self._query_entities.tolist())
        found = {e for _, _, e in self._matcher.find(normalise_whitespace(query))}
        if self.config.query_ner and self.config.ner and self._keys:
            if self._key_index is None:
                self._key_index = {k: i for i, k in enumerate(self._keys)}
            cfg = self.config
            for key in query_ner_keys(query, cfg.ner_labels, cfg.min_mention_chars, cfg.ner_zh):
                e = self._key_index.get(key)
                if e is not None:
                    found.add(e)
        return sorted(found)

    def rank(self, query: str, seed_rows: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float, str]]:
        """Top-k (row, score, passage id) by local personalized PageRank from the query's seeds.

        Seeds are the given passage rows (weighted) and the entities the query mentions. Returns []
        when there is no usable seed. Ties are broken by passage id.
        """
        query, k = check_query(query), check_k(k)
        sub = extract_subgraph(self._matrix, self._by_entity, self._degree, self.query_entities(query),
                               seed_weights(seed_rows, self._ner), self.config)
        if sub is None:
            return []
        return top_passages(sub.passages, passage_scores(sub, self._idf, self.config), k, self._ids)
