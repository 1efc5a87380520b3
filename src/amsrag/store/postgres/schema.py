"""The PostgreSQL schema of an amsrag index, as numbered migrations recorded in `schema_version`.

Everything lives in the `amsrag` schema of the database (one index per database); pgvector's type
comes from wherever the `vector` extension is installed (normally `public`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amsrag.errors import IndexMismatchError

SCHEMA = "amsrag"
SEARCH_PATH = f"{SCHEMA}, public"
# Serialises writers (ingest, delete, migrations) across processes: pg_advisory_xact_lock key.
WRITE_LOCK_KEY = 0x616D7372  # "amsr"

_V1 = """
CREATE TABLE meta (key text PRIMARY KEY, value jsonb NOT NULL);

CREATE TABLE passages (
    prow bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- never reused: derived tables key by it
    id text NOT NULL UNIQUE,
    doc_id text NOT NULL,
    title text NOT NULL,
    text text NOT NULL,
    metadata jsonb NOT NULL,
    content_hash text NOT NULL UNIQUE,
    doc_len integer NOT NULL,  -- BM25 tokens of title + text
    embedding vector({dim}) NOT NULL
);
CREATE INDEX passages_doc_id ON passages (doc_id);
CREATE INDEX passages_embedding_hnsw ON passages USING hnsw (embedding vector_cosine_ops)
    WITH (m = {m}, ef_construction = {ef_construction});

-- BM25: document frequencies and postings (tf, and the document length for the length norm)
CREATE TABLE bm25_terms (
    tid integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    term text NOT NULL UNIQUE,
    df integer NOT NULL CHECK (df > 0)
);
CREATE TABLE bm25_postings (
    tid integer NOT NULL,
    prow bigint NOT NULL REFERENCES passages (prow) ON DELETE CASCADE,
    tf integer NOT NULL,
    dl integer NOT NULL,
    PRIMARY KEY (tid, prow) INCLUDE (tf, dl)  -- a term's postings in an index-only scan
);
CREATE INDEX bm25_postings_prow ON bm25_postings (prow);

