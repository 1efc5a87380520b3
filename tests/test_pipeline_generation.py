"""`Engine.ask` with a generator that knows things: the TARG gate and zero_hop routes skip retrieval.

The generator here is a scripted stand-in LLM (outside the product); the real llama.cpp path of the
same gate is tested in test_generate_llamacpp.py.
"""

from __future__ import annotations

from amsrag.generate.base import Generation
from amsrag.pipeline import Engine


class ScriptedLM:
    name = "scripted"
    knows = True
    logprobs = True
    streaming = False

    def __init__(self, confidence: float) -> None:
        self.confidence = confidence
        self.calls: list[str] = []

    def closed_book(self, question: str) -> Generation:
        self.calls.append("closed_book")
        return Generation("Paris", (), self.confidence, False, 5, 1, 1.0, self.name)

    def generate(self, question, passages) -> Generation:
        self.calls.append("generate")
        return Generation("from evidence", (passages[0].id,) if passages else (), 0.5, not passages, 50, 3, 2.0,
                          self.name)


def _engine(index, threshold: float) -> Engine:
    config = index.config.model_copy(deep=True)
    config.generator.targ_threshold = threshold
    return Engine(index, config=config)


def test_a_confident_closed_book_answer_skips_retrieval(built_index) -> None:
    lm = ScriptedLM(confidence=0.97)
    result = _engine(built_index, 0.9).ask("What is the capital of France?", generator=lm)
    assert result.answer == "Paris" and lm.calls == ["closed_book"]
    assert result.trace["strategy"] == "none" and result.trace["retriever_calls"] == 0
    assert result.trace["targ"]["fired"] is True and result.trace["reason"].startswith("TARG")


def test_an_unsure_closed_book_answer_retrieves(built_index, slice_questions) -> None:
    lm = ScriptedLM(confidence=0.4)
    q = next(q for q in slice_questions if q.dataset == "nq").question
    result = _engine(built_index, 0.9).ask(q, generator=lm)
    assert result.trace["targ"]["fired"] is False and result.trace["retriever_calls"] >= 1
    assert lm.calls[0] == "closed_book" and "generate" in lm.calls
    assert result.citations and result.citations[0] in {p["id"] for r in result.trace["retrievers"] for p in r["hits"]}


def test_the_gate_is_off_at_threshold_one_and_for_fixed_pipelines(built_index) -> None:
    lm = ScriptedLM(confidence=0.99)
    result = _engine(built_index, 1.0).ask("What is the capital of France?", generator=lm)
    assert "targ" not in result.trace  # inactive: the route alone decides (a confident zero_hop may skip)
    assert result.trace["strategy"] == "none" or result.trace["retriever_calls"] >= 1
    lm2 = ScriptedLM(confidence=0.99)
    fixed = _engine(built_index, 0.5).ask("What is the capital of France?", system="fixed", generator=lm2)
    assert fixed.trace["retriever_calls"] == 3 and "targ" not in fixed.trace
