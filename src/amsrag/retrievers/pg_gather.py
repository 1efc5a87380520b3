"""The allowed rows' vectors of a metadata filter, read once from PostgreSQL and kept in the process (issue 38).

A filter's dense search then costs a float32 matrix-vector product and one statement naming the best rows with
the stored generation, instead of a scan of the allowed rows in the server: measured 0.3-0.5x the unfiltered
HNSW search at 20-51 % of 25k passages, where the server's best plans were 1.4-3.1x (docs/benchmarks/
filters-postgres.md). A gather is keyed by the identity of the allowed-row array (a store resolves a filter into
one array per generation, `PgCore.allowed_rows`) and of the retriever that made it (one per index), both held
weakly, and carries the generation it was read at: a
query that finds another generation stored drops it. At most `budget` bytes are kept in all, the least recently
used dropped first; a gather larger than `largest` is not made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg

from amsrag.kept_pairs import KeptByPair

GATHER_KEPT_BYTES = 256 << 20  # gathered vectors kept per process, in all
GATHER_KEPT_MAX = 64 << 20  # the largest gather made (~43k vectors of 384 dimensions)

# The generation and the allowed rows' vectors, read in one snapshot (the caller's transaction).
GENERATION_SQL = "SELECT coalesce((SELECT (value::text)::bigint FROM meta WHERE key = 'generation'), 0)"
# pgvector's binary form (int16 dimensions, int16 unused, big-endian float4s) as bytea: parsed in one numpy call,
# 0.65x the time of pgvector's loader making an array per row (96 against 148 ms for 12.7k vectors)
VECTORS_SQL = "SELECT prow, vector_send(embedding) FROM passages WHERE prow = ANY(%s::text::bigint[]) ORDER BY prow"
HEADER_BYTES = 4


@dataclass(frozen=True, slots=True)
class Gather:
    """Vectors of passage rows as stored at `generation`: `vectors[i]` is row `rows[i]`'s (rows ascending)."""

    generation: int
    rows: np.ndarray
    vectors: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.rows.nbytes)


def read_gather(conn: psycopg.Connection, rows_literal: str, dim: int) -> Gather:
    """The vectors of the rows in `rows_literal` (a bigint[] literal) and the generation, from one snapshot."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        row = conn.execute(GENERATION_SQL).fetchone()
        got = conn.execute(VECTORS_SQL, (rows_literal,), binary=True).fetchall()
    if row is None:
        raise AssertionError("a scalar query returned no row")
    found = np.fromiter((r for r, _ in got), dtype=np.int64, count=len(got))
    packed = np.frombuffer(b"".join(v for _, v in got), dtype=np.uint8).reshape(len(got), HEADER_BYTES + 4 * dim)
    vectors = np.ascontiguousarray(packed[:, HEADER_BYTES:]).view(">f4").astype(np.float32)
    vectors.flags.writeable = False  # shared by every query under the filter
    return Gather(int(row[0]), found, vectors)


class KeptGathers(KeptByPair[Gather]):
    """Gathers by (owner retriever, allowed-row array) (`amsrag.kept_pairs`)."""

    def size(self, value: Gather) -> int:
        return value.nbytes

    def fits(self, n_rows: int, dim: int) -> bool:
        """Whether a gather of `n_rows` vectors would be kept."""
        return n_rows * (dim * 4 + 8) <= min(self.largest, self.budget)


KEPT = KeptGathers(GATHER_KEPT_BYTES, GATHER_KEPT_MAX)
