"""The PostgreSQL entity graph held in each reader process, as the BM25 index is (bm25_blobs.py).

The tables `graph_ner`, `entities`, `mentions` and `entity_surfaces` are read into the arrays the
embedded graph ranks on, once per `graph_generation` (meta, bumped by every rewrite of the graph in
the same transaction). A ranking then runs in memory and needs one statement: the top passages' ids
and titles together with the stored generation, which says whether the copy was current. Shipping
the seeds' neighbourhood (~500 rows) and building a subgraph per query cost ~16 ms at 25k passages
(docs/benchmarks/postgres.md); the arrays take ~30 bytes per mention edge.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
import scipy.sparse as sp

from amsrag.errors import IndexCorruptError
from amsrag.indexes.entities import SurfaceMatcher
from amsrag.indexes.pagerank import entity_idf, entity_major
from amsrag.types import normalise_whitespace

GENERATION_KEY = "graph_generation"
KEEP = 2  # states kept: a reader alternating between a primary and a replica one write behind
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


@dataclass(frozen=True)
class GraphState:
    """The whole graph at `generation`: passage rows x entities (edge kinds), as the embedded graph."""

    generation: int
    matrix: sp.csr_array
    by_entity: sp.csr_array
    degree: np.ndarray  # mentions per entity (both kinds), as the embedded graph counts them
    idf: np.ndarray
    in_graph: np.ndarray  # bool per passage row: the row has a stored NER result (is in the graph)
    keys: list[str]
    matcher: SurfaceMatcher
    key_index: dict[str, int]

    @property
    def n_passages(self) -> int:
        return int(self.in_graph.sum())

    def __contains__(self, row: object) -> bool:
        """Whether a passage row is in the graph (`seed_weights` asks this of its seeds)."""
        return isinstance(row, int | np.integer) and 0 <= int(row) < len(self.in_graph) and bool(self.in_graph[row])

    def query_entities(self, query: str, ner_keys: Sequence[str]) -> list[int]:
        """The entities the query's surface forms name, plus those of its NER keys (sorted ids)."""
        found = {int(e) for _, _, e in self.matcher.find(normalise_whitespace(query))}
        found |= {self.key_index[k] for k in ner_keys if k in self.key_index}
        return sorted(found)


def generation(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (GENERATION_KEY,)).fetchone()
    return int(row[0]) if row else 0


def bump_generation(conn: psycopg.Connection) -> None:
    """Count one more rewrite of the graph (in the writer's transaction)."""
    conn.execute("INSERT INTO meta (key, value) VALUES (%s, '1') ON CONFLICT (key) "
                 "DO UPDATE SET value = to_jsonb((meta.value::text)::bigint + 1)", (GENERATION_KEY,))


def copy_columns(conn: psycopg.Connection, query: str, columns: Sequence[tuple[str, str]]) -> np.ndarray:
    """The rows of `query` as a numpy record array, read by one binary COPY and parsed without a Python
    object per row. `columns`: (name, big-endian numpy type) of fixed-width, NOT NULL columns in order."""
    fields: list[tuple[str, str]] = [("_n", ">i2")]
    for name, kind in columns:
        fields += [(f"_len_{name}", ">i4"), (name, kind)]
    dtype = np.dtype(fields)
    with conn.cursor().copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)") as copy:
        data = b"".join(bytes(block) for block in copy)
    if not data.startswith(_COPY_SIGNATURE):
        raise IndexCorruptError("PostgreSQL sent a binary COPY without its signature")
    start = len(_COPY_SIGNATURE) + 8 + int.from_bytes(data[len(_COPY_SIGNATURE) + 4:len(_COPY_SIGNATURE) + 8], "big")
    body = len(data) - start - 2  # the trailer: a field count of -1
    if body < 0 or body % dtype.itemsize:
        raise IndexCorruptError(f"binary COPY of {query!r} is not made of {dtype.itemsize}-byte rows")
    rows = np.frombuffer(data, dtype=dtype, count=body // dtype.itemsize, offset=start)
    widths = {name: np.dtype(kind).itemsize for name, kind in columns}
    if len(rows) and ((rows["_n"] != len(columns)).any()
                      or any((rows[f"_len_{n}"] != w).any() for n, w in widths.items())):
        raise IndexCorruptError(f"binary COPY of {query!r} holds a NULL or a value of another width")
    return rows


def load(conn: psycopg.Connection) -> GraphState:
    """The stored graph as `conn` sees it; run it in one REPEATABLE READ transaction (one snapshot)."""
    gen = generation(conn)
    live = copy_columns(conn, "SELECT prow FROM graph_ner", [("prow", ">i8")])["prow"].astype(np.int64)
    edges = copy_columns(conn, "SELECT prow, eid, kind FROM mentions",
                         [("prow", ">i8"), ("eid", ">i4"), ("kind", ">i2")])
    keys = [str(k) for (k,) in conn.execute("SELECT key FROM entities ORDER BY eid").fetchall()]
    surfaces = conn.execute("SELECT surface, eid FROM entity_surfaces ORDER BY surface").fetchall()
    rows = edges["prow"].astype(np.int64)
    ents = edges["eid"].astype(np.int64)
    n_rows = int(max(live.max(initial=-1), rows.max(initial=-1))) + 1
    if len(ents) and (ents.min() < 0 or ents.max() >= len(keys)):
        raise IndexCorruptError("the graph's mentions name an entity the entities table does not hold "
                                "(run `amsrag index check`)")
    matrix = sp.csr_array((edges["kind"].astype(np.int8), (rows, ents)), shape=(n_rows, len(keys)), dtype=np.int8)
    matrix.sort_indices()
    by_entity = entity_major(matrix)
    degree = np.diff(by_entity.indptr).astype(np.int64)
    in_graph = np.zeros(n_rows, dtype=bool)
    in_graph[live] = True
    return GraphState(gen, matrix, by_entity, degree, entity_idf(degree, int(in_graph.sum())), in_graph, keys,
                      SurfaceMatcher([str(s) for s, _ in surfaces], [int(e) for _, e in surfaces]),
                      {k: i for i, k in enumerate(keys)})


class GraphCache:
    """The in-process graph states of one index, by generation; thread-safe."""

    def __init__(self) -> None:
        self._states: OrderedDict[int, GraphState] = OrderedDict()
        self._lock = threading.Lock()

    def latest(self) -> GraphState | None:
        """The state read last (no lookup): a ranking's first guess, checked by the statement after it."""
        return next(reversed(self._states.values()), None)

    def at(self, conn: psycopg.Connection, gen: int | None = None) -> GraphState:
        """The state at `gen` (None: the stored one), read when no copy of it is kept."""
        if gen is not None and gen in self._states:
            return self._states[gen]
        with self._lock:
            if gen is not None and gen in self._states:
                return self._states[gen]
            with conn.transaction():  # the generation and the tables from one snapshot
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                state = load(conn)
            self._states[state.generation] = state
            self._states.move_to_end(state.generation)
            while len(self._states) > KEEP:
                self._states.popitem(last=False)
        return state
