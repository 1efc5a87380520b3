"""WikiTableQuestions' answer comparison: normalisation, numbers, dates and answer sets."""

from __future__ import annotations

import pytest

from amsrag.structured.denotation import denotation_match, normalize, parse_date, split_target, to_value


@pytest.mark.parametrize(("raw", "expected"), [
    ("  Bangkok,   Thailand ", "bangkok, thailand"),
    ("Zürich", "zurich"),
    ("Île-de-France", "ile-de-france"),
    ("Smith[1]", "smith"),
    ("Smith [a][2]", "smith"),
    ("Paris (France)", "paris"),
    ("1–2", "1-2"),
    ("“Hello”", "hello"),
    ("don’t", "don't"),
    ("(1990)", "(1990)"),  # a parenthesis that is the whole string stays
    ("Gold*", "gold"),
])
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(("predicted", "target"), [
    (["1,000"], ["1000"]),
    (["1000.0"], ["1000"]),
    (["3"], ["3.0"]),
    (["Wolfe Tones"], ["wolfe tones"]),
    (["Café"], ["Cafe"]),
    (["2004-05-12"], ["May 12, 2004"]),
    (["12 May 2004"], ["2004-05-12"]),
    (["1990-xx-xx"], ["1990-xx-xx"]),
    (["a", "b"], ["b", "a"]),
    (["a", "a", "b"], ["b", "a"]),  # a set: duplicates collapse
    (["Brazil [3]"], ["Brazil"]),
    (["12 (3)"], ["12"]),
])
def test_match(predicted: list[str], target: list[str]) -> None:
    assert denotation_match(predicted, target)


@pytest.mark.parametrize(("predicted", "target"), [
    (["1001"], ["1000"]),
    (["a"], ["a", "b"]),
    (["a", "b", "c"], ["a", "b"]),
    ([], ["a"]),
    (["2004-05-12"], ["2004-05-13"]),
    (["Paris, France"], ["Paris"]),
    (["1990"], ["1991"]),
])
def test_mismatch(predicted: list[str], target: list[str]) -> None:
    assert not denotation_match(predicted, target)


def test_values() -> None:
    assert to_value("1,234.5").amount == 1234.5
    assert to_value("-3").amount == -3.0
    assert to_value("abc").amount is None
    assert parse_date("2004-xx-xx") == (2004, -1, -1)
    assert parse_date("xx-xx-xx") is None
    assert parse_date("march 3, 1999") == (1999, 3, 3)
    assert parse_date("2004-13-01") is None


def test_split_target() -> None:
    assert split_target("a|b") == ["a", "b"]
    assert split_target("x\\py") == ["x|y"]
