"""The PostgreSQL schema of an amsrag index, as numbered migrations recorded in `schema_version`.

Everything lives in the `amsrag` schema of the database (one index per database); pgvector's type
comes from wherever the `vector` extension is installed (normally `public`).
"""

from __future__ import annotations

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


# Exact Lucene BM25 top-k with impact-ordered candidate generation (Fagin's threshold idea), one call
# per query. Pass 1 reads the `depth` highest-impact postings of every query term; what a posting not
# read can add is bounded by the term's last impact read (0 once a list is read to its end). A
# candidate's partial score (the terms it was seen in) is a lower bound of its score, its partial score
# plus the bounds of the other terms an upper bound; candidates that cannot reach the k-th partial score
# are dropped, the others scored exactly (postings looked up by (tid, prow)). When the bound of a
# passage seen nowhere is below the k-th exact score, that is the answer. Otherwise pass 2 reads, per
# term, every posting whose contribution bound exceeds a cut, the cuts summing to less than that k-th
# score (water-filled: a term whose whole list cannot reach its share reads nothing), which makes the
# answer exact by construction. Ties at the k-th score are all kept and ordered by id, as the
# exhaustive query orders them. `p_depth` (pass 1's depth; default max(2k, 64)) is there for tests.
BM25_FUNCTION = """
CREATE OR REPLACE FUNCTION bm25_top(p_terms text[], p_qtf integer[], p_k1 float8, p_b float8, p_k integer,
                                    p_exhaustive boolean DEFAULT false, p_depth integer DEFAULT NULL)
RETURNS TABLE (prow bigint, score float8, id text, title text)
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $fn$
#variable_conflict use_column
DECLARE
    v_n float8; v_avgdl float8; v_ref float8; v_k1 float8; v_b float8; v_g float8;
    v_tids integer[]; v_ws float8[]; v_cut float8[]; v_top float8[]; v_lim integer;
    v_theta float8; v_bound float8; v_margin float8;
    r_rows bigint[]; r_scores float8[]; r_ids text[]; r_titles text[];
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
    v_theta := -1;
    IF p_exhaustive OR v_ref IS NULL OR v_k1 IS DISTINCT FROM p_k1 OR v_b IS DISTINCT FROM p_b THEN
        v_cut := array_fill(-1::float8, ARRAY[cardinality(v_tids)]);  -- every posting: exhaustive
        v_lim := NULL;
        v_g := 1;
    ELSE
        v_cut := array_fill(-1::float8, ARRAY[cardinality(v_tids)]);
        v_lim := greatest(coalesce(p_depth, greatest(2 * p_k, 64)), 1);
    END IF;
    FOR pass IN 1..2 LOOP
        WITH qt AS MATERIALIZED (
            SELECT i, v_tids[i] AS tid, v_ws[i] AS w, v_cut[i] AS cut FROM generate_subscripts(v_tids, 1) AS i),
        head AS MATERIALIZED (
            SELECT qt.i, h.prow, h.imp, qt.w * h.tf / (h.tf + p_k1 * (1 - p_b + p_b * h.dl / v_avgdl)) AS c
            FROM qt CROSS JOIN LATERAL (
                SELECT po.prow, po.tf, po.dl, po.imp FROM bm25_postings po
                WHERE po.tid = qt.tid AND po.imp > qt.cut ORDER BY po.imp DESC LIMIT v_lim) h),
        rem AS MATERIALIZED (
            SELECT qt.i, max(h.imp)::float8 AS top,
                   CASE WHEN v_lim IS NOT NULL AND count(h.prow) >= v_lim THEN qt.w * v_g * min(h.imp)
                        WHEN qt.cut < 0 THEN 0::float8
                        ELSE qt.w * v_g * qt.cut END AS r
            FROM qt LEFT JOIN head h ON h.i = qt.i GROUP BY qt.i, qt.w, qt.cut),
        tot AS (SELECT sum(r) AS b FROM rem),
        cand AS MATERIALIZED (
            SELECT h.prow, sum(h.c) AS part, sum(rm.r) AS seen_r FROM head h JOIN rem rm ON rm.i = h.i
            GROUP BY h.prow),
        thr AS (SELECT greatest(v_theta, coalesce(
            (SELECT part FROM cand ORDER BY part DESC OFFSET p_k - 1 LIMIT 1), -1)) AS t),
        live AS MATERIALIZED (
            SELECT c.prow FROM cand c, tot, thr
            WHERE c.part + (tot.b - c.seen_r) >= thr.t - 1e-9 * (1 + abs(thr.t))),
        exact AS MATERIALIZED (
            SELECT l.prow, sum(x.c ORDER BY x.i) AS s FROM live l CROSS JOIN LATERAL (
                SELECT qt.i, qt.w * po.tf / (po.tf + p_k1 * (1 - p_b + p_b * po.dl / v_avgdl)) AS c
                FROM qt JOIN bm25_postings po ON po.tid = qt.tid AND po.prow = l.prow) x
            GROUP BY l.prow),
        kth AS (SELECT s FROM exact ORDER BY s DESC OFFSET p_k - 1 LIMIT 1),
        best AS (
            SELECT e.prow, e.s, p.id, p.title FROM exact e JOIN passages p ON p.prow = e.prow
            WHERE e.s >= coalesce((SELECT s FROM kth), -1) AND e.s > 0
            ORDER BY e.s DESC, p.id LIMIT p_k)
        SELECT (SELECT array_agg(best.prow ORDER BY best.s DESC, best.id) FROM best),
               (SELECT array_agg(best.s ORDER BY best.s DESC, best.id) FROM best),
               (SELECT array_agg(best.id ORDER BY best.s DESC, best.id) FROM best),
               (SELECT array_agg(best.title ORDER BY best.s DESC, best.id) FROM best),
               coalesce((SELECT s FROM kth), -1), (SELECT b FROM tot),
               (SELECT array_agg(coalesce(rem.top, 0) ORDER BY rem.i) FROM rem)
          INTO r_rows, r_scores, r_ids, r_titles, v_theta, v_bound, v_top;
        v_margin := 1e-9 * (1 + abs(v_theta));
        EXIT WHEN v_bound <= 0 OR (v_theta > 0 AND v_bound < v_theta - v_margin) OR pass = 2;
        -- pass 2: cuts summing to less than the k-th score, shared out from the terms of lowest bound
        v_left := v_theta * (1 - 1e-9) - v_margin;
        v_m := cardinality(v_tids);
        FOR v_i IN SELECT o FROM generate_subscripts(v_tids, 1) AS o ORDER BY v_ws[o] * v_top[o], o LOOP
            v_ub := v_ws[v_i] * v_g * v_top[v_i];
            v_share := greatest(least(v_ub, v_left / v_m), 0);
            v_left := v_left - v_share;
            v_m := v_m - 1;
            v_cut[v_i] := v_share / (v_ws[v_i] * v_g);
        END LOOP;
        v_lim := NULL;
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(r_rows, r_scores, r_ids, r_titles);
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

# version -> SQL; formatted with the index's dense and BM25 settings (`dim`, `k1`, `b` only after
# version 1, so that `open` can apply them). Append, never edit, released versions (the functions a
# version creates are replaced with CREATE OR REPLACE by the version that changes them).
MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3, 4: _V4}
CURRENT_VERSION = max(MIGRATIONS)


def installed_version(conn: Any) -> int | None:
    """The schema version in the database, or None when it holds no amsrag index."""
    found = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_version",)).fetchone()[0]
    if found is None:
        return None
    row = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
    return None if row[0] is None else int(row[0])


def migrate(conn: Any, params: dict[str, Any], amsrag_version: str) -> list[int]:
    """Apply the pending migrations in the caller's transaction (which holds the write lock)."""
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
        conn.execute("INSERT INTO schema_version (version, amsrag_version) VALUES (%s, %s)",
                     (version, amsrag_version))
        applied.append(version)
    return applied
