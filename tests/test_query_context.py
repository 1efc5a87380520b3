"""The typed query context and the typed trace entries (issue 41): a wider pass shares the question's timings but
is not explained, a step timed apart does not reach the first pass's trace, and each trace entry serialises to the
JSON contract's keys in the contract's order."""

from __future__ import annotations

import json

import numpy as np

from amsrag.generate import Generation
from amsrag.pipeline.context import QueryContext
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.systems import system_spec
from amsrag.pipeline.trace import Trace
from amsrag.pipeline.trace_parts import GeneratorTrace, RouteFallback, TableAttempt, TableTrace


def _context() -> QueryContext:
    return QueryContext("who built it?", np.ones(3, np.float32), system_spec("full"), k=None, explain=3,
                        timings={"embed": 1.0})


def test_a_wider_pass_shares_the_timings_and_is_not_explained() -> None:
    ctx = _context()
    wider = ctx.wider("who built the tower", np.zeros(3, np.float32))
    wider.timings["escalated_retrieve"] = {}
    assert wider.explain == 0 and ctx.explain == 3
    assert wider.question == "who built the tower" and ctx.question == "who built it?"
    assert list(ctx.timings) == ["embed", "escalated_retrieve"]  # one dict: the trace sees the wider pass's time


def test_a_step_timed_apart_keeps_the_first_pass_timings() -> None:
    ctx = _context()
    apart = ctx.timed_apart()
    apart.timings["corrective"] = 2.0
    apart.total()
    assert list(ctx.timings) == ["embed"] and list(apart.timings) == ["embed", "corrective", "total"]
    classified = ctx.classified(None)
    assert classified.timings is ctx.timings


def test_the_generator_entry_keeps_the_contract_order() -> None:
    g = Generation("Eiffel", ("p1",), 0.8125, ms=12.34567, generator="extractive",
                   details={"name": "shadowed", "candidate": "Eiffel", "threshold": 0.5})
    entry = GeneratorTrace.of(g).to_dict()
    assert list(entry) == ["name", "prompt_tokens", "output_tokens", "ms", "confidence", "candidate", "threshold"]
    assert entry["name"] == "extractive" and entry["ms"] == 12.346  # a detail never overrides the entry's own keys
    failed = GeneratorTrace.of(g, "openai", "connection refused").to_dict()
    assert list(failed)[-3:] == ["requested", "error", "fallback"] and failed["fallback"] == "extractive"
    assert "requested" not in GeneratorTrace.of(g, "openai").to_dict()  # no error: nothing failed


def test_the_route_entries_keep_the_contract_order() -> None:
    assert RouteFallback("the index has no tables").to_dict() == {"fallback": "the index has no tables"}
    ran = RouteFallback("no program answered", (TableAttempt("t1", error="timed out"),), 3.0).to_dict()
    assert json.dumps(ran) == '{"fallback": "no program answered", "tried": [{"table": "t1", "error": "timed out"}], ' \
                              '"ms": 3.0}'
    assert RouteFallback("no theme matches", (), 1.0).to_dict()["tried"] == []
    tried = (TableAttempt("t1", llm_error="refused"), TableAttempt("t1", 0.91, ("5",)))
    cited = (ScoredPassage("t1#row=3", "Films", "studio: Fox", 1.0, -1),)
    table = TableTrace("t1", "SELECT 1", "count", 0.91, (3,), 7, tried, 4.5, cited).to_dict()
    assert list(table) == ["table", "sql", "program", "confidence", "rows", "candidates", "tried", "ms", "cited"]
    assert table["tried"] == [{"table": "t1", "llm_error": "refused"},
                              {"table": "t1", "confidence": 0.91, "answer": ["5"]}]
    assert table["cited"] == [{"id": "t1#row=3", "text": "studio: Fox"}] and table["rows"] == [3]


def test_the_trace_serialises_its_typed_entries() -> None:
    g = GeneratorTrace.of(Generation("5", generator="table"))
    trace = Trace(system="full", complexity=None, strategy="table", reason="r", generator=g,
                  structured=RouteFallback("the index has no tables"))
    out = trace.to_dict()
    assert out["generator"] == g.to_dict() and out["structured"] == {"fallback": "the index has no tables"}
    assert "global" not in out and trace["structured"] == out["structured"]
