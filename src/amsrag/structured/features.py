"""Features of an executed candidate program, shared by the parser at run time and its training.

Per candidate: its kind; the question's trigger words (trees pair them with the kind); whether the
program's direction agrees with the question's (most vs least, after vs before); how well the answer,
sort and condition columns match the question (shared words and the MiniLM cosine of the column name);
the matched value's quality; the executed answer (how many values, numbers or not, a year, found in the
question); and how many other candidates gave the same answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.structured.denotation import normalize, parse_amount
from amsrag.structured.programs import KINDS, Condition, Mentions, Program, content_words, fold
from amsrag.tables.base import QueryRows, SqlRunner
from amsrag.tables.table import ColumnProfile, TableProfile

FEATURES_VERSION = 3

TRIGGERS: dict[str, tuple[str, ...]] = {
    "how_many": ("how many",),
    "how_much": ("how much",),
    "number_of": ("number of", "count", "times"),
    "most": ("most", "the majority"),
    "least": ("least", "fewest", "the minority"),
    "larger": ("highest", "largest", "biggest", "greatest", "longest", "top", "maximum", "best", "tallest",
               "more", "higher", "larger", "longer", "greater", "latest", "newest", "oldest", "heaviest", "last"),
    "smaller": ("lowest", "smallest", "shortest", "minimum", "worst", "less", "lower", "smaller", "shorter",
                "fewer", "earliest", "youngest", "lightest", "first"),
    "first": ("first", "earliest", "top", "begin", "start", "opening", "initial"),
    "last": ("last", "final", "latest", "bottom", "end", "most recent"),
    "next": ("next", "after", "following", "succeed", "later", "below"),
    "previous": ("previous", "before", "preceding", "prior", "above", "earlier"),
    "total": ("total", "sum", "combined", "altogether", "in all", "overall"),
    "average": ("average", "mean"),
    "difference": ("difference", "how many more", "how much more", "how many less", "how many fewer", "than"),
    "threshold": ("more than", "less than", "at least", "over", "under", "above", "below", "fewer than",
                  "greater than", "or more", "or less", "at most", "exceed"),
    "or": (" or ",),
    "distinct": ("different", "distinct", "unique", "how many types", "how many kinds"),
    "year": ("what year", "which year", "when", "what years", "in what year"),
    "who": ("who", "whom", "whose"),
    "which": ("which",),
    "what": ("what",),
    "where": ("where",),
    "same": ("same", "both"),
}
_WORD_BOUNDED = re.compile(r"^\w")

# Direction words: +1 for the largest / latest, -1 for the smallest / earliest.
_LARGER = ("most", "larger")
_SMALLER = ("least", "smaller")

FEATURES: tuple[str, ...] = (
    *(f"kind_{k}" for k in KINDS),
    *(f"q_{t}" for t in TRIGGERS),
    "dir_agree", "dir_order", "dir_adjacent", "dir_count", "ans_overlap", "ans_cos", "ans_cos_best", "ans_is_cond_col",
    "ans_number", "ans_date", "ans_position", "ans_first_col", "sort_overlap", "sort_cos", "sort_cos_best",
    "has_sort", "sort_is_ans", "has_cond", "cond_score", "cond_exact", "cond_words", "cond_rank", "cond_col_overlap",
    "cond_col_cos", "cond_number_col", "has_second", "second_score", "n_conditions", "threshold_number",
    "res_n", "res_number", "res_integer", "res_year", "res_zero", "res_negative", "res_in_question",
    "res_is_condition", "res_one", "res_agree", "res_agree_share", "mention_used", "mention_unused",
    "num_col_mentioned", "q_words", "q_numbers", "table_rows", "table_cols",
)
FEATURE_INDEX = {name: i for i, name in enumerate(FEATURES)}


def format_cell(value: object) -> str:
    """A result cell as an answer string: integral floats without ".0", others rounded to 6 places."""
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return str(int(value))
        return repr(round(value, 6))
    return str(value)


@dataclass(frozen=True, slots=True)
class Executed:
    program: Program
    answer: tuple[str, ...]
    row_ids: tuple[int, ...]


def execute(program: Program, runner: SqlRunner) -> Executed | None:
    """The program's answer, or None when it fails or returns nothing."""
    try:
        result: QueryRows = runner.run(program.sql)
    except Exception:  # a candidate that does not run is skipped, whatever the runner raises
        return None
    values: dict[str, None] = {}
    rows: list[int] = []
    for row in result.rows:
        if not row or row[0] is None or row[0] == "":
            continue
        values.setdefault(format_cell(row[0]), None)
        if program.returns_rows and len(row) > 1 and isinstance(row[1], int):
            rows.append(row[1])
    if not values:
        return None
    return Executed(program, tuple(values), tuple(rows))


