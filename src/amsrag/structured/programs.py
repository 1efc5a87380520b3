"""Candidate programs for a question over one table: SQL in the layout of `tables.table`, each with a kind.

The kinds follow the floating parser (Pasupat & Liang 2015) and its successors: lookup, filtered count,
superlative (argmax / argmin over a `_num` column, optionally filtered), most / least frequent value,
comparison of two matched values, difference of two rows' numbers or counts, first / last row, next /
previous row, sum / average / max / min (optionally filtered), count of distinct values, and counts of rows
above or below a number in the question.

Programs are built from what the question mentions: columns whose names share words with it, and cell values
equal (case-insensitively) to one of its n-grams — found with one `SELECT DISTINCT` per column through the
runner (the table is never read into Python), plus a fuzzy match against the profile's most frequent values.
Every statement is a SELECT with a LIMIT, calling only functions of `ALLOWED_FUNCTIONS`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amsrag.tables.base import SqlRunner
from amsrag.tables.table import ColumnProfile, TableProfile, parse_number

MAX_CANDIDATES = 300
MAX_CONDITIONS = 6  # matched (column, value) pairs kept, best first
MAX_NGRAM = 8
MATCH_LIMIT = 20  # distinct matching cells read per column
ANSWER_LIMIT = 50  # rows a row-returning program may give
WIDE_TABLE = 8  # above this many columns only mentioned and leading columns are answer columns

_STOP_TEXT = (
    "a an the of in on at to for by with from and or is are was were be been what which who whom whose when "
    "where how many much did do does has have had that this these those it its as than then there their they "
    "he she his her name names list tell me give total number")
STOPWORDS = frozenset(_STOP_TEXT.split())
_TOKEN = re.compile(r"\w+")
_QUESTION_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_NUMBER_TEXT = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty")
_NUMBER_WORDS = {w: float(i) for i, w in enumerate(_NUMBER_TEXT.split())}

KINDS: tuple[str, ...] = (
    "lookup", "count", "count_all", "count_distinct", "count_threshold", "superlative", "most_frequent",
    "comparison", "difference", "count_difference", "first", "last", "next", "previous", "sum", "average",
    "max", "min",
)


def fold(text: str) -> str:
    """Lower case without diacritics (what question and cell words are compared in)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).lower()


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(fold(text))


def stem(word: str) -> str:
    """A light plural strip, enough for "goals" ~ "goal", "matches" ~ "match"."""
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in tokens(text) if w not in STOPWORDS}


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class Condition:
    """A cell value the question mentions: `column = value`."""

    column: ColumnProfile
    value: str
    score: float  # share of the cell's words the question holds (1.0: the whole cell)
    exact: bool  # equal to a question n-gram as a whole

    def sql(self) -> str:
        return f"{self.column.sql_name} = {quote(self.value)}"


