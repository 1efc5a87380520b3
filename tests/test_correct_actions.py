"""Tri-state actions: aggregation and decision, strip refinement, query rewrite, the corrective step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from amsrag.config import CorrectiveConfig
from amsrag.correct import CorrectiveStep, RetrievalEvaluator, aggregate_scores, decide, refine_strips, rewrite_query
from amsrag.embed.tokens import TokenCounter

PASSAGE = {
    "id": "p1", "title": "Marie Curie",
    "text": ("Marie Curie was a Polish and naturalised-French physicist and chemist. She conducted pioneering research "
             "on radioactivity. In 1903 she shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel. "
             "The Curies had two daughters. Her elder daughter later married a French politician. "
             "The family lived in Paris for many years."),
}
OTHER = {"id": "p2", "title": "Banana",
         "text": "A banana is an elongated, edible fruit. Bananas are grown in tropical regions. "
                 "They are rich in potassium."}


@pytest.fixture(scope="module")
def step(built_index):
    return CorrectiveStep(CorrectiveConfig(), RetrievalEvaluator.load(encoder=built_index.encoder))


def test_aggregate_and_decide():
    s = np.array([0.1, 0.8, 0.3])
    assert aggregate_scores(s, "max") == pytest.approx(0.8)
    top = aggregate_scores(s, "top_weighted")
    assert 0.3 < top < 0.8
    assert aggregate_scores(np.zeros(0)) == 0.0
    with pytest.raises(ValueError):
        aggregate_scores(s, "median")
    assert decide(0.7, 0.7, 0.3) == "correct"
    assert decide(0.69, 0.7, 0.3) == "ambiguous"
    assert decide(0.3, 0.7, 0.3) == "ambiguous"
    assert decide(0.29, 0.7, 0.3) == "incorrect"
    with pytest.raises(ValueError):
        CorrectiveConfig(upper=0.2, lower=0.5)


def test_refine_strips_keeps_relevant_sentence_and_its_predecessor(step):
    strips = refine_strips("Who shared the Nobel Prize in Physics in 1903?", None, [PASSAGE, OTHER], 200,
                           step.evaluator, min_similarity=0.9, relative=0.9, context_before=1)
    assert [s.passage_id for s in strips] == ["p1"]
    s = strips[0]
    assert "In 1903 she shared the Nobel Prize" in s.text
    assert "She conducted pioneering research on radioactivity." in s.text  # the sentence before (coreference)
    assert "banana" not in s.text.lower() and "lived in Paris" not in s.text
    assert s.sentences == sorted(s.sentences) and s.sentences[-1] - s.sentences[0] == len(s.sentences) - 1
    json.dumps(s.to_dict())


def test_refine_strips_respects_the_budget(step):
    counter = TokenCounter()
    for budget in (16, 40, 80):
        strips = refine_strips("Marie Curie daughters and Nobel Prize", None, [PASSAGE], budget, step.evaluator,
                               min_similarity=-1.0, relative=0.0, counter=counter)
        assert strips and sum(s.tokens for s in strips) <= budget + 2  # joining may merge a token or two
        assert all(s.tokens == counter.count(s.text) for s in strips)
    everything = refine_strips("Marie Curie", None, [PASSAGE], 10_000, step.evaluator, min_similarity=-1.0,
                               relative=0.0)
    assert len(everything[0].sentences) == 6  # all sentences, in order
    assert refine_strips("q", None, [], 100, step.evaluator) == []


def test_rewrite_query_keywords_and_llm_hook():
    q = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    r = rewrite_query(q)
    assert r.startswith("Corliss Archer Kiss and Tell")
    for word in ("government", "position", "woman", "portrayed"):
        assert word in r
    for stop in ("What ", " was ", " the ", " who "):
        assert stop not in f" {r} "
    assert len(rewrite_query(q, max_terms=3).split()) <= 7
    assert rewrite_query(q, llm=lambda prompt: '"Corliss Archer actress government post"') == \
        "Corliss Archer actress government post"

    def broken(prompt: str) -> str:
        raise RuntimeError("model crashed")

    assert rewrite_query(q, llm=broken) == r
    assert rewrite_query(q, llm=lambda p: "   ") == r
    assert rewrite_query("who got the first nobel prize in physics") == "got first nobel prize physics"


def test_assess_and_correct_on_real_lists(step, slice_questions, slice_passages, slice_vectors, built_index):
    by_id = {p.id: i for i, p in enumerate(slice_passages)}
    q = next(x for x in slice_questions if x.question.startswith("who got the first nobel prize"))
    qv = built_index.encoder.encode_query(q.question)
    gold = [by_id[g] for g in q.gold_passage_ids]
    unrelated = [i for i in range(len(slice_passages)) if i not in gold][-4:]
    good = step.assess(q.question, qv, [slice_passages[i] for i in gold + unrelated], slice_vectors[gold + unrelated])
    bad = step.assess(q.question, qv, [slice_passages[i] for i in unrelated], slice_vectors[unrelated])
    assert good.score > bad.score and good.per_passage[0] == max(good.per_passage)
    assert good.ids[0] == q.gold_passage_ids[0]
    trace = json.loads(json.dumps(good.to_dict()))
    assert set(trace) >= {"score", "action", "per_passage", "thresholds"}
    assert trace["action"] in ("correct", "ambiguous", "incorrect")

    forced_bad = CorrectiveStep(CorrectiveConfig(upper=0.999, lower=0.99), step.evaluator)
    c = forced_bad.correct(q.question, qv, [slice_passages[i] for i in unrelated], slice_vectors[unrelated])
    assert c.assessment.action == "incorrect" and c.kept == [] and c.strips == [] and c.escalate
    assert "nobel" in c.rewritten_query.lower()
    forced_good = CorrectiveStep(CorrectiveConfig(upper=0.0, lower=0.0), step.evaluator)
    c = forced_good.correct(q.question, qv, [slice_passages[i] for i in gold], slice_vectors[gold])
    assert c.assessment.action == "correct" and not c.escalate and c.rewritten_query is None
    assert c.strips and "1901" in " ".join(s.text for s in c.strips)
    amb = CorrectiveStep(CorrectiveConfig(upper=1.0, lower=0.0, keep_min=good.per_passage[0]), step.evaluator)
    c = amb.correct(q.question, qv, [slice_passages[i] for i in gold + unrelated], slice_vectors[gold + unrelated])
    assert c.assessment.action == "ambiguous" and c.escalate and c.kept == [0] and c.rewritten_query
    json.dumps(c.to_dict())


def test_rewrite_query_keeps_a_chinese_question_whole():
    q = "在复杂度类别 S、M、G、V 中，G 对应哪一类问题？"
    assert rewrite_query(q) == q
    assert rewrite_query("TARG  使用什么信号\n来决定是否需要检索？") == "TARG 使用什么信号 来决定是否需要检索？"
    assert rewrite_query(q, llm=lambda prompt: "复杂度类别 G 含义") == "复杂度类别 G 含义"
