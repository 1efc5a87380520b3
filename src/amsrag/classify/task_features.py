"""The task head's features: cue words of corpus-wide and table questions, and how well the question
matches the best tables of the index (what makes "how many goals did X score in 1998?" a table question
in a corpus that holds the right table, and a text question in one that does not)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from amsrag.tables.base import TableHit

TASK_FEATURE_VERSION = 2

_AGGREGATION_CUES: dict[str, str] = {
    "agg_theme": r"\b(themes?|topics?|subjects?|motifs?|threads?)\b",
    "agg_recurring": r"\b(recurring|recurrent|common(ly)?|frequent(ly)?|repeated(ly)?|recur)\b",
    "agg_overview": r"\b(overall|overview|summar(y|ise|ize|ising|izing)|in general|broadly|high[- ]level|gist)\b",
    "agg_scope": r"\b(corpus|collection|documents|document set|knowledge base|dataset|data set|archive|"
                 r"all (the )?(texts|passages|files|articles|pages|sources)|these (texts|passages|files|articles))\b",
    "agg_across": r"\b(across|throughout|among all|in all of)\b",
    "agg_kinds": r"\bwhat (kinds?|types?|sorts?|categories|areas|fields|domains) of\b",
    "agg_trends": r"\b(trends?|patterns?|tendenc(y|ies)|clusters?|groups of)\b",
    "agg_main": r"\b(main|key|major|principal|central|dominant|primary)\s+(ideas?|points?|themes?|issues?|topics?|"
                r"subjects?|areas?|concerns?|findings?|arguments?)\b",
    "agg_cover": r"\b(cover(s|ed)?|discuss(es|ed)?|deal(s)? with|talk(s)? about|address(es)?)\b",
}
_STRUCTURED_CUES: dict[str, str] = {
    "st_how_many": r"\bhow (many|much)\b",
    "st_number_of": r"\b(number|total|count|sum|amount) of\b|\btotal\b",
    "st_average": r"\b(average|mean|median)\b",
    "st_superlative": r"\b(most|least|highest|lowest|largest|smallest|greatest|fewest|longest|shortest|top|"
                      r"best|worst|biggest|maximum|minimum)\b",
    "st_compare": r"\b(more|less|fewer|greater|higher|lower|larger|smaller) than\b|\bat least\b|\bat most\b",
    "st_order": r"\b(first|last|next|previous|before|after|earlier|later|preceding|following|consecutive)\b",
    "st_difference": r"\b(difference|differ|how (much|many) (more|less|fewer))\b",
    "st_listing": r"\b(listed|list|table|chart|row|column|ranked|rank|position|placed)\b",
    "st_which_or": r"\b(which|who)\b.*\bor\b",
    "st_year": r"\b(which|what) (year|season|date|month)\b|\b(1[89]\d\d|20\d\d)\b",
}
_WH = ("what", "which", "who", "how", "when", "where", "why", "is", "did", "does")
_TOKEN = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an the of in on at to for by with from and or is are was were be been being do does did what which who "
    "whom whose how when where why that this these those it its as than then there their they he she his her "
    "him them i you we our your not no yes has have had will would can could should many much more most less"
)
_STOP = frozenset(_STOP_WORDS.split())

# BM25 scores are left out on purpose: their scale moves with the number of tables (IDF), so a head
# trained on a thousand tables would misread an index holding two. These shares do not.
TABLE_FEATURES = ("has_tables", "value_share", "cell_matches", "column_share", "columns_matched",
                  "description_share", "unmatched_share", "second_value_share")
FEATURE_NAMES: tuple[str, ...] = (
    *_AGGREGATION_CUES, *_STRUCTURED_CUES, *(f"wh_{w}" for w in _WH), "words", "has_digit", *TABLE_FEATURES)
_AGG = [re.compile(p) for p in _AGGREGATION_CUES.values()]
_STRUCT = [re.compile(p) for p in _STRUCTURED_CUES.values()]


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch)).lower()


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(normalise(text))


def content_tokens(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in _STOP and len(t) > 1]


def _ngrams(words: Sequence[str], n_max: int = 4) -> set[str]:
    return {" ".join(words[i:i + n]) for n in range(1, n_max + 1) for i in range(len(words) - n + 1)}


def cue_features(question: str) -> list[float]:
    q = normalise(question)
    words = tokens(question)
    first = words[0] if words else ""
    out = [float(bool(p.search(q))) for p in _AGG] + [float(bool(p.search(q))) for p in _STRUCT]
    out += [float(first == w) for w in _WH]
    out += [min(len(words), 40) / 20.0, float(any(ch.isdigit() for ch in q))]
    return out


def _value_tokens(hit: TableHit, grams: set[str]) -> tuple[set[str], int]:
    """The tokens of a table's profiled cell values, and how many whole cell values the question contains."""
    value_tokens: set[str] = set()
    cells = 0
    for col in hit.profile.columns:
        for v in col.values:
            value_tokens.update(tokens(v))
            if col.type == "text" and " ".join(tokens(v)) in grams:
                cells += 1
    return value_tokens, cells


def table_features(question: str, hits: Sequence[TableHit]) -> list[float]:
    """How well the question matches its best tables; all zero when the index holds none."""
    if not hits:
        return [0.0] * len(TABLE_FEATURES)
    top = hits[0]
    q_words = set(tokens(question))
    q_content = set(content_tokens(question))
    grams = _ngrams(tokens(question))
    value_tokens, cells = _value_tokens(top, grams)
    names = [set(content_tokens(c.name)) for c in top.profile.columns]
    name_tokens = set().union(*names) if names else set()
    matched = [n for n in names if n and n <= q_words]
    described = set(tokens(top.profile.description()))
    n_q = max(len(q_content), 1)
    second = _value_tokens(hits[1], grams)[0] if len(hits) > 1 else set()
    return [
        1.0,
        len(q_content & value_tokens) / n_q,
        min(cells, 3) / 3.0,
        len(matched) / max(len(names), 1),
        min(len(matched), 3) / 3.0,
        len(q_content & described) / n_q,
        len(q_content - value_tokens - name_tokens - described) / n_q,
        len(q_content & second) / n_q,
    ]


def task_features(question: str, hits: Sequence[TableHit]) -> np.ndarray:
    return np.asarray(cue_features(question) + table_features(question, hits), dtype=np.float64)


def task_features_batch(questions: Sequence[str], hits: Sequence[Sequence[TableHit]]) -> np.ndarray:
    rows = [task_features(q, h) for q, h in zip(questions, hits, strict=True)]
    return np.vstack(rows) if rows else np.zeros((0, len(FEATURE_NAMES)))