@dataclass(frozen=True, slots=True)
class Program:
    kind: str
    sql: str
    answer: ColumnProfile | None = None  # the column whose cells (or numbers) the answer is
    condition: Condition | None = None
    second: Condition | None = None  # comparison / difference: the other value
    sort: ColumnProfile | None = None  # superlative / comparison / threshold: the number column
    direction: int = 0  # +1 largest / after / above, -1 smallest / before / below
    number: float | None = None  # count_threshold: the question's number
    returns_rows: bool = False  # the statement's second column is row_id
    rows_sql: str = ""  # for aggregates: the rows the answer came from

    def describe(self) -> str:
        parts = [self.kind]
        if self.answer is not None:
            parts.append(self.answer.name)
        if self.sort is not None:
            parts.append(("largest " if self.direction > 0 else "smallest ") + self.sort.name)
        for c in (self.condition, self.second):
            if c is not None:
                parts.append(f"{c.column.name} {c.value}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Mentions:
    """What of the table the question mentions."""

    conditions: tuple[Condition, ...]
    numbers: tuple[float, ...]
    column_overlap: dict[str, int]  # sql_name → content words shared with the question


def question_ngrams(question: str) -> list[str]:
    """Lower-cased n-grams of the question's words (punctuation stripped at word ends), without those made
    of stop words only."""
    words = [w.strip("?,.!;:\"'()") for w in question.lower().split()]
    words = [w for w in words if w]
    grams: set[str] = set()
    for n in range(1, MAX_NGRAM + 1):
        for i in range(len(words) - n + 1):
            gram = words[i:i + n]
            if all(w in STOPWORDS for w in gram):
                continue
            grams.add(" ".join(gram))
    for q in re.findall(r'"([^"]+)"', question):
        grams.add(q.lower().strip())
    return sorted(grams)


def question_numbers(question: str) -> tuple[float, ...]:
    out: list[float] = []
    for m in _QUESTION_NUMBER.finditer(question):
        try:
            out.append(float(m.group(0).replace(",", "")))
        except ValueError:
            continue
    out.extend(_NUMBER_WORDS[w] for w in tokens(question) if w in _NUMBER_WORDS)
    return tuple(dict.fromkeys(out))


def _fuzzy_score(cell_words: list[str], question_set: set[str]) -> float:
    """Share of the cell's content words that the question holds."""
    content = [w for w in cell_words if w not in STOPWORDS]
    if not content:
        return 0.0
    hit = sum(w in question_set for w in content)
    if not any(w in question_set and not w.isdigit() for w in content):
        return 0.0
    return hit / len(content)


def _covered(column: ColumnProfile) -> bool:
    """The profile holds every distinct value of the column, so matching needs no query."""
    return column.n_distinct <= len(column.values)


def _scan_matches(question_grams: Sequence[str], numbers: Sequence[float], profile: TableProfile,
                  runner: SqlRunner) -> list[tuple[ColumnProfile, str]]:
    """Cells of the columns the profile does not cover that equal a question n-gram (text; case-insensitively)
    or one of its numbers (`_num`), in one pass over the table."""
    text_cols = [c for c in profile.columns if not _covered(c) and c.type != "number"]
    num_cols = [c for c in profile.columns if not _covered(c) and c.type == "number"] if numbers else []
    if not (text_cols and question_grams) and not num_cols:
        return []
    nums = ", ".join(repr(n) for n in numbers)
    tests = []
    for c in text_cols:
        # n-grams longer than the column's longest frequent value (plus slack) cannot be its cells, mostly
        longest = max((len(v.split()) for v in c.values), default=MAX_NGRAM) + 2
        grams = [g for g in question_grams if len(g.split()) <= longest]
        tests.append(f"{c.sql_name} COLLATE NOCASE IN ({', '.join(quote(g) for g in grams)})" if grams else "0")
    tests += [f"{c.num_name} IN ({nums})" for c in num_cols]
    cols = [*text_cols, *num_cols]
    sql = (f"SELECT {', '.join(c.sql_name for c in cols)} FROM {profile.sql_name} WHERE {' OR '.join(tests)} "
           f"LIMIT {MATCH_LIMIT * len(cols)}")
    gram_set = set(question_grams)
    out: dict[tuple[str, str], ColumnProfile] = {}
    for row in runner.run(sql).rows:
        for col, cell in zip(cols, row, strict=True):
            value = str(cell)
            if (col.type == "number" and parse_number(value) in numbers) or value.lower() in gram_set:
                out.setdefault((col.sql_name, value), col)
    return [(col, value) for (_, value), col in out.items()]


def find_mentions(question: str, profile: TableProfile, runner: SqlRunner) -> Mentions:
    """Cells equal to question n-grams and fuzzy matches among the profile's values; the best MAX_CONDITIONS,
    whole and longer matches first. Columns whose distinct values the profile holds are matched in Python;
    the others in one query through the runner (the table is never read into Python)."""
    grams = question_ngrams(question)
    gram_set = set(grams)
    numbers = question_numbers(question)
    qwords = tokens(question)
    qset = {w for w in qwords if w not in STOPWORDS}
    found: dict[tuple[str, str], Condition] = {}
    for col, value in _scan_matches(grams, numbers, profile, runner):
        found[(col.sql_name, value)] = Condition(col, value, 1.0, True)
    for col in profile.columns:
        for value in col.values:
            if (col.sql_name, value) in found:
                continue
            if value.lower() in gram_set:
                found[(col.sql_name, value)] = Condition(col, value, 1.0, True)
            elif col.type != "number":
                score = _fuzzy_score(tokens(value), qset)
                if score >= 0.5:
                    found[(col.sql_name, value)] = Condition(col, value, score, False)
    ranked = sorted(found.values(), key=lambda c: (-c.score, -len(content_words(c.value)) - c.exact,
                                                   -len(c.value), c.column.sql_name, c.value))
    # A cell that is a single digit matched in a number column is rarely what the question is about.
    ranked = [c for c in ranked if not (c.column.type == "number" and len(c.value) <= 1 and len(ranked) > 2)]
    overlap = {c.sql_name: len(content_words(c.name) & content_words(question)) for c in profile.columns}
    return Mentions(tuple(ranked[:MAX_CONDITIONS]), numbers, overlap)


TOTAL_MARKERS = frozenset({"total", "totals", "grand total", "total:"})


class _Builder:
    """Collects distinct programs. `t` is what programs select from: the table without its summary rows
    ("Total" cells, which would win every superlative and count as a row), `raw` the table itself (for
    programs conditioned on the summary row: "how many gold medals in total" is the Total row's cell)."""

    def __init__(self, profile: TableProfile) -> None:
        self.raw = profile.sql_name
        self.markers: set[str] = set()
        filters = []
        for c in profile.columns:
            marked = [v for v in c.values if v.lower() in TOTAL_MARKERS] if c.type != "number" else []
            if marked:
                self.markers.update(marked)
                filters.append(f"{c.sql_name} NOT IN ({', '.join(quote(v) for v in marked)})")
        self.t = (f"(SELECT * FROM {self.raw} WHERE {' AND '.join(filters)}) AS {self.raw}" if filters
                  else self.raw)
        self.programs: list[Program] = []
        self.seen: set[str] = set()

    def add(self, program: Program) -> None:
        if program.sql not in self.seen:
            self.seen.add(program.sql)
            self.programs.append(program)


def _where(*parts: str) -> str:
    kept = [p for p in parts if p]
    return " WHERE " + " AND ".join(kept) if kept else ""


def answer_columns(profile: TableProfile, mentions: Mentions) -> list[ColumnProfile]:
    cols = list(profile.columns)
    if len(cols) <= WIDE_TABLE:
        return cols
    keep = {c.sql_name for c in cols[:3]} | {s for s, n in mentions.column_overlap.items() if n > 0}
    keep |= {c.column.sql_name for c in mentions.conditions}
    return [c for c in cols if c.sql_name in keep]


def number_columns(profile: TableProfile) -> list[ColumnProfile]:
    """Columns whose `_num` copy is worth ordering or summing: number and date columns, and text columns
    whose frequent values mostly hold a number ("12 (3)", "2–1")."""
    out = []
    for c in profile.columns:
        numeric_text = bool(c.values) and sum(bool(re.search(r"\d", v)) for v in c.values) >= 0.8 * len(c.values)
        if c.type in ("number", "date") or numeric_text:
            out.append(c)
    return out


def _row_programs(b: _Builder, profile: TableProfile, answers: Sequence[ColumnProfile], nums: Sequence[ColumnProfile],
                  conditions: Sequence[Condition]) -> None:
    for cond in conditions:
        t = b.raw if cond.value in b.markers else b.t
        for x in answers:
            if x.sql_name != cond.column.sql_name:
                b.add(Program("lookup", f"SELECT {x.sql_name}, row_id FROM {t}{_where(cond.sql())} "
                                        f"ORDER BY row_id LIMIT {ANSWER_LIMIT}", x, cond, returns_rows=True))
            for kind, op in (("next", "+"), ("previous", "-")):
                b.add(Program(kind, f"SELECT {x.sql_name}, row_id FROM {t} WHERE row_id = (SELECT row_id FROM {t}"
                                    f"{_where(cond.sql())} ORDER BY row_id LIMIT 1) {op} 1 LIMIT 1",
                              x, cond, returns_rows=True))
            if x.sql_name != cond.column.sql_name:
                for kind, order in (("first", ""), ("last", " DESC")):
                    b.add(Program(kind, f"SELECT {x.sql_name}, row_id FROM {t}"
                                        f"{_where(cond.sql(), f'{x.sql_name} != ' + quote(''))} "
                                        f"ORDER BY row_id{order} LIMIT 1", x, cond, returns_rows=True))
        b.add(Program("count", f"SELECT COUNT(*) FROM {t}{_where(cond.sql())} LIMIT 1", None, cond,
                      rows_sql=f"SELECT row_id FROM {t}{_where(cond.sql())} ORDER BY row_id LIMIT {ANSWER_LIMIT}"))
        for s in nums:
            if s.sql_name == cond.column.sql_name:
                continue
            for fn, kind in (("SUM", "sum"), ("AVG", "average"), ("MAX", "max"), ("MIN", "min")):
                b.add(Program(kind, f"SELECT {fn}({s.num_name}) FROM {t}{_where(cond.sql())} LIMIT 1", s, cond,
                              rows_sql=f"SELECT row_id FROM {t}{_where(cond.sql(), f'{s.num_name} IS NOT NULL')} "
                                       f"ORDER BY row_id LIMIT {ANSWER_LIMIT}"))


def _superlatives(b: _Builder, answers: Sequence[ColumnProfile], nums: Sequence[ColumnProfile],
                  conditions: Sequence[Condition]) -> None:
    t = b.t
    filters: list[Condition | None] = [None, *conditions[:2]]
    for cond in filters:
        where = cond.sql() if cond is not None else ""
        for s in nums:
            if cond is not None and s.sql_name == cond.column.sql_name:
                continue
            for fn, direction in (("MAX", 1), ("MIN", -1)):
                best = f"{s.num_name} = (SELECT {fn}({s.num_name}) FROM {t}{_where(where)})"
                for x in answers:
                    b.add(Program("superlative", f"SELECT {x.sql_name}, row_id FROM {t}{_where(best, where)} "
                                                 f"ORDER BY row_id LIMIT {ANSWER_LIMIT}",
                                  x, cond, sort=s, direction=direction, returns_rows=True))
        for x in answers:
            if cond is not None and x.sql_name == cond.column.sql_name:
                continue
            for kind, order in (("first", ""), ("last", " DESC")):
                not_empty = f"{x.sql_name} != ''"
                b.add(Program(kind, f"SELECT {x.sql_name}, row_id FROM {t}{_where(where, not_empty)}"
                                    f" ORDER BY row_id{order} LIMIT 1", x, cond, returns_rows=True))


def _frequency(b: _Builder, profile: TableProfile, answers: Sequence[ColumnProfile],
               nums: Sequence[ColumnProfile]) -> None:
    t = b.t
    for x in answers:
        if x.type == "number" or x.n_distinct >= profile.n_rows or x.n_distinct <= 1:
            continue
        for order, direction in ((" DESC", 1), ("", -1)):
            b.add(Program("most_frequent", f"SELECT {x.sql_name} FROM {t} WHERE {x.sql_name} != '' GROUP BY "
                                           f"{x.sql_name} ORDER BY COUNT(*){order}, MIN(row_id) LIMIT 1",
                          x, direction=direction))
    for x in answers:
        b.add(Program("count_distinct", f"SELECT COUNT(DISTINCT {x.sql_name}) FROM {t} WHERE {x.sql_name} != '' "
                                        f"LIMIT 1", x))
    for s in nums:
        for fn, kind in (("SUM", "sum"), ("AVG", "average"), ("MAX", "max"), ("MIN", "min")):
            b.add(Program(kind, f"SELECT {fn}({s.num_name}) FROM {t} LIMIT 1", s))
    b.add(Program("count_all", f"SELECT COUNT(*) FROM {t} LIMIT 1",
                  rows_sql=f"SELECT row_id FROM {t} ORDER BY row_id LIMIT {ANSWER_LIMIT}"))


def _pairs(b: _Builder, nums: Sequence[ColumnProfile], conditions: Sequence[Condition]) -> None:
    t = b.t
    for i, c1 in enumerate(conditions):
        for c2 in conditions[i + 1:]:
            if c1.column.sql_name != c2.column.sql_name:
                continue
            y = c1.column
            both = f"{y.sql_name} IN ({quote(c1.value)}, {quote(c2.value)})"
            for s in nums:
                if s.sql_name == y.sql_name:
                    continue
                for order, direction in ((" DESC", 1), ("", -1)):
                    b.add(Program("comparison", f"SELECT {y.sql_name}, row_id FROM {t} WHERE {both} AND "
                                                f"{s.num_name} IS NOT NULL ORDER BY {s.num_name}{order}, row_id "
                                                "LIMIT 1",
                                  y, c1, c2, sort=s, direction=direction, returns_rows=True))
                for a, z in ((c1, c2), (c2, c1)):
                    one = f"(SELECT {s.num_name} FROM {t} WHERE {a.sql()} ORDER BY row_id LIMIT 1)"
                    two = f"(SELECT {s.num_name} FROM {t} WHERE {z.sql()} ORDER BY row_id LIMIT 1)"
                    b.add(Program("difference", f"SELECT {one} - {two} LIMIT 1", s, a, z, sort=s,
                                  rows_sql=f"SELECT row_id FROM {t} WHERE {both} ORDER BY row_id LIMIT {ANSWER_LIMIT}"))
            for order, direction in ((" DESC", 1), ("", -1)):
                b.add(Program("comparison", f"SELECT {y.sql_name}, MIN(row_id) FROM {t} WHERE {both} GROUP BY "
                                            f"{y.sql_name} ORDER BY COUNT(*){order}, MIN(row_id) LIMIT 1",
                              y, c1, c2, direction=direction * 2, returns_rows=True))
                b.add(Program("comparison", f"SELECT {y.sql_name}, row_id FROM {t} WHERE {both} ORDER BY row_id"
                                            f"{order} LIMIT 1", y, c1, c2, direction=direction * 3, returns_rows=True))
            n1 = f"(SELECT COUNT(*) FROM {t} WHERE {c1.sql()})"
            n2 = f"(SELECT COUNT(*) FROM {t} WHERE {c2.sql()})"
            b.add(Program("count_difference", f"SELECT ABS({n1} - {n2}) LIMIT 1", None, c1, c2,
                          rows_sql=f"SELECT row_id FROM {t} WHERE {both} ORDER BY row_id LIMIT {ANSWER_LIMIT}"))


def _thresholds(b: _Builder, nums: Sequence[ColumnProfile], numbers: Iterable[float]) -> None:
    t = b.t
    for n in list(numbers)[:3]:
        literal = repr(int(n)) if n == int(n) else repr(n)
        for s in nums:
            for op, direction in ((">", 1), (">=", 2), ("<", -1), ("<=", -2)):
                where = f"{s.num_name} {op} {literal}"
                b.add(Program("count_threshold", f"SELECT COUNT(*) FROM {t} WHERE {where} LIMIT 1", s, sort=s,
                              direction=direction, number=n,
                              rows_sql=f"SELECT row_id FROM {t} WHERE {where} ORDER BY row_id LIMIT {ANSWER_LIMIT}"))


def enumerate_programs(profile: TableProfile, mentions: Mentions) -> list[Program]:
    """The candidate programs, at most MAX_CANDIDATES, most specific (built on matched values) first."""
    b = _Builder(profile)
    answers = answer_columns(profile, mentions)
    nums = number_columns(profile)
    conditions = mentions.conditions
    _frequency(b, profile, answers, nums)
    _pairs(b, nums, conditions)
    _row_programs(b, profile, answers, nums, conditions[:4])
    _thresholds(b, nums, mentions.numbers)
    _superlatives(b, answers, nums, conditions)
    return b.programs[:MAX_CANDIDATES]


def candidate_programs(question: str, profile: TableProfile, runner: SqlRunner) -> tuple[Mentions, list[Program]]:
    mentions = find_mentions(question, profile, runner)
    return mentions, enumerate_programs(profile, mentions)
