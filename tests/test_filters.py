"""Metadata filters (`--where`, issue 38 item 4): parsing, and retrieval inside the filter — a filtered top-k
holds k passages whenever k allowed passages exist, never a disallowed one — checked against brute force
on a real index of the document fixtures (tests/fixtures/documents, tests/fixtures/docs; their licences
are listed there, with a folder amsrag.toml, a Markdown note's front matter tags and set modification times),
for BM25, dense (exact, gathered and HNSW), the graph and the full system, on both stores (PostgreSQL: skipped
without a local server unless AMSRAG_REQUIRE_POSTGRES=1), through the CLI and the HTTP API; document tags and
dates as they are written (build, a sync that changes tags alone, an index made before they existed) and
refused (a bad --tag, amsrag.toml or front matter)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from amsrag.errors import InputError
from amsrag.filters import Where
from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.retrieve.filtered import ranking_within
from amsrag.retrievers import retriever_for
from amsrag.types import Passage

FIXTURES = Path(__file__).parent / "fixtures"
QUERIES = ["configuration file", "How do I set the build target directory?", "root account password",
           "slides about the project", "diversions of a package file"]
FILTERS = [["type=pdf"], ["type=pdf,html"], ["source=docs/*"], ["source=guides/*.docx"], ["type=markdown"],
           ["source=guides/*", "type=pdf"], ["doc=kb/docs/cargo/*"], ["source=*diversions.html"],
           ["type=pptx", "source=nowhere/*"],
           # document tags (--tag corpus, amsrag.toml, front matter) and modification dates (MODIFIED)
           ["tag=manual"], ["tag=rust,ops"], ["tag=corpus"], ["tag=nope"], ["modified>=2025-01-01"],
           ["modified<2025-06-01"], ["modified>2025-06-01", "modified<=2025-11-30"],
           ["modified>=2025-06-01T12:00:00Z", "modified<2025-06-01T12:00:01Z"],
           ["tag=kb", "type=markdown", "modified>=2025-01-01"]]
SIDECAR = """# the fixture folder's tags
tags = ["kb"]

[files."guides/*.pdf"]
tags = ["manual"]

[files."docs/cargo/*"]
tags = ["cargo", "rust"]
"""
NOTE = """---
title: On call
tags: [ops, "on call"]
---
# On-call runbook