-- Entity graph: per-passage NER (kept so NER never reruns on stored text), entities, mentions
CREATE TABLE graph_ner (
    prow bigint PRIMARY KEY REFERENCES passages (prow) ON DELETE CASCADE,
    crc bigint NOT NULL,
    surfaces text[] NOT NULL
);
CREATE TABLE entities (eid integer PRIMARY KEY, key text NOT NULL UNIQUE, degree integer NOT NULL);
CREATE TABLE mentions (
    prow bigint NOT NULL,
    eid integer NOT NULL,
    kind smallint NOT NULL,  -- 2 = the passage's own title, 1 = a mention
    PRIMARY KEY (prow, eid)
);
CREATE INDEX mentions_eid ON mentions (eid, prow);
CREATE TABLE entity_surfaces (surface text PRIMARY KEY, eid integer NOT NULL);
"""

# The query library: labelled queries with their embeddings, replaced as a whole by each save (one
# transaction) and read in `pos` order; `query_library_generation` in meta counts the saves, so a
# reader can tell its cached copy is current with one lookup.
_V2 = """
CREATE TABLE query_library (
    key text PRIMARY KEY,  -- the normalised question (amsrag.ingest.datasets.normalise_question)
    pos integer NOT NULL,  -- the query's place in the library
    question text NOT NULL,
    hop text NOT NULL CHECK (hop IN ('one_hop', 'multi_hop')),
    source text NOT NULL,
    vector vector({dim}) NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now()  -- when the query got its current label
);
INSERT INTO meta (key, value) VALUES ('query_library_generation', '0');
"""

# Documents as the unit of change: the source fingerprint of each document last written in full
# (`put_documents`, or an add that completed the document), forgotten when the document is changed
# passage by passage; and vectors staged for content not stored yet (an ingest commits them batch by
# batch before the passages, so a killed ingest resumes without re-embedding). Stored passages keep
# their vector in passages.embedding; a staged vector is deleted once its content is stored.
_V3 = """
CREATE TABLE documents (
    doc_id text PRIMARY KEY,
    content_hash text NOT NULL,  -- the fingerprint of the document's source
    source text NOT NULL,  -- the source key it came from ("" when not a file)
    updated timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE staged_vectors (
    content_hash text PRIMARY KEY,
    vector vector({dim}) NOT NULL,
    staged_at timestamptz NOT NULL DEFAULT now()
);
"""


# Exact Lucene BM25 top-k with impact-ordered candidate generation (a threshold algorithm), one call
# per query. Pass 1 reads the highest-impact postings of every query term (depth 2k + 20) and scores
# the 4k best candidates (by partial score) exactly: the k-th of those scores, theta, is a lower bound
# of the true k-th score. Pass 2 gives every term a cut, the cuts summing to half of theta (shared out
# from the terms of lowest bound: a frequent term whose best posting is under its share reads nothing),
# and reads every posting whose bound exceeds its term's cut: a passage read nowhere scores at most the
# sum of the cuts < theta, so it cannot be in the top k. A candidate's partial score plus the cuts of
# the terms it was not read in bounds its score; those that cannot reach the k-th score are dropped,
# the others scored exactly (terms read in full from the postings read, the others looked up by
# (tid, prow)). Ties at the k-th score are all kept and ordered by id, as the exhaustive query does.
# `p_exhaustive` (or impacts made with other k1, b) reads every posting; `p_depth` sets pass 1's depth.
BM25_FUNCTION = """
CREATE OR REPLACE FUNCTION bm25_top(p_terms text[], p_qtf integer[], p_k1 float8, p_b float8, p_k integer,
                                    p_exhaustive boolean DEFAULT false, p_depth integer DEFAULT NULL)
RETURNS TABLE (prow bigint, score float8, id text, title text)
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT SET plan_cache_mode = force_custom_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_n float8; v_avgdl float8; v_ref float8; v_k1 float8; v_b float8; v_g float8;
    v_tids integer[]; v_ws float8[]; v_cut float8[]; v_top float8[]; v_theta float8;
    v_left float8; v_share float8; v_ub float8; v_m integer; v_i integer;
BEGIN
    SELECT greatest((value->>'n_docs')::float8, 1),
           greatest((value->>'total_len')::float8, 1) / greatest((value->>'n_docs')::float8, 1)
      INTO v_n, v_avgdl FROM meta WHERE key = 'bm25_stats';
    SELECT (value->>'ref')::float8, (value->>'k1')::float8, (value->>'b')::float8
      INTO v_ref, v_k1, v_b FROM meta WHERE key = 'bm25_impact';
    SELECT array_agg(t.tid ORDER BY t.df, t.tid),
           array_agg(x.qtf * ln(1 + (v_n - t.df + 0.5) / (t.df + 0.5)) ORDER BY t.df, t.tid)
      INTO v_tids, v_ws
      FROM unnest(p_terms, p_qtf) AS x(term, qtf) JOIN bm25_terms t ON t.term = x.term;
    IF v_tids IS NULL THEN
        RETURN;
    END IF;
    -- a stored impact times g bounds the tf part at today's average length (the factor absorbs float4)
    v_g := greatest(1, v_avgdl / v_ref) * (1 + 1e-6);
    v_cut := array_fill(0::float8, ARRAY[cardinality(v_tids)]);  -- cut 0: every posting of the term
    v_theta := -1;
    IF NOT (p_exhaustive OR v_ref IS NULL OR v_k1 IS DISTINCT FROM p_k1 OR v_b IS DISTINCT FROM p_b) THEN
        -- pass 1, a lower bound of the k-th score: the exact scores of the best candidates (by partial
        -- score) among each term's highest-impact postings; and each term's highest impact
        WITH qt AS MATERIALIZED (
            SELECT i::integer AS i, tid, w FROM unnest(v_tids, v_ws) WITH ORDINALITY AS u(tid, w, i)),
        head AS MATERIALIZED (
            SELECT qt.i, h.prow, h.imp, qt.w * h.tf / (h.tf + p_k1 * (1 - p_b + p_b * h.dl / v_avgdl)) AS c
            FROM qt CROSS JOIN LATERAL (
                SELECT po.prow, po.tf, po.dl, po.imp FROM bm25_postings po WHERE po.tid = qt.tid
                ORDER BY po.imp DESC LIMIT greatest(coalesce(p_depth, 2 * p_k + 20), 1)) h),
        cand AS (SELECT h.prow FROM head h GROUP BY h.prow ORDER BY sum(h.c) DESC, h.prow LIMIT 4 * p_k),
        exact AS (
            SELECT l.prow, sum(x.c) AS s FROM cand l CROSS JOIN LATERAL (
                SELECT qt.w * po.tf / (po.tf + p_k1 * (1 - p_b + p_b * po.dl / v_avgdl)) AS c
                FROM qt JOIN bm25_postings po ON po.tid = qt.tid AND po.prow = l.prow OFFSET 0) x
            GROUP BY l.prow)
        SELECT coalesce((SELECT s FROM exact ORDER BY s DESC OFFSET p_k - 1 LIMIT 1), -1),
               (SELECT array_agg(m ORDER BY i) FROM (SELECT qt.i, coalesce(max(h.imp), 0)::float8 AS m
                                                     FROM qt LEFT JOIN head h ON h.i = qt.i GROUP BY qt.i) t)
          INTO v_theta, v_top;
        -- pass 2's cuts: what a posting below its term's cut can add sums to at most half that bound,
        -- shared out from the terms of lowest bound (a term whose best posting is under its share reads
        -- nothing); so a passage never read scores below the k-th, and a candidate must gather at least
        -- half the bound from the postings read to need scoring
        IF v_theta > 0 THEN
            v_left := v_theta * 0.5;
            v_m := cardinality(v_tids);
            FOR v_i IN SELECT o FROM generate_subscripts(v_tids, 1) AS o ORDER BY v_ws[o] * v_top[o], o LOOP
                v_ub := v_ws[v_i] * v_g * v_top[v_i];
                v_share := greatest(least(v_ub, v_left / v_m), 0);
                v_left := v_left - v_share;
                v_m := v_m - 1;
                v_cut[v_i] := v_share / (v_ws[v_i] * v_g);
            END LOOP;
        END IF;
    END IF;
    -- pass 2: every posting above its term's cut; candidates that can still reach the k-th score
    -- (partial score + the cuts of the terms they were not read in) are scored exactly: the terms read
    -- in full from the postings read, the others looked up by (tid, prow)
    RETURN QUERY
    WITH qt AS MATERIALIZED (
        SELECT i::integer AS i, tid, w, cut, w * v_g * cut AS r
        FROM unnest(v_tids, v_ws, v_cut) WITH ORDINALITY AS u(tid, w, cut, i)),
    head AS MATERIALIZED (
        SELECT qt.i, h.prow, qt.w * h.tf / (h.tf + p_k1 * (1 - p_b + p_b * h.dl / v_avgdl)) AS c, qt.r
        FROM qt CROSS JOIN LATERAL (
            SELECT po.prow, po.tf, po.dl FROM bm25_postings po WHERE po.tid = qt.tid AND po.imp > qt.cut) h),
    cand AS (SELECT h.prow, sum(h.c) AS part, sum(h.r) AS seen_r FROM head h GROUP BY h.prow),
    thr AS (SELECT greatest(v_theta, coalesce((SELECT part FROM cand ORDER BY part DESC OFFSET p_k - 1 LIMIT 1), -1))
                   AS t, (SELECT sum(r) FROM qt) AS b),
    live AS MATERIALIZED (
        SELECT c.prow FROM cand c, thr WHERE c.part + (thr.b - c.seen_r) >= thr.t - 1e-9 * (1 + abs(thr.t))),
    exact AS MATERIALIZED (
        SELECT x.prow, sum(x.c ORDER BY x.i) AS s FROM (
            SELECT h.prow, h.i, h.c FROM head h WHERE h.r = 0 AND h.prow IN (SELECT prow FROM live)
            UNION ALL
            SELECT l.prow, y.i, y.c FROM live l CROSS JOIN LATERAL (
                SELECT qt.i, qt.w * po.tf / (po.tf + p_k1 * (1 - p_b + p_b * po.dl / v_avgdl)) AS c
                FROM qt JOIN bm25_postings po ON po.tid = qt.tid AND po.prow = l.prow
                WHERE qt.r > 0 OFFSET 0) y) x
        GROUP BY x.prow),
    kth AS (SELECT s FROM exact ORDER BY s DESC OFFSET p_k - 1 LIMIT 1)
    SELECT e.prow, e.s, p.id, p.title FROM exact e CROSS JOIN LATERAL (
        SELECT p.id, p.title FROM passages p WHERE p.prow = e.prow OFFSET 0) p
    WHERE e.s >= coalesce((SELECT s FROM kth), -1) AND e.s > 0
    ORDER BY e.s DESC, p.id LIMIT p_k;
END
$fn$;
"""

# BM25 with pruning: every posting gets its impact, the Lucene tf part tf / (tf + k1 * (1 - b + b * dl /
# ref)) at a fixed reference average length `ref` (meta bm25_impact: ref, k1, b), with an index that
# reads a term's postings in impact order. The true tf part at the current average length avgdl is at
# most impact * max(1, avgdl / ref), so a bound from the stored impacts stays valid however the
# collection changes; `bm25_top` reads only the heads of long posting lists (see retrievers.py).
# Existing postings get their impact here, at the index's current average length and its k1, b.
_V4 = """
ALTER TABLE bm25_postings ADD COLUMN imp real;
INSERT INTO meta (key, value) SELECT 'bm25_impact', jsonb_build_object(
    'ref', CASE WHEN (s.value->>'n_docs')::float8 > 0 AND (s.value->>'total_len')::float8 > 0
                THEN (s.value->>'total_len')::float8 / (s.value->>'n_docs')::float8 END,
    'k1', {k1}::float8, 'b', {b}::float8)
FROM (SELECT (SELECT value FROM meta WHERE key = 'bm25_stats') AS value) s;
UPDATE bm25_postings SET imp = tf / (tf + {k1}::float8 * (1 - {b}::float8 + {b}::float8 * dl / (
    SELECT (value->>'ref')::float8 FROM meta WHERE key = 'bm25_impact')));
ALTER TABLE bm25_postings ALTER COLUMN imp SET NOT NULL;
CREATE INDEX bm25_postings_impact ON bm25_postings (tid, imp DESC) INCLUDE (prow, tf, dl);
"""

# BM25 scored in-process: the embedded store's segmented index (amsrag.indexes.bm25.BM25Index) as
# named pieces (see bm25_blobs.py), updated by every write in its transaction; `bm25_generation` counts
# those writes. The migration builds the index from the stored passages (`migrate`'s `after` hook).
_V5 = """
CREATE TABLE bm25_blobs (name text PRIMARY KEY, data bytea NOT NULL);
ALTER TABLE bm25_blobs ALTER COLUMN data SET STORAGE EXTERNAL;  -- numpy arrays do not compress
INSERT INTO meta (key, value) VALUES ('bm25_generation', '0');
"""

# Document metadata, which `tag` and `modified` filters join on: the title where known, the source file's
# last modification and size, and user tags (`index add|build|sync --tag`, a folder's amsrag.toml, Markdown
# front matter). A change of these alone rewrites the document's row, not its passages; it counts
# `documents_generation` up so filters resolved before are resolved again.
_V6 = """
ALTER TABLE documents ADD COLUMN title text, ADD COLUMN modified timestamptz, ADD COLUMN size bigint,
    ADD COLUMN tags text[] NOT NULL DEFAULT '{{}}';
CREATE INDEX documents_tags ON documents USING gin (tags);
CREATE INDEX documents_modified ON documents (modified);
INSERT INTO meta (key, value) VALUES ('documents_generation', '0');
"""

# version -> SQL; formatted with the index's dense and BM25 settings (`dim`, `k1`, `b` only after
# version 1, so that `open` can apply them). Append, never edit, released versions (the functions a
# version creates are replaced with CREATE OR REPLACE by the version that changes them).
MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6}
CURRENT_VERSION = max(MIGRATIONS)


def installed_version(conn: Any) -> int | None:
    """The schema version in the database, or None when it holds no amsrag index."""
    found = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_version",)).fetchone()[0]
    if found is None:
        return None
    row = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
    return None if row[0] is None else int(row[0])


def migrate(conn: Any, params: dict[str, Any], amsrag_version: str,
            after: dict[int, Callable[[Any], object]] | None = None) -> list[int]:
    """Apply the pending migrations in the caller's transaction (which holds the write lock); `after`:
    per version, what runs on the connection once its SQL has (version 5: build the BM25 index)."""
    current = installed_version(conn) or 0
    if current > CURRENT_VERSION:
        raise IndexMismatchError(f"the database holds amsrag schema version {current}; this amsrag "
                                 f"({amsrag_version}) knows up to {CURRENT_VERSION}: upgrade amsrag")
    if current == 0:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(f"CREATE TABLE {SCHEMA}.schema_version (version integer PRIMARY KEY, "
                     f"applied timestamptz NOT NULL DEFAULT now(), amsrag_version text NOT NULL)")
    conn.execute(f"SET LOCAL search_path = {SEARCH_PATH}")
    applied = []
    for version in range(current + 1, CURRENT_VERSION + 1):
        conn.execute(MIGRATIONS[version].format(**params))
        if version == 4:
            conn.execute(BM25_FUNCTION)
        if after and version in after:
            after[version](conn)
        conn.execute("INSERT INTO schema_version (version, amsrag_version) VALUES (%s, %s)",
                     (version, amsrag_version))
        applied.append(version)
    return applied
