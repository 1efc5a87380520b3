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

# version -> SQL; formatted with the index's dense settings (`dim` only after version 1, so that
# `open` can apply them). Append, never edit, released versions.
MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3}
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
        conn.execute("INSERT INTO schema_version (version, amsrag_version) VALUES (%s, %s)",
                     (version, amsrag_version))
        applied.append(version)
    return applied