Page the release manager when the build target directory fills the disk.
"""
MODIFIED = {"guides/": "2024-03-15T08:00:00+00:00", "docs/cargo/": "2025-06-01T12:00:00+00:00",
            "docs/mkdocs/": "2025-11-30T23:30:00+00:00", "policy-": "2026-01-01T00:00:00+00:00",
            "notes/": "2025-01-01T00:00:00+00:00"}


# ---------------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(("specs", "message"), [
    (["colour=red"], "unknown field 'colour'"),
    (["type"], "expected FIELD=VALUE"),
    (["source="], "empty value for source"),
    (["type=pdf,"], "empty value for type"),
    (["type=pfd"], "unknown type 'pfd'"),
    ([" =pdf"], "unknown field ''"),
    (["tag=a,"], "empty value for tag"),
    (["modified>=2025-13-01"], "'2025-13-01' is not a date; write YYYY-MM-DD"),
    (["modified<yesterday"], "'yesterday' is not a date"),
    (["modified>2025-01-01T25:00"], "is not a date"),
    (["modified=2025-01-01"], "modified takes a bound: modified>=DATE"),
    (["tag>=ops"], "only modified takes >=, >, <=, <; write tag=VALUE"),
    (["modified>=2025-01-01", "modified>=2025-02-01"], "a second >= bound on modified"),
])
def test_malformed_cli_filters_name_the_problem(specs: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message) as exc:
        Where.parse(specs)
    assert repr(specs[-1]) in str(exc.value)


@pytest.mark.parametrize(("obj", "message"), [
    (["type=pdf"], "must be an object"),
    ({"colour": ["red"]}, r"`where.colour`: unknown field"),
    ({"type": []}, r"`where.type`: empty value"),
    ({"source": [""]}, "empty value for source"),
    ({"type": [3]}, "must be a string or a list of strings"),
    ({"type": ["docs"]}, "unknown type 'docs'"),
    ({"tag": [""]}, "empty value for tag"),
    ({"tag": ["a,b"]}, "holds a comma"),
    ({"modified": "2025-01-01"}, r"`where.modified` must be an object of bounds"),
    ({"modified": {"after": "2025-01-01"}}, "unknown bound 'after'; bounds are gte, gt, lte, lt"),
    ({"modified": {"gte": 2025}}, r"`where.modified.gte` must be a date string"),
    ({"modified": {"lt": "2025/01/01"}}, r"`where.modified.lt`: '2025/01/01' is not a date"),
])
def test_malformed_request_filters_name_the_problem(obj: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Where.from_json(obj)


def test_spellings_agree_and_fields_and_values_combine() -> None:
    w = Where.parse(["source=guides/*.pdf", "type=PDF,html", "type=docx"])
    assert w == Where(source=("guides/*.pdf",), type=("pdf", "html", "docx"))
    assert Where.from_json(w.to_dict()) == w == Where.parse(w.cli_args())
    assert not Where.parse([]) and not Where.from_json(None) and not Where.from_json({})
    pdf = Passage(id="kb/guides/a.pdf#0", doc_id="kb/guides/a.pdf", text="x", metadata={"source": "guides/a.pdf",
                                                                                        "type": "pdf"})
    assert w.matches(pdf) and w.matches(dict(pdf.metadata))
    assert not w.matches({"source": "guides/a.pdf", "type": "pptx"})  # fields AND
    assert not w.matches({"source": "other/a.pdf", "type": "pdf"})
    assert Where.parse(["source=kb/guides/*"]).matches(pdf)  # a source glob matches the document key too
    assert Where.parse(["doc=kb/*"]).matches(pdf) and not Where.parse(["doc=guides/*"]).matches(pdf)
    plain = Passage(id="p1", text="no metadata")
    assert not Where.parse(["type=text"]).matches(plain) and Where.parse(["source=p*"]).matches(plain) is False
    assert Where().matches(plain)


def test_tag_and_date_spellings_agree_and_compare_by_day_or_time() -> None:
    w = Where.parse(["tag=ops,on call", "modified>=2025-01-01", "modified < 2026-01-01T06:00+02:00"])
    assert w.tag == ("ops", "on call") and w.modified == (("gte", "2025-01-01"), ("lt", "2026-01-01T04:00:00Z"))
    assert w.to_dict() == {"tag": ["ops", "on call"], "modified": {"gte": "2025-01-01", "lt": "2026-01-01T04:00:00Z"}}
    assert Where.from_json(w.to_dict()) == w == Where.parse(w.cli_args()) and w.reads_documents
    assert Where.from_json({"tag": "ops", "modified": {"gt": "2025-03-01"}}) == Where.parse(["tag=ops",
                                                                                            "modified>2025-03-01"])
    assert not Where.parse(["type=pdf"]).reads_documents

    def allows(spec: str, modified: str | None, tags: tuple[str, ...] = ()) -> bool:
        return Where.parse([spec]).allows("d", None, None, modified, tags)

    assert allows("modified<=2025-01-31", "2025-01-31T23:59:59Z")  # a date bound takes the whole day
    assert not allows("modified>2025-01-31", "2025-01-31T23:59:59Z") and allows("modified>2025-01-31",
                                                                                "2025-02-01T00:00:00Z")
    assert allows("modified<2025-01-31T12:00:00Z", "2025-01-31T11:59:59Z")
    assert not allows("modified<2025-01-31T12:00:00Z", "2025-01-31T12:00:00Z")
    assert not allows("modified>=2000-01-01", None)  # no recorded time: no bound holds
    assert allows("tag=ops,dev", None, ("dev",)) and not allows("tag=ops", None, ("Ops",)) and not allows(
        "tag=ops", None)
    doc = Passage(id="kb/a.md#0", doc_id="kb/a.md", text="x", metadata={"source": "a.md", "type": "markdown"})
    from amsrag.store.documents import DocumentInfo

    row = DocumentInfo("kb/a.md", 1, "", "kb/a.md", "A", "2025-05-05T05:05:05Z", 10, ("ops",))
    assert w.matches(doc, row) and not w.matches(doc) and Where.parse(["type=markdown"]).matches(doc)


# ---------------------------------------------------------------------------------------------- the index
def document_folder(root: Path) -> Path:
    (root / "guides").mkdir(parents=True)
    for name in ("debian-reference-p30-33.pdf", "cite.pdf", "slides.pptx", "handbook.docx", "word-styles.docx"):
        shutil.copy(FIXTURES / "documents" / name, root / "guides" / name)
    shutil.copy(FIXTURES / "documents" / "policy-diversions.html", root / "policy-diversions.html")
    for name in ("cargo", "mkdocs"):
        shutil.copytree(FIXTURES / "docs" / name, root / "docs" / name)
    (root / "notes").mkdir()
    (root / "notes" / "on-call.md").write_text(NOTE, encoding="utf-8")
    (root / "amsrag.toml").write_text(SIDECAR, encoding="utf-8")
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        stamp = next((t for prefix, t in MODIFIED.items() if rel.startswith(prefix)), None)
        if path.is_file() and stamp is not None:
            seconds = datetime.fromisoformat(stamp).timestamp()
            os.utime(path, (seconds, seconds))
    return root


@pytest.fixture(scope="module")
def doc_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_indexing import invoke

    base = tmp_path_factory.mktemp("filters")
    target = base / "idx"
    code, out = invoke("index", "build", str(document_folder(base / "kb")), "--index", str(target), "--tag", "corpus",
                       "--json", "-q")
    assert code == 0, out
    return target


@pytest.fixture(scope="module")
def pg_doc_index(pg_server, tmp_path_factory: pytest.TempPathFactory) -> str:
    from pg_server import new_database
    from test_indexing import invoke

    url = new_database(pg_server)
    folder = document_folder(tmp_path_factory.mktemp("filters-pg") / "kb")
    code, out = invoke("index", "build", str(folder), "--index", url, "--tag", "corpus", "--json", "-q")
    assert code == 0, out
    return url


@pytest.fixture(scope="module", params=["embedded", "postgres"])
def engine(request: pytest.FixtureRequest):
    """The engine over the document index on each store (PostgreSQL: skipped without a local server)."""
    from amsrag.pipeline import Engine

    target = request.getfixturevalue("pg_doc_index" if request.param == "postgres" else "doc_index")
    with Engine.open(target) as e:
        yield e


@pytest.fixture(scope="module")
def embedded_engine(doc_index: Path):
    from amsrag.pipeline import Engine

    with Engine.open(doc_index) as e:
        yield e


def allowed_passages(engine, where: Where) -> dict[int, Passage]:
    """The stored passages `where` allows, tested one by one with their document's row."""
    idx = engine.index
    rows = idx.stored_rows()
    docs = idx.documents()
    return {r: p for r, p in zip(rows, idx.passages_by_rows(rows), strict=True) if where.matches(p, docs.get(p.doc_id))}


