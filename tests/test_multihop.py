"""The multi-hop second hop and adaptive k inside the engine, on the real slice index."""

from __future__ import annotations

import re

import pytest

from amsrag.config import SecondHopConfig
from amsrag.indexes.entities import entity_key
from amsrag.pipeline import Engine
from amsrag.pipeline.multihop import expand
from amsrag.pipeline.passes import fuse_runs
from amsrag.pipeline.systems import system_spec
from amsrag.retrievers import retriever_for

BRIDGE_Q = "What job did Jörgen Smit work, where he was working in the world center of the anthroposophical movement?"


def _first_hop(engine: Engine, query: str):
    plan = engine.router.plan("C", "multi_hop")
    runs = engine.passes.retrieve(plan, query, engine.index.encoder.encode_query(query))
    return plan, fuse_runs(system_spec("fixed"), None, runs, engine.config)


def test_bridges_are_entities_of_the_top_passages_the_question_does_not_name(built_index) -> None:
    engine = Engine(built_index)
    plan, first = _first_hop(engine, BRIDGE_Q)
    cfg = SecondHopConfig()
    result = expand(built_index, BRIDGE_Q, first, cfg, plan.depth)
    graph = retriever_for(built_index, "graph").graph
    (round1,) = result.rounds  # hops = 1: one bounded round
    assert 1 <= len(round1["bridges"]) <= cfg.bridges
    top_rows = {it.row for it in first.top(cfg.from_passages)}
    question = entity_key(BRIDGE_Q)
    for bridge in round1["bridges"]:
        assert bridge["from_row"] in top_rows
        assert bridge["entity"] in {key for key, _ in graph.entities_of(bridge["from_row"])}
        assert not re.search(rf"(?<!\w){re.escape(bridge['entity'])}(?!\w)", question)
    # every first-hop candidate survives the fusion, the second hop's passages join it
    hop_rows = {r for b in round1["bridges"] for r in b["rows"]}
    fused_rows = {it.row for it in result.fused}
    assert {it.row for it in first.top(plan.depth)} <= fused_rows and hop_rows <= fused_rows
    assert result.fused.params["hop_weights"] == {"hop1": 1.0, "hop2": cfg.weight}
    scores = result.fused.scores
    assert all(scores[i] >= scores[i + 1] for i in range(len(scores) - 1))


def test_a_bridge_leads_to_the_passage_titled_by_it(built_index) -> None:
    graph = retriever_for(built_index, "graph").graph
    rows = built_index.rows_for_ids(_ids(built_index))
    for row in rows.values():
        for key, kind in graph.entities_of(row):
            if kind == 1:
                e = graph.entity_keys.index(key)
                for titled in graph.title_rows(e):
                    assert (key, 2) in graph.entities_of(titled)
                    return
    pytest.fail("the slice has no mention of an entity that titles another passage")


def _ids(index) -> list[str]:
    return [p.id for p in index.iter_passages()]


def test_no_rounds_and_no_change_when_hops_is_zero(built_index) -> None:
    engine = Engine(built_index)
    plan, first = _first_hop(engine, BRIDGE_Q)
    result = expand(built_index, BRIDGE_Q, first, SecondHopConfig(hops=0), plan.depth)
    assert result.rounds == [] and result.fused.ids == first.ids


def test_engine_runs_the_second_hop_on_multi_hop_routes_only(built_index) -> None:
    engine = Engine(built_index)
    result = engine.retrieve(BRIDGE_Q, system="adaptive-rag")  # label only: multi_hop -> C
    if result.trace["complexity"]["label"] != "multi_hop":
        pytest.skip("the classifier does not call this question multi_hop")
    assert result.trace["second_hop"]["rounds"] and "second_hop" in result.trace["timings_ms"]
    config = built_index.config.model_copy(deep=True)
    config.router.expand_strategies = []
    plain = Engine(built_index, config=config).retrieve(BRIDGE_Q, system="adaptive-rag")
    assert plain.trace["second_hop"] is None
    one_hop = engine.retrieve("When was the Eiffel Tower built?", system="fixed")
    assert one_hop.trace["second_hop"] is None  # fixed pipelines never expand


def test_adaptive_k_cuts_the_fused_list_between_its_floor_and_ceiling(built_index) -> None:
    config = built_index.config.model_copy(deep=True)
    config.fusion.adaptive_k = True
    engine = Engine(built_index, config=config)
    for q in ("Who founded the Anthroposophical Society?", BRIDGE_Q):
        result = engine.retrieve(q, system="fixed")
        cut = result.trace["adaptive_k"]
        assert config.fusion.adaptive_k_min <= cut["k"] <= config.fusion.adaptive_k_max
        assert len(result.passages) == cut["k"]
    explicit = engine.retrieve(BRIDGE_Q, system="fixed", k=2)  # an explicit k wins
    assert len(explicit.passages) == 2 and explicit.trace["adaptive_k"] is None
