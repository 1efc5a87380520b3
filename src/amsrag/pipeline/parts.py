"""A question that asks several things, answered part by part (`amsrag.decompose.parts` cuts it).

Each part goes through the whole of `Engine.ask` on its own — route, retrieval, corrective step, reader, audit —
so each answer carries its own citation, quote and confidence. The combined result lists the parts; its answer
joins theirs, its citations are theirs in order, and it abstains only when every part did."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from amsrag.pipeline.context import ms_since
from amsrag.pipeline.results import AnswerResult

PART_SEPARATOR = "; "
NOT_FOUND = "(not found)"


def answer_parts(query: str, parts: Sequence[str], ask_one: Callable[[str], AnswerResult]) -> AnswerResult:
    """`ask_one` over each of `parts`, combined into one result for `query`. The combined trace is the first
    part's (its route, retrieval and audit) with the part questions and the total time of all parts."""
    t0 = time.perf_counter()
    results = tuple(ask_one(part) for part in parts)
    citations = list(dict.fromkeys(c for r in results for c in r.citations))
    answer = PART_SEPARATOR.join(NOT_FOUND if r.abstained else r.answer for r in results)
    first = results[0]
    timings = {**first.trace.timings, "total": ms_since(t0)}
    trace = replace(first.trace, parts=tuple(parts), timings=timings)
    return AnswerResult(query, answer, citations, all(r.abstained for r in results), trace, None, results)