def test_documents_carry_title_time_size_and_tags(engine) -> None:
    docs = engine.index.documents()
    note = docs["kb/notes/on-call.md"]
    assert note.tags == ("corpus", "kb", "on call", "ops") and note.title == "On-call runbook"
    assert note.modified == "2025-01-01T00:00:00Z" and note.size == len(NOTE.encode())
    assert docs["kb/guides/cite.pdf"].tags == ("corpus", "kb", "manual")
    assert docs["kb/guides/slides.pptx"].tags == ("corpus", "kb")
    assert all(d.tags == ("cargo", "corpus", "kb", "rust") and d.modified == "2025-06-01T12:00:00Z"
               for k, d in docs.items() if k.startswith("kb/docs/cargo/"))
    assert docs["kb/policy-diversions.html"].modified == "2026-01-01T00:00:00Z"
    assert all(d.size and d.title for d in docs.values())


@pytest.mark.parametrize(("specs", "prefixes"), [
    (["tag=rust,ops"], ("kb/docs/cargo/", "kb/notes/")),
    (["tag=manual"], ("kb/guides/cite.pdf", "kb/guides/debian-reference-p30-33.pdf")),
    (["modified>2025-06-01", "modified<=2025-11-30"], ("kb/docs/mkdocs/",)),
    (["modified>=2025-06-01T12:00:00Z", "modified<2025-06-01T12:00:01Z"], ("kb/docs/cargo/",)),
    (["modified<2025-06-01"], ("kb/guides/", "kb/notes/")),
    (["modified>=2026-01-01"], ("kb/policy-",)),
])
def test_tag_and_date_filters_keep_the_documents_they_name(engine, specs: list[str], prefixes: tuple[str, ...]) -> None:
    """The documents a filter allows, written out by hand from the fixture's tags and dates."""
    allowed = engine.index.allowed_rows(Where.parse(specs))
    kept = {p.doc_id for p in engine.index.passages_by_rows(allowed.rows.tolist())}
    expected = {d for d in engine.index.documents() if d.startswith(prefixes)}
    assert kept == expected and expected


def brute_top(scores: dict[int, float], ids: dict[int, str], k: int) -> list[str]:
    return [ids[r] for r in sorted(scores, key=lambda r: (-scores[r], ids[r]))[:k]]


@pytest.mark.parametrize("specs", FILTERS)
def test_resolution_equals_the_passages_the_filter_matches(engine, specs: list[str]) -> None:
    where = Where.parse(specs)
    allowed = engine.index.allowed_rows(where)
    assert allowed.rows.tolist() == sorted(allowed_passages(engine, where))
    assert allowed.total == len(engine.index) and engine.index.allowed_rows(where) is allowed  # cached
    assert allowed.trace() == {"where": where.to_dict(), "allowed": len(allowed), "passages": len(engine.index)}


@pytest.mark.parametrize("specs", FILTERS)
@pytest.mark.parametrize("k", [1, 3, 10, 100])
def test_filtered_bm25_is_the_top_k_of_the_allowed_passages(engine, specs: list[str], k: int) -> None:
    where = Where.parse(specs)
    allowed = allowed_passages(engine, where)
    inner = retriever_for(engine.index, "bm25")
    search = ranking_within(engine.index.allowed_rows(where), inner)
    rows = engine.index.stored_rows()
    for query in QUERIES:
        all_scores = dict(zip(rows, inner.score_rows(query, rows).tolist(), strict=True))
        scores = {r: s for r, s in all_scores.items() if r in allowed and s > 0}  # BM25 hits score above 0
        hits = search.search(query, k=k)
        assert [h.id for h in hits] == brute_top(scores, {r: p.id for r, p in allowed.items()}, k), (query, specs)
        assert len(hits) == min(k, len(scores)) and all(h.row in allowed for h in hits)
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def dense_brute(engine, allowed: dict[int, Passage], qvec: np.ndarray, k: int) -> list[str]:
    rows = sorted(allowed)
    if not rows:
        return []
    scores = engine.index.vectors_for_rows(rows) @ qvec
    return brute_top(dict(zip(rows, scores.tolist(), strict=True)), {r: allowed[r].id for r in rows}, k)


@pytest.mark.parametrize("specs", FILTERS)
@pytest.mark.parametrize("k", [1, 4, 100])
def test_filtered_dense_is_the_top_k_of_the_allowed_passages(engine, specs: list[str], k: int) -> None:
    where = Where.parse(specs)
    allowed = allowed_passages(engine, where)
    search = ranking_within(engine.index.allowed_rows(where), retriever_for(engine.index, "dense"))
    for query in QUERIES:
        qvec = engine.index.encoder.encode_query(query)
        hits = search.search(query, k=k, query_vector=qvec)
        assert [h.id for h in hits] == dense_brute(engine, allowed, qvec, k), (query, specs)
        assert len(hits) == min(k, len(allowed))  # every allowed passage has a cosine: k whenever k exist


@pytest.mark.parametrize("specs", [["type=pdf"], ["source=docs/*"], ["source=*diversions.html"], ["doc=none"],
                                   ["tag=kb"], ["modified>=2025-01-01"], ["tag=rust"]])
def test_filtered_hnsw_walk_and_gather_keep_k(embedded_engine, specs: list[str]) -> None:
    """The same index's vectors in an HNSW graph (the embedded index searches exactly below 20k passages): a
    filter over a tenth of the passages asks the graph for more candidates (or searches exactly when that would
    reach a quarter of the graph), a smaller one gathers its vectors."""
    from amsrag.config import DenseConfig
    from amsrag.indexes.vectors import VectorIndex
    from amsrag.retrieve.dense import DenseRetriever

    engine = embedded_engine
    idx = engine.index
    rows = idx.stored_rows()
    config = DenseConfig(hnsw_min_size=1)
    vectors = VectorIndex.empty(config, idx.vector_index.dim).updated(rows, idx.vectors_for_rows(rows), [])
    assert vectors.kind == "hnsw"
    where = Where.parse(specs)
    allowed = allowed_passages(engine, where)
    resolved = AllowedRows.resolve(where, idx.table.row_facets())
    search = ranking_within(resolved, DenseRetriever(vectors, idx.encoder, idx))
    for query in QUERIES:
        qvec = idx.encoder.encode_query(query)
        for k in (1, 5, 60):
            hits = search.search(query, k=k, query_vector=qvec)
            assert [h.id for h in hits] == dense_brute(engine, allowed, qvec, k), (query, specs, k)


