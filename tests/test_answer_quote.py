"""`Engine.ask` carries the answer's quote (issue 37): the span reader's own, or an LLM's answer located in
the passage it cites; in `AnswerResult.to_dict` (ask --json, the HTTP ask response)."""

from __future__ import annotations

from amsrag.generate.base import Generation
from amsrag.pipeline import Engine
from amsrag.text.questions import asks_for_attribute


class CitingLM:
    """A scripted stand-in for an LLM: answers with the first words of the first passage, citing it."""

    name = "scripted"
    knows = False
    logprobs = False
    streaming = False

    def closed_book(self, question: str) -> Generation:
        return Generation("insufficient evidence", (), 0.0, True, generator=self.name)

    def generate(self, question, passages) -> Generation:
        words = " ".join(passages[0].text.split()[:3])
        return Generation(words, (passages[0].id,), 0.5, False, 10, 3, 1.0, self.name)


def test_an_extractive_answer_carries_its_quote(built_index, slice_questions) -> None:
    engine = Engine(built_index)
    answered = [r for r in (engine.ask(q.question) for q in slice_questions[:4]) if not r.abstained]
    assert answered
    for r in answered:
        assert r.quote is not None and r.quote.passage_id in r.citations
        assert r.answer in (r.quote.span, r.quote.text)
        passage = built_index.get(r.quote.passage_id)
        assert passage is not None and r.quote.text in f"{passage.title} {passage.text}"
        assert r.to_dict()["quote"] == r.quote.to_dict()


def test_an_llm_answer_is_quoted_from_the_passage_it_cites(built_index, slice_questions) -> None:
    # not a question asking for an attribute of a described entity: there the scripted answer, the same at every
    # hop, names the first hop's entity and the answer abstains (pipeline.compose.names_inner_entity)
    question = next(q.question for q in slice_questions if not asks_for_attribute(q.question))
    r = Engine(built_index).ask(question, generator=CitingLM())
    assert not r.abstained
    assert r.quote is not None and r.quote.passage_id in r.citations
    assert r.quote.span.split() == r.answer.split()
