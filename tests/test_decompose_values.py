"""Typed values and the comparison operators (`amsrag.decompose.values`), and the self-ask reply parser."""

from __future__ import annotations

import pytest

from amsrag.decompose.llm import LLMDecomposer, parse_reply
from amsrag.decompose.tagger import both_check, inner_question, operator_of
from amsrag.decompose.values import PartialDate, compare, parse_date, parse_number, same_text_value


@pytest.mark.parametrize(("text", "date"), [
    ("June 9, 1956", PartialDate(1956, 6, 9)),
    ("born 9 September 1956 in Rome", PartialDate(1956, 9, 9)),
    ("October 1993", PartialDate(1993, 10)),
    ("1956-06-09", PartialDate(1956, 6, 9)),
    ("a 1945 American comedy film", PartialDate(1945)),
    ("300 BC", PartialDate(-300)),
])
def test_dates_keep_their_precision(text, date):
    assert parse_date(text) == date


def test_a_number_is_not_a_year_and_no_date_is_none():
    assert parse_date("1,200 km") is None
    assert parse_date("the director") is None


def test_numbers_with_scale_words_and_small_number_words():
    assert parse_number("3.5 million people") == 3_500_000
    assert parse_number("1,200 km") == 1200
    assert parse_number("three members") == 3
    assert parse_number("none") is None


def test_dates_compare_at_the_precision_both_have():
    assert compare("earlier", ["June 9, 1956", "October 26, 1993"]).winner == 0
    assert compare("later", ["June 9, 1956", "October 26, 1993"]).winner == 1
    assert compare("earlier", ["1956", "June 1957"]).winner == 0
    tie = compare("earlier", ["1956", "June 9, 1956"])
    assert tie.winner is None and "equal" in tie.reason
    assert compare("earlier", ["1956", "the director"]).reason.startswith("a value is not a date")


def test_numbers_same_different_and_both():
    assert compare("more", ["1,200", "3.5 million"]).winner == 1
    assert compare("less", ["1,200", "3.5 million"]).winner == 0
    assert compare("same", ["American", "United States"]).yes is True
    assert compare("same", ["Russia", "Bosnia and Herzegovina"]).yes is False
    assert compare("different", ["Russia", "Bosnia and Herzegovina"]).yes is True
    assert compare("both", ["yes", "yes"]).yes is True
    assert compare("both", ["yes", "no"]).yes is False
    assert compare("both", ["yes", "Rome"]).yes is None
    assert same_text_value("the United Kingdom", "British")


def test_operators_read_from_the_comparative():
    assert operator_of("Which film came out first, A or B?") == "earlier"
    assert operator_of("Who is younger, A or B?") == "later"
    assert operator_of("Which city has the larger population, A or B?") == "more"
    assert operator_of("Were A and B of the same nationality?") == "same"
    assert operator_of("Are Medici and Senet both board games?") == "both"
    assert operator_of("Which Istanbul mosque is unique for its Baroque style, A or B?") is None


def test_rewrites_of_a_both_question_and_an_inner_description():
    check = both_check("Are Medici and Senet both board games?", ("Medici", "Senet"), "Senet")
    assert check == "Is Senet board games?"
    assert inner_question("the director of film Last Rampage") == "Who is the director of film Last Rampage?"
    assert inner_question("the county where Van Hook Township is located").startswith("What is")


class ScriptedLLM:
    """A stand-in for an LLM server: answers every prompt with a fixed reply (the real LLM is outside amsrag)."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.reply


def test_self_ask_replies_become_plans():
    llm = ScriptedLLM("Follow up: Who is the director of film Last Rampage?\nFollow up: When was #1 born?")
    plan = LLMDecomposer(llm).decompose("When was the director of film Last Rampage born?")
    assert "Question: When was the director of film Last Rampage born?" in llm.prompts[0]
    assert plan.kind == "bridge" and plan.decided_by == "llm"
    assert [s.question for s in plan.steps] == ["Who is the director of film Last Rampage?", "When was #1 born?"]
    assert plan.steps[1].filled("James Glickenhaus") == "When was James Glickenhaus born?"
    cmp = parse_reply("Which film came out first, Kiss and Tell or The Big Sleep?",
                      "Compare: Kiss and Tell | The Big Sleep\nFollow up: When did {E} come out?")
    assert cmp.kind == "comparison" and cmp.operator == "earlier" and cmp.value == "date"
    assert [c[0].question for c in cmp.chains] == ["When did Kiss and Tell come out?",
                                                   "When did The Big Sleep come out?"]
    bad = parse_reply("Who wrote Hamlet?", "I think it was Shakespeare.")
    assert bad.kind == "single" and bad.notes