def test_kept_gathers_are_bounded_dropped_least_recent_first_and_tied_to_their_objects() -> None:
    """`GatheredVectors`: one gather per (allowed rows, vector index), compared by identity; the least recently
    used dropped past the budget; one larger than `largest` not kept; those of collected objects dropped."""
    import gc

    from amsrag.config import DenseConfig
    from amsrag.indexes.vectors import VectorIndex
    from amsrag.retrieve.filtered import GatheredVectors

    rng = np.random.default_rng(3)
    index = VectorIndex.empty(DenseConfig(), 8).updated(np.arange(100), rng.normal(size=(100, 8)), [])
    other = index.updated([100], rng.normal(size=(1, 8)), [])
    each = [AllowedRows(Where(), np.arange(i, i + 10, dtype=np.int64), 100) for i in range(0, 40, 10)]
    mats = [index.vectors_for_rows(a.among(index.rows)) for a in each]  # 10 x 8 float32: 320 bytes each
    kept = GatheredVectors(budget=3 * 320, largest=320)
    assert kept.put(each[0], index, mats[0]) and kept.get(each[0], index) is mats[0]
    assert kept.get(each[0], other) is None and kept.get(each[1], index) is None  # another index, another filter
    assert not kept.put(each[1], index, np.vstack([mats[1], mats[1]]))  # 640 bytes: larger than `largest`
    kept.put(each[1], index, mats[1])
    kept.put(each[2], index, mats[2])
    assert kept.get(each[0], index) is mats[0]  # each[0] is now the most recently used
    kept.put(each[3], index, mats[3])  # past the budget: each[1], the least recently used, goes
    assert kept.get(each[1], index) is None and kept.used == 3 * 320 and len(kept) == 3
    assert [kept.get(a, index) is m for a, m in zip(each, mats, strict=True)] == [True, False, True, True]
    del each[2], mats[2]
    gc.collect()
    kept.put(each[1], index, mats[1])  # a collected filter's gather is dropped before anything is evicted
    assert len(kept) == 3 and kept.used == 3 * 320
    assert all(kept.get(a, index) is m for a, m in zip(each, mats, strict=True))


