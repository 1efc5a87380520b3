"""The five-way taxonomy: configuration, the decision, threshold tuning, the shipped task head, and the
engine's table and global routes on a real index holding passages and tables."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from amsrag.classify.task import TaskHead, five_way, mask_probs
from amsrag.config import AmsragConfig, TaxonomyConfig
from amsrag.route.taxonomy import decide, task_cost, tune_min_confidence
from amsrag.types import TASK_KINDS


def test_taxonomy_config_needs_the_hop_classes_and_a_route_per_class():
    with pytest.raises(ValueError, match="hop classes"):
        TaxonomyConfig(classes=["one_hop", "multi_hop", "structured"])
    with pytest.raises(ValueError, match="must be 'retrieval'"):
        TaxonomyConfig(routes={"zero_hop": "table", "one_hop": "retrieval", "multi_hop": "retrieval",
                               "aggregation": "global", "structured": "table"})
    three = TaxonomyConfig(classes=["zero_hop", "one_hop", "multi_hop"])
    assert three.task_classes == ()
    assert TaxonomyConfig().task_classes == ("aggregation", "structured")


def test_config_round_trips_through_toml_with_the_new_sections():
    cfg = AmsragConfig()
    cfg.router.taxonomy.min_confidence["structured"] = 0.35
    back = AmsragConfig.from_toml(cfg.to_toml())
    assert back.router.taxonomy.min_confidence["structured"] == 0.35
    assert back.tables.row_limit == cfg.tables.row_limit and back.themes.max_k == cfg.themes.max_k


def test_five_way_splits_the_text_share_by_the_hop_classifier_and_folds_unused_classes():
    task = {"text": 0.5, "aggregation": 0.2, "structured": 0.3}
    hop = {"zero_hop": 0.0, "one_hop": 0.6, "multi_hop": 0.4}
    probs = five_way(task, hop, ["zero_hop", "one_hop", "multi_hop", "aggregation", "structured"])
    assert probs["one_hop"] == pytest.approx(0.3) and probs["structured"] == pytest.approx(0.3)
    assert sum(probs.values()) == pytest.approx(1.0)
    three = five_way(task, hop, ["zero_hop", "one_hop", "multi_hop"])
    assert set(three) == {"zero_hop", "one_hop", "multi_hop"} and sum(three.values()) == pytest.approx(1.0)


def test_no_tables_means_no_structured_probability():
    p = mask_probs(np.array([[0.2, 0.1, 0.7]]), has_tables=False)
    assert p[0, TASK_KINDS.index("structured")] == 0.0 and p.sum() == pytest.approx(1.0)


def test_decide_takes_a_class_route_only_at_its_threshold():
    cfg = TaxonomyConfig(min_confidence={"aggregation": 0.5, "structured": 0.6})
    probs = {"zero_hop": 0.0, "one_hop": 0.3, "multi_hop": 0.15, "aggregation": 0.0, "structured": 0.55}
    label, route, alpha, reason = decide(probs, cfg)
    assert (label, route) == ("one_hop", "retrieval") and "0.550 < 0.6" in reason
    assert alpha == pytest.approx(0.3 / 0.45)
    label, route, _, _ = decide({**probs, "structured": 0.65}, cfg)
    assert (label, route) == ("structured", "table")


def test_tuned_thresholds_lower_the_cost_they_are_fitted_to():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    p = np.full((600, 3), 0.1)
    p[np.arange(600), y] = rng.uniform(0.35, 0.95, 600)
    p /= p.sum(axis=1, keepdims=True)
    costs = TaxonomyConfig().costs
    tuned = tune_min_confidence(p, y, costs)
    assert task_cost(p, y, tuned, costs) <= task_cost(p, y, {"aggregation": 0.95, "structured": 0.95}, costs)
    assert task_cost(p, y, tuned, costs) <= task_cost(p, y, {"aggregation": 0.05, "structured": 0.05}, costs)


def test_shipped_task_head_tells_corpus_wide_questions_from_text_questions():
    from amsrag.embed.encoder import MiniLMEncoder

    head = TaskHead.load()
    enc = MiniLMEncoder()
    agg = "What are the main themes across these documents?"
    text = "Who wrote the novel Moby-Dick?"
    pa = head.predict(agg, enc.encode_query(agg), [], has_tables=False)
    pt = head.predict(text, enc.encode_query(text), [], has_tables=False)
    assert pa.label == "aggregation" and pt.label == "text"
    assert pa.probs["structured"] == 0.0 and pt.probs["structured"] == 0.0
    assert head.card["min_confidence"]["structured"] > 0  # fitted by `amsrag train taxonomy train`


@pytest.fixture(scope="module")
def mixed_index(built_index, tmp_path_factory):
    """The session's slice index copied, plus the demo's two tables and the corpus themes."""
    from amsrag.cli.demo import demo_tables
    from amsrag.indexing.themes import refresh_themes
    from amsrag.store import EmbeddedIndex

    path = tmp_path_factory.mktemp("mixed") / "index"
    shutil.copytree(built_index.path, path)
    index = EmbeddedIndex.open(path)
    index.put_tables(demo_tables())
    refresh_themes(index)
    yield index
    index.close()


def test_engine_answers_a_table_question_with_sql_and_row_citations(mixed_index):
    from amsrag.pipeline import Engine

    engine = Engine(mixed_index)
    a = engine.ask("How many films were made by 20th Century Fox studios?")
    assert a.trace["strategy"] == "table", a.trace["taxonomy"]
    structured = a.trace["structured"]
    assert structured["table"].endswith("top_grossing_films_1965.csv")
    assert structured["sql"].upper().startswith("SELECT")
    assert a.answer == "5"
    assert a.citations and all("#row=" in c for c in a.citations)


def test_engine_answers_a_corpus_wide_question_from_the_themes(mixed_index):
    from amsrag.pipeline import Engine

    engine = Engine(mixed_index)
    a = engine.ask("What topics does this collection cover?")
    assert a.trace["strategy"] == "global", a.trace["taxonomy"]
    themes = a.trace["global"]["themes"]
    assert themes and all(mixed_index.get(c) is not None for c in a.citations)
    assert a.trace["global"]["n_passages"] == len(mixed_index)


def test_text_questions_keep_the_text_path_and_three_classes_turn_the_taxonomy_off(mixed_index):
    from amsrag.pipeline import Engine

    engine = Engine(mixed_index)
    r = engine.retrieve("Which magazine was started first, Arthur's Magazine or First for Women?")
    assert r.trace["strategy"] in ("A", "B", "C") and r.trace["taxonomy"]["route"] == "retrieval"
    cfg = mixed_index.config.model_copy(deep=True)
    cfg.router.taxonomy.classes = ["zero_hop", "one_hop", "multi_hop"]
    three = Engine(mixed_index, config=cfg)
    a = three.ask("How many films were made by 20th Century Fox studios?")
    assert a.trace["strategy"] in ("A", "B", "C") and "taxonomy" not in a.trace.to_dict()


def test_an_index_without_tables_never_routes_to_structured(built_index):
    from amsrag.pipeline import Engine

    engine = Engine(built_index)
    vec = built_index.encoder.encode_query("How many films were made by 20th Century Fox studios?")
    cx = engine.complexity_of("How many films were made by 20th Century Fox studios?", vec)
    decision, hits = engine.taxonomy.decide("How many films were made by 20th Century Fox studios?", vec, cx)
    assert hits == [] and decision.probs["structured"] == 0.0 and decision.route != "table"


def test_eval_sections_refuse_an_unknown_name(tmp_path):
    from amsrag.errors import InputError
    from amsrag.learn.taxonomy.sections import append_sections

    (tmp_path / "report.json").write_text("{}", encoding="utf-8")
    (tmp_path / "report.md").write_text("# report\n", encoding="utf-8")
    with pytest.raises(InputError, match="unknown eval section"):
        append_sections(tmp_path, ["tabels"], None, None, 13)