@dataclass(frozen=True, slots=True)
class QuestionContext:
    text: str  # folded (lower case, no diacritics), padded with spaces
    words: frozenset[str]  # content words, stemmed
    triggers: dict[str, float]
    direction: int  # +1 larger words only, -1 smaller only, 0 both or neither
    n_words: int
    n_numbers: int


def question_context(question: str, mentions: Mentions) -> QuestionContext:
    text = " " + " ".join(re.findall(r"\w+|[^\w\s]", fold(question))) + " "
    triggers = {}
    for name, phrases in TRIGGERS.items():
        triggers[name] = float(any((f" {p} " if _WORD_BOUNDED.match(p) else p) in text for p in phrases))
    larger = any(triggers[t] for t in _LARGER)
    smaller = any(triggers[t] for t in _SMALLER)
    direction = 1 if larger and not smaller else -1 if smaller and not larger else 0
    return QuestionContext(text, frozenset(content_words(question)), triggers, direction, len(text.split()),
                           len(mentions.numbers))


def _overlap(words: frozenset[str], column: ColumnProfile | None) -> float:
    return float(len(words & content_words(column.name))) if column is not None else 0.0


def featurize(question: QuestionContext, mentions: Mentions, profile: TableProfile, executed: Sequence[Executed],
              column_cosines: np.ndarray) -> np.ndarray:
    """(len(executed), len(FEATURES)) float64; `column_cosines[j]` is the question's cosine with column j's name."""
    index = {c.sql_name: j for j, c in enumerate(profile.columns)}
    best_cos = float(column_cosines.max()) if len(column_cosines) else 0.0
    cond_rank = {(c.column.sql_name, c.value): i for i, c in enumerate(mentions.conditions)}
    mentioned = {normalize(c.value) for c in mentions.conditions}
    agree = Counter(tuple(sorted(normalize(a) for a in e.answer)) for e in executed)
    x = np.zeros((len(executed), len(FEATURES)), dtype=np.float64)
    n_cols = max(len(profile.columns), 1)
    named = {c.sql_name: _overlap(question.words, c) for c in profile.columns}
    num_named = float(max((named[c.sql_name] for c in profile.columns if c.type == "number"), default=0.0))
    for i, e in enumerate(executed):
        p = e.program
        row = x[i]

        def put(name: str, value: float, row: np.ndarray = row) -> None:
            row[FEATURE_INDEX[name]] = value

        put(f"kind_{p.kind}", 1.0)
        for t, v in question.triggers.items():
            put(f"q_{t}", v)
        _direction_features(put, p, question)
        if p.answer is not None:
            j = index[p.answer.sql_name]
            put("ans_overlap", _overlap(question.words, p.answer))
            put("ans_cos", float(column_cosines[j]))
            put("ans_cos_best", float(column_cosines[j] >= best_cos - 1e-9))
            put("ans_number", float(p.answer.type == "number"))
            put("ans_date", float(p.answer.type == "date"))
            put("ans_position", j / n_cols)
            put("ans_first_col", float(j == 0))
            put("ans_is_cond_col", float(p.condition is not None and p.condition.column.sql_name == p.answer.sql_name))
        if p.sort is not None:
            j = index[p.sort.sql_name]
            put("has_sort", 1.0)
            put("sort_overlap", _overlap(question.words, p.sort))
            put("sort_cos", float(column_cosines[j]))
            put("sort_cos_best", float(column_cosines[j] >= best_cos - 1e-9))
            put("sort_is_ans", float(p.answer is not None and p.answer.sql_name == p.sort.sql_name))
        _condition_features(put, p.condition, p.second, question, cond_rank, column_cosines, index)
        put("n_conditions", float(len(mentions.conditions)))
        put("threshold_number", float(p.number is not None))
        amounts = [parse_amount(normalize(a)) for a in e.answer]
        numbers = [a for a in amounts if a is not None]
        put("res_n", math.log1p(len(e.answer)))
        put("res_number", float(len(numbers) == len(amounts)))
        if numbers:
            put("res_integer", float(all(n == int(n) for n in numbers)))
            put("res_year", float(all(1000 <= n <= 2100 and n == int(n) for n in numbers)))
            put("res_zero", float(any(n == 0 for n in numbers)))
            put("res_negative", float(any(n < 0 for n in numbers)))
        normalized = [normalize(a) for a in e.answer]
        put("res_in_question", float(any(f" {a} " in question.text for a in normalized if a)))
        put("res_is_condition", float(any(a in mentioned for a in normalized)))
        put("res_one", float(numbers == [1.0]))
        # Columns the question names that the program does not use: "how many votes did X get" names the
        # votes column, which COUNT(*) ignores and the lookup of X's votes uses.
        used = {c.sql_name for c in (p.answer, p.sort) if c is not None}
        used |= {c.column.sql_name for c in (p.condition, p.second) if c is not None}
        put("mention_used", float(sum(1 for c in used if named[c] > 0)))
        put("mention_unused", float(sum(1 for c, n in named.items() if n > 0 and c not in used)))
        put("num_col_mentioned", num_named)
        same = agree[tuple(sorted(normalized))]
        put("res_agree", math.log1p(same))
        put("res_agree_share", same / len(executed))
        put("q_words", float(question.n_words))
        put("q_numbers", float(question.n_numbers))
        put("table_rows", math.log1p(profile.n_rows))
        put("table_cols", float(len(profile.columns)))
    return x