def test_a_kept_gather_scores_as_a_fresh_one(embedded_engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gather path with its vectors kept and gathered anew (budget 0): the same hits, order and scores
    (bit for bit), and the second query under a filter reads the kept vectors."""
    from amsrag.retrieve import filtered as filtered_mod

    idx = embedded_engine.index
    dense = retriever_for(idx, "dense")
    where = Where.parse(["source=*diversions.html"])
    allowed = idx.allowed_rows(where)
    assert 0 < len(allowed) <= filtered_mod.GATHER_SHARE * len(idx)
    fresh = filtered_mod.GatheredVectors(budget=0, largest=0)
    kept = filtered_mod.GatheredVectors(budget=1 << 30, largest=1 << 30)
    runs = []
    for cache in (fresh, kept, kept):
        monkeypatch.setattr(filtered_mod, "GATHERED", cache)
        search = filtered_mod.FilteredDense(dense, allowed)
        runs.append([[(h.id, h.score, h.rank, h.row) for h in search.search(q, k=4, query_vector=
                                                                            idx.encoder.encode_query(q))]
                     for q in QUERIES])
    assert runs[0] == runs[1] == runs[2] and all(runs[0])
    assert len(fresh) == 0 and kept.get(allowed, idx.vector_index) is not None


@pytest.mark.parametrize("specs", [["type=pdf"], ["source=docs/*"], ["type=docx,pptx"], ["tag=manual,rust"],
                                   ["modified<2025-06-01"]])
def test_filtered_graph_and_full_system_return_only_allowed_passages(engine, specs: list[str]) -> None:
    where = Where.parse(specs)
    allowed = allowed_passages(engine, where)
    graph = ranking_within(engine.index.allowed_rows(where), retriever_for(engine.index, "graph"))
    for query in QUERIES:
        hits = graph.search(query, k=5)
        assert hits and all(h.row in allowed for h in hits)
        for system in ("full", "fixed", "graph", "dense"):
            for k in (3, 8):
                result = engine.retrieve(query, system=system, k=k, where=where)
                assert all(p.row in allowed for p in result.passages), (query, system)
                if system in ("fixed", "dense"):  # a dense list in the fusion: k whenever k are allowed
                    assert len(result.passages) == min(k, len(allowed)), (query, system, k)
                assert result.trace.to_dict()["filter"] == {"where": where.to_dict(), "allowed": len(allowed),
                                                            "passages": len(engine.index)}


def test_full_system_fills_k_from_the_allowed_passages(engine) -> None:
    where = Where.parse(["source=guides/*"])
    allowed = allowed_passages(engine, where)
    for query in QUERIES:
        result = engine.retrieve(query, k=6, where=where)
        assert len(result.passages) == 6 and all(p.row in allowed for p in result.passages), query
    nothing = engine.retrieve(QUERIES[0], k=5, where=Where.parse(["doc=no/such/*"]))
    assert nothing.passages == [] and nothing.trace.to_dict()["filter"]["allowed"] == 0


def without_timings(d: dict) -> dict:
    d = json.loads(json.dumps(d))
    d["trace"].pop("timings_ms")
    for run in d["trace"]["retrievers"]:
        run.pop("ms", None)
    return d


def test_no_filter_changes_nothing(embedded_engine) -> None:
    engine = embedded_engine
    query = QUERIES[1]
    before = without_timings(engine.retrieve(query, k=5).to_dict())
    engine.retrieve(query, k=5, where=Where.parse(["type=pdf"]))  # a filtered call leaves no scope behind
    assert without_timings(engine.retrieve(query, k=5, where=Where()).to_dict()) == before
    assert without_timings(engine.retrieve(query, k=5).to_dict()) == before
    assert "filter" not in before["trace"]
    answer = engine.ask(query)
    assert "filter" not in answer.trace.to_dict()
    scoped = engine.ask(query, where=Where.parse(["source=docs/*"]))
    assert scoped.trace.to_dict()["filter"]["where"] == {"source": ["docs/*"]}
    assert all(c.startswith("kb/docs/") for c in scoped.citations)
    assert engine.ask(query).to_dict()["answer"] == answer.to_dict()["answer"]


# ---------------------------------------------------------------------------------------------- interfaces
def test_cli_where_on_search_retrieve_and_ask(doc_index: Path) -> None:
    from test_indexing import invoke

    code, out = invoke("search", "configuration file", "--index", str(doc_index), "--where", "source=docs/*",
                       "--where", "type=markdown", "-k", "20", "--json")
    assert code == 0, out
    found = json.loads(out)
    assert found["filter"]["allowed"] == len(found["hits"]) > 0
    assert all(h["id"].startswith("kb/docs/") for h in found["hits"])
    code, out = invoke("retrieve", "root account password", "--index", str(doc_index), "--where", "type=pdf",
                       "-k", "4", "--json")
    assert code == 0, out
    got = json.loads(out)
    assert len(got["passages"]) == 4 and all(".pdf#" in p["id"] for p in got["passages"])
    assert got["trace"]["filter"]["where"] == {"type": ["pdf"]}
    code, out = invoke("retrieve", "root account password", "--index", str(doc_index), "--where", "type=pdf")
    assert code == 0 and "filter type=pdf:" in out, out
    code, out = invoke("ask", "How do I set the build target directory?", "--index", str(doc_index), "--where",
                       "doc=kb/docs/cargo/*", "--no-log", "--local", "--json")
    assert code == 0, out
    answer = json.loads(out)
    assert answer["trace"]["filter"]["where"] == {"doc": ["kb/docs/cargo/*"]}
    assert all(c.startswith("kb/docs/cargo/") for c in answer["citations"])
    assert all(e.startswith("kb/docs/cargo/") for e in answer["trace"]["evidence"])
    for command in (["search", "x"], ["retrieve", "x"], ["ask", "x", "--no-log", "--local"]):
        code, out = invoke(*command, "--index", str(doc_index), "--where", "kind=pdf")
        assert code == 2 and "--where 'kind=pdf': unknown field 'kind'" in " ".join(out.split()), out
        code, out = invoke(*command, "--index", str(doc_index), "--where", "modified>=2025-02-30")
        assert code == 2 and "--where 'modified>=2025-02-30': '2025-02-30' is not a date" in " ".join(out.split()), out
    code, out = invoke("search", "target directory", "--index", str(doc_index), "--where", "tag=rust", "--where",
                       "modified>=2025-01-01", "--where", "modified<2025-07-01", "-k", "50", "--json")
    assert code == 0, out
    found = json.loads(out)
    assert found["filter"]["where"] == {"tag": ["rust"], "modified": {"gte": "2025-01-01", "lt": "2025-07-01"}}
    assert found["hits"] and all(h["id"].startswith("kb/docs/cargo/") for h in found["hits"])
    code, out = invoke("retrieve", "target directory", "--index", str(doc_index), "--where", "tag=rust",
                       "--where", "modified>2025-06-01")
    assert code == 0 and "filter tag=rust modified>2025-06-01: 0 of" in out, out


def test_http_where_on_retrieve_and_ask(doc_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from test_indexing import invoke
    from test_serve_api import AUTH, KEY, error_of, start_server

    copy = tmp_path / "served"
    shutil.copytree(doc_index, copy, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    server, service = start_server(copy)
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
            r = client.post("/v1/retrieve", json={"query": "configuration file", "k": 5,
                                                  "where": {"source": ["guides/*"], "type": "pdf"}})
            assert r.status_code == 200, r.text
            got = r.json()
            assert len(got["passages"]) == 5 and all(p["id"].startswith("kb/guides/") and ".pdf#" in p["id"]
                                                     for p in got["passages"])
            assert got["trace"]["filter"]["where"] == {"source": ["guides/*"], "type": ["pdf"]}
            plain = client.post("/v1/retrieve", json={"query": "configuration file", "k": 5}).json()
            assert "filter" not in plain["trace"]
            r = client.post("/v1/ask", json={"query": "How do I set the build target directory?",
                                             "where": {"doc": ["kb/docs/mkdocs/*"]}})
            assert r.status_code == 200, r.text
            asked = r.json()
            assert asked["trace"]["filter"]["allowed"] > 0
            assert all(s["id"].startswith("kb/docs/mkdocs/") for s in asked["sources"])
            r = client.post("/v1/retrieve", json={"query": "configuration file", "k": 3, "where": {
                "tag": ["manual"], "modified": {"lt": "2025-01-01"}}})
            assert r.status_code == 200, r.text
            assert len(r.json()["passages"]) == 3 and all(p["id"].startswith("kb/guides/") and ".pdf#" in p["id"]
                                                          for p in r.json()["passages"])
            assert r.json()["trace"]["filter"]["where"] == {"tag": ["manual"], "modified": {"lt": "2025-01-01"}}
            for bad, message in (({"colour": ["red"]}, "unknown field 'colour'"), ({"type": []}, "empty value"),
                                 ({"modified": {"gte": "soon"}}, "`where.modified.gte`: 'soon' is not a date"),
                                 ({"modified": ["2025-01-01"]}, "must be an object of bounds"),
                                 ({"tag": "a,b"}, "holds a comma"), ("type=pdf", "must be an object")):
                for route in ("/v1/retrieve", "/v1/ask"):
                    r = client.post(route, json={"query": "configuration file", "where": bad})
                    if isinstance(bad, str):  # not an object: the request body's schema refuses it
                        assert r.status_code == 422, r.text
                        continue
                    assert message in error_of(r, 400, "invalid_input")
        # `ask --server` sends the filter in the request body
        monkeypatch.setenv("AMSRAG_API_KEY", KEY)
        code, out = invoke("ask", "How do I set the build target directory?", "--server", server.url, "--where",
                           "doc=kb/docs/cargo/*", "--where", "modified>=2025-06-01", "--json")
        assert code == 0, out
        remote = json.loads(out)
        assert remote["trace"]["filter"]["where"] == {"doc": ["kb/docs/cargo/*"], "modified": {"gte": "2025-06-01"}}
        assert remote["trace"]["evidence"] and all(e.startswith("kb/docs/cargo/") for e in remote["trace"]["evidence"])
    finally:
        server.stop()
        service.close()


def test_postgres_cli_where(pg_doc_index: str) -> None:
    from test_indexing import invoke

    code, out = invoke("search", "target directory", "--index", pg_doc_index, "--where", "source=docs/*",
                       "--retriever", "dense", "-k", "20", "--json")
    assert code == 0, out
    found = json.loads(out)
    assert found["filter"]["allowed"] == len(found["hits"]) > 0
    assert all(h["id"].startswith("kb/docs/") for h in found["hits"])
    code, out = invoke("search", "x", "--index", pg_doc_index, "--where", "type=")
    assert code == 2 and "empty value for type" in out, out
    code, out = invoke("search", "target directory", "--index", pg_doc_index, "--where", "tag=ops,manual",
                       "--where", "modified<2025-06-01", "--retriever", "dense", "-k", "20", "--json")
    assert code == 0, out
    found = json.loads(out)
    assert len(found["hits"]) == min(20, found["filter"]["allowed"]) > 0
    assert all(h["id"].startswith(("kb/guides/cite.pdf", "kb/guides/debian", "kb/notes/")) for h in found["hits"])


def test_python_api_takes_any_spelling_of_a_filter(doc_index: Path) -> None:
    from amsrag.api import Index

    with Index.open(doc_index) as index:
        for where in ({"type": "pdf"}, ["type=pdf"], Where(type=("pdf",))):
            hits = index.search("root account password", k=3, where=where)
            assert len(hits) == 3 and all(".pdf#" in h.id for h in hits)
            retrieved = index.retrieve("root account password", k=3, where=where)
            assert len(retrieved.passages) == 3 and all(".pdf#" in p.id for p in retrieved.passages)
        answer = index.ask("How do I set the build target directory?", where={"doc": "kb/docs/cargo/*"})
        assert answer.trace.to_dict()["filter"]["where"] == {"doc": ["kb/docs/cargo/*"]}
        assert "filter" not in index.retrieve("root account password", k=3).trace.to_dict()
        with pytest.raises(InputError, match="unknown field 'kind'"):
            index.search("x", where={"kind": "pdf"})
        for where in ({"tag": "rust", "modified": {"gte": "2025-06-01"}}, ["tag=rust", "modified>=2025-06-01"]):
            hits = index.search("target directory", retriever="dense", k=4, where=where)
            assert len(hits) == 4 and all(h.id.startswith("kb/docs/cargo/") for h in hits)
        with pytest.raises(InputError, match="unknown bound 'from'"):
            index.retrieve("x", where={"modified": {"from": "2025-01-01"}})


# ---------------------------------------------------------------------------------------------- tags as written
@pytest.fixture(params=["embedded", "postgres"])
def empty_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a new index goes, on each store (PostgreSQL: a fresh database; skipped without a server)."""
    if request.param == "embedded":
        return str(tmp_path / "idx")
    from pg_server import new_database

    return new_database(request.getfixturevalue("pg_server"))


def small_folder(root: Path) -> Path:
    (root / "team").mkdir(parents=True)
    for n, topic in enumerate(("release checklist", "disk quota policy", "backup rotation")):
        (root / "team" / f"note{n}.md").write_text(f"# Note {n}\n\nThe {topic} for the build servers.\n\n"
                                                   f"More about the {topic}: ask the operations team.\n")
    (root / "amsrag.toml").write_text('tags = ["team"]\n[files."team/note0.md"]\ntags = ["release"]\n')
    return root


def passage_state(target: str) -> tuple[list[int], int, dict[str, str]]:
    """(stored rows, the passages' generation, each document's fingerprint): what a retag must leave alone."""
    from amsrag.store.open import open_index

    with open_index(target) as idx:
        generation = idx.stats()["generation"]
        return idx.stored_rows(), generation, {d: i.content_hash for d, i in idx.documents().items()}


def allowed_docs(target: str, *specs: str, k: int = 10) -> tuple[set[str], list[str]]:
    """(the documents `specs` allow, the filtered BM25 top-k for 'build servers')."""
    from amsrag.store.open import open_index

    with open_index(target) as idx:
        allowed = idx.allowed_rows(Where.parse(list(specs)))
        hits = ranking_within(allowed, retriever_for(idx, "bm25")).search("build servers", k=k)
        return {p.doc_id for p in idx.passages_by_rows(allowed.rows.tolist())}, [h.id for h in hits]


def test_a_sync_that_changes_tags_alone_rewrites_document_rows_not_passages(empty_target: str, tmp_path: Path) -> None:
    from test_indexing import invoke

    folder = small_folder(tmp_path / "kb")
    code, out = invoke("index", "build", str(folder), "--index", empty_target, "--tag", "v1", "--json", "-q")
    assert code == 0, out
    notes = {f"kb/team/note{n}.md" for n in range(3)}
    assert allowed_docs(empty_target, "tag=release")[0] == {"kb/team/note0.md"}
    docs, hits = allowed_docs(empty_target, "tag=v1", k=3)
    assert docs == notes and len(hits) == 3  # k results whenever k allowed passages match
    before = passage_state(empty_target)

    (folder / "amsrag.toml").write_text('tags = ["team"]\n[files."team/note[12].md"]\ntags = ["release"]\n')
    code, out = invoke("index", "sync", str(folder), "--index", empty_target, "--tag", "v2", "--json", "-q")
    assert code == 0, out
    report = json.loads(out)
    assert report["documents_meta_updated"] == 3 and report["documents_unchanged"] == 3
    assert (report["added"], report["removed"], report["embedded"]) == (0, 0, 0)
    assert passage_state(empty_target) == before  # same rows, generation and fingerprints
    assert allowed_docs(empty_target, "tag=release")[0] == {"kb/team/note1.md", "kb/team/note2.md"}
    assert allowed_docs(empty_target, "tag=v1") == (set(), [])
    assert len(allowed_docs(empty_target, "tag=v2", k=2)[1]) == 2

    # a touched file: its time changes alone; then a sync with nothing new changes nothing
    stamp = datetime.fromisoformat("2020-02-02T02:02:02+00:00").timestamp()
    os.utime(folder / "team" / "note2.md", (stamp, stamp))
    code, out = invoke("index", "sync", str(folder), "--index", empty_target, "--tag", "v2", "--json", "-q")
    assert code == 0 and json.loads(out)["documents_meta_updated"] == 1, out
    assert allowed_docs(empty_target, "modified<2021-01-01")[0] == {"kb/team/note2.md"}
    code, out = invoke("index", "sync", str(folder), "--index", empty_target, "--tag", "v2", "--json", "-q")
    assert code == 0 and json.loads(out)["documents_meta_updated"] == 0, out
    assert passage_state(empty_target) == before

    # front matter tags change the file (read again; its passages, without the front matter, stay): tags follow
    note = folder / "team" / "note1.md"
    note.write_text("---\ntags: [urgent]\n---\n" + note.read_text())
    code, out = invoke("index", "sync", str(folder), "--index", empty_target, "--tag", "v2", "--json", "-q")
    assert code == 0 and (json.loads(out)["files"], json.loads(out)["kept"]) == (1, 1), out
    assert passage_state(empty_target)[0] == before[0]
    assert allowed_docs(empty_target, "tag=urgent")[0] == {"kb/team/note1.md"}


def test_an_index_made_before_document_tags_opens_and_gets_them_on_sync(empty_target: str, tmp_path: Path) -> None:
    """The documents table as amsrag made it before this change (no title, modified, size, tags; PostgreSQL at
    schema 5): the index opens, filters on tags or dates allow nothing yet, and a sync fills the rows in."""
    import psycopg

    from amsrag.store.open import open_index
    from test_indexing import invoke

    folder = small_folder(tmp_path / "kb")
    code, out = invoke("index", "build", str(folder), "--index", empty_target, "-q")
    assert code == 0, out
    if empty_target.startswith("postgresql"):
        with psycopg.connect(empty_target, autocommit=True) as conn:
            conn.execute("ALTER TABLE amsrag.documents DROP COLUMN title, DROP COLUMN modified, DROP COLUMN size, "
                         "DROP COLUMN tags")
            conn.execute("DELETE FROM amsrag.meta WHERE key = 'documents_generation'")
            conn.execute("DELETE FROM amsrag.schema_version WHERE version > 5")
    else:
        with sqlite3.connect(Path(empty_target) / "passages.sqlite") as conn:
            for column in ("title", "modified", "size", "tags"):
                conn.execute(f"ALTER TABLE documents DROP COLUMN {column}")
            conn.execute("DELETE FROM meta WHERE key = 'documents_generation'")
    before = passage_state(empty_target)
    with open_index(empty_target) as idx:
        assert all(d.tags == () and d.modified is None and d.content_hash for d in idx.documents().values())
        assert len(idx.allowed_rows(Where.parse(["type=markdown"]))) == len(idx)
    assert allowed_docs(empty_target, "tag=team") == (set(), [])
    code, out = invoke("index", "sync", str(folder), "--index", empty_target, "--json", "-q")
    assert code == 0 and json.loads(out)["documents_meta_updated"] == 3, out
    assert passage_state(empty_target) == before
    assert allowed_docs(empty_target, "tag=team")[0] == {f"kb/team/note{n}.md" for n in range(3)}
    assert len(allowed_docs(empty_target, "modified>=2000-01-01")[0]) == 3


def test_filtered_dense_follows_passages_added_deleted_and_retagged(empty_target: str, tmp_path: Path) -> None:
    """One long-lived index, each store: a filter allowing under a tenth of the passages (the embedded store
    keeps the gathered vectors for the next query) ranks within the passages it allows after each sync that
    re-tags, adds or deletes them — never from a gather kept from before."""
    from types import SimpleNamespace

    from amsrag.retrieve.filtered import GATHER_SHARE, GATHERED, FilteredDense
    from amsrag.store.open import open_index
    from test_indexing import invoke

    folder = small_folder(tmp_path / "kb")
    (folder / "bulk").mkdir()
    for n in range(40):
        (folder / "bulk" / f"b{n:02d}.md").write_text(f"# Bulk {n}\n\nNote {n} about {QUERIES[n % len(QUERIES)]} "
                                                      f"and item {n * 7919 % 1000}.\n")
    (folder / "amsrag.toml").write_text('tags = ["team"]\n[files."team/note[02].md"]\ntags = ["release"]\n')
    code, out = invoke("index", "build", str(folder), "--index", empty_target, "--json", "-q")
    assert code == 0, out
    where = Where.parse(["tag=release"])

    def sync(expect_docs: set[str]) -> None:
        code, out = invoke("index", "sync", str(folder), "--index", empty_target, "--json", "-q")
        assert code == 0, out
        idx.refresh()
        check(expect_docs)

    def check(expect_docs: set[str]) -> None:
        engine = SimpleNamespace(index=idx)
        allowed = allowed_passages(engine, where)
        assert {p.doc_id for p in allowed.values()} == expect_docs
        resolved = idx.allowed_rows(where)
        assert 0 < len(resolved) <= GATHER_SHARE * len(idx)
        search = ranking_within(resolved, retriever_for(idx, "dense"))
        for _ in range(2):  # the second time from the kept gather (embedded)
            for query in QUERIES:
                qvec = idx.encoder.encode_query(query)
                hits = search.search(query, k=3, query_vector=qvec)
                assert [h.id for h in hits] == dense_brute(engine, allowed, qvec, 3), (query, expect_docs)
                scores = idx.vectors_for_rows([h.row for h in hits]) @ qvec  # each hit's own vector's score
                assert [h.score for h in hits] == pytest.approx(scores.tolist(), abs=1e-5), (query, expect_docs)
        if isinstance(search, FilteredDense):
            assert GATHERED.get(resolved, idx.vector_index) is not None
        seen.append(resolved)

    seen: list[AllowedRows] = []
    with open_index(empty_target) as idx:
        check({"kb/team/note0.md", "kb/team/note2.md"})
        (folder / "amsrag.toml").write_text('tags = ["team"]\n[files."team/note[123].md"]\ntags = ["release"]\n')
        sync({"kb/team/note1.md", "kb/team/note2.md"})  # re-tagged: the documents' generation alone moves
        (folder / "team" / "note3.md").write_text("# Note 3\n\nThe configuration file of the release.\n")
        sync({"kb/team/note1.md", "kb/team/note2.md", "kb/team/note3.md"})  # a passage added
        (folder / "team" / "note1.md").unlink()
        sync({"kb/team/note2.md", "kb/team/note3.md"})  # a passage deleted
        assert len({id(a) for a in seen}) == len(seen)  # each change resolved the filter again


@pytest.mark.parametrize(("write", "message"), [
    ({"amsrag.toml": "tags = [\"a\"\n"}, "amsrag.toml: not valid TOML"),
    ({"amsrag.toml": "labels = [\"a\"]\n"}, "amsrag.toml: unknown key 'labels'"),
    ({"amsrag.toml": "[files.\"*.md\"]\ntags = [\"a,b\"]\n"}, "holds a comma"),
    ({"amsrag.toml": "[files.\"*.md\"]\ntitle = \"x\"\n"}, "must hold `tags`"),
    ({"team/bad.md": "---\ntags: [a, b\n---\n# Bad\n\ntext\n"}, "bad.md: front matter line 2: not valid YAML"),
    ({"team/bad.md": "---\ntags: {a: 1}\ntitle: x\n---\n# Bad\n\ntext\n"}, "bad.md: front matter: `tags` must "
                                                                            "be a list"),
    ({"team/bad.md": "---\ntags: [a, 3]\n---\n# Bad\n\ntext\n"}, "bad.md: front matter: a tag must be a string"),
])
def test_bad_tags_are_refused_naming_the_file(tmp_path: Path, write: dict[str, str], message: str) -> None:
    from test_indexing import invoke

    folder = small_folder(tmp_path / "kb")
    target = str(tmp_path / "idx")
    code, out = invoke("index", "build", str(folder), "--index", target, "-q")
    assert code == 0, out
    before = passage_state(target)
    for name, text in write.items():
        (folder / name).write_text(text)
    code, out = invoke("index", "sync", str(folder), "--index", target)
    assert code == 2 and message in " ".join(out.split()), out
    assert passage_state(target) == before  # refused before anything was written
    code, out = invoke("index", "build", str(folder), "--index", str(tmp_path / "new"))
    assert code == 2 and message in " ".join(out.split()), out
    assert not (tmp_path / "new").exists()
    code, out = invoke("index", "build", str(folder), "--index", str(tmp_path / "idx2"), "--tag", " ")
    assert code == 2 and "--tag ' ': tag ' ' is empty" in out, out


def test_a_nested_sidecar_is_reported_not_read(tmp_path: Path) -> None:
    from test_indexing import invoke

    folder = small_folder(tmp_path / "kb")
    (folder / "team" / "amsrag.toml").write_text('tags = ["nested"]\n')
    code, out = invoke("index", "build", str(folder), "--index", str(tmp_path / "idx"), "--json", "-q")
    assert code == 0, out
    skipped = json.loads(out)["skipped_files"]
    assert skipped == [{"file": "kb/team/amsrag.toml", "reason": "an amsrag.toml is read only at the top of a "
                                                                 "folder given to index add|build|sync"}]
    assert allowed_docs(str(tmp_path / "idx"), "tag=nested") == (set(), [])
