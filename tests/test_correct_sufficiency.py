"""Sufficiency check: entity coverage, bridge passages, comparison questions, and rates on real data."""

from __future__ import annotations

import json

import pytest

from amsrag.correct.sufficiency import check

Q = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
KISS = {"id": "k", "title": "Kiss and Tell (1945 film)",
        "text": "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss "
                "Archer."}
TEMPLE = {"id": "t", "title": "Shirley Temple",
          "text": "Shirley Temple Black was an American actress, singer, dancer, businesswoman, and diplomat who "
                  "served as Chief of Protocol of the United States."}
ARCHER = {"id": "a", "title": "Meet Corliss Archer",
          "text": "Meet Corliss Archer, a program from radio's Golden Age, ran from January 7, 1943 to 1956."}


def test_bridge_by_title_link():
    s = check(Q, [KISS, TEMPLE], multi_hop=True)
    assert s.ok and s.missing == [] and set(s.covered) == {"Corliss Archer", "Kiss and Tell"}
    assert s.bridge is not None and (s.bridge.source, s.bridge.target, s.bridge.kind) == ("k", "t", "title")
    assert s.bridge.entity == "Shirley Temple"
    json.dumps(s.to_dict())


def test_missing_entity_and_no_bridge():
    s = check(Q, [ARCHER, TEMPLE], multi_hop=True)
    assert not s.ok and s.missing == ["Kiss and Tell"] and s.reason == "entities not covered"
    one = check(Q, [KISS], multi_hop=True)
    assert not one.ok and "two or more" in one.reason
    unlinked = check("Was Corliss Archer older than Kiss and Tell?",
                     [ARCHER, {"id": "x", "title": "Kiss and Tell", "text": "Kiss and Tell is a play."}], True)
    assert unlinked.ok and "comparison" in unlinked.reason  # each entity in its own passage
    assert not check(Q, [], multi_hop=False).ok


def test_single_hop_needs_coverage_only():
    s = check("Where was Shirley Temple born?", [TEMPLE], multi_hop=False)
    assert s.ok and s.covered == ["Shirley Temple"] and s.bridge is None
    assert not check("Where was Albert Einstein born?", [TEMPLE], multi_hop=False).ok
    assert check("where is the gall bladder situated", [TEMPLE], multi_hop=False).reason == "no key entities"


@pytest.mark.slow
def test_gold_evidence_passes_more_often_than_distractors(shared_data):
    from amsrag.learn.evaluator.data import DataConfig, load_pools

    pools = [q for q in load_pools(shared_data, DataConfig(per_dataset=60)) if q.dataset != "nq"][:80]
    gold_ok = neg_ok = 0
    for q in pools:
        gold = [{"id": str(i), "title": p.title, "text": p.text} for i, p in enumerate(q.paragraphs) if p.gold]
        neg = [{"id": str(i), "title": p.title, "text": p.text} for i, p in enumerate(q.paragraphs)
               if not p.gold][: len(gold)]
        gold_ok += check(q.question, gold, True).ok
        neg_ok += check(q.question, neg, True).ok
    assert gold_ok / len(pools) >= 0.5 and gold_ok - neg_ok >= 0.25 * len(pools)