_ROW_ORDER = {"first": -1, "last": 1, "previous": -1, "next": 1}


def _direction_features(put: Callable[[str, float], None], p: Program, question: QuestionContext) -> None:
    """Whether the program goes the way the question does: by number (most / least), by row order (first /
    last, before / after) or by frequency."""
    t = question.triggers
    order = t["last"] - t["first"]
    adjacent = t["next"] - t["previous"]
    if p.kind in ("next", "previous"):
        put("dir_adjacent", _ROW_ORDER[p.kind] * adjacent)
    elif p.kind in ("first", "last"):
        put("dir_order", _ROW_ORDER[p.kind] * order)
    elif p.direction:
        sign = 1.0 if p.direction > 0 else -1.0
        if abs(p.direction) == 3:  # a comparison by row order: which came first / later
            put("dir_order", sign * (order + adjacent))
        elif (abs(p.direction) == 2 and p.kind == "comparison") or p.kind == "most_frequent":
            put("dir_count", sign * question.direction)
        else:
            put("dir_agree", sign * question.direction)


def _condition_features(put: Callable[[str, float], None], condition: Condition | None, second: Condition | None,
                        question: QuestionContext, cond_rank: dict[tuple[str, str], int],
                        column_cosines: np.ndarray, index: dict[str, int]) -> None:
    if condition is None:
        return
    put("has_cond", 1.0)
    put("cond_score", condition.score)
    put("cond_exact", float(condition.exact))
    put("cond_words", float(len(content_words(condition.value))))
    put("cond_rank", float(cond_rank.get((condition.column.sql_name, condition.value), 9)))
    put("cond_col_overlap", _overlap(question.words, condition.column))
    put("cond_col_cos", float(column_cosines[index[condition.column.sql_name]]))
    put("cond_number_col", float(condition.column.type == "number"))
    if second is not None:
        put("has_second", 1.0)
        put("second_score", second.score)
