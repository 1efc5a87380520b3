"""Cheap lexical and structural features of a question (a few microseconds each).

They add what a mean-pooled sentence embedding blurs: comparison patterns, nested relative
clauses and possessive chains (bridges), how many named things the question mentions, the wh-type.
Style cues of one data set (trailing "?", lower-case NQ questions) are deliberately left out: they
would tell the data set, not the hop count. `FEATURE_VERSION` and `FEATURE_NAMES` are written into
the artifact; a load with a mismatching spec is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

FEATURE_VERSION = 1

WH_TYPES: tuple[str, ...] = ("what", "who", "when", "where", "which", "how", "why", "yesno", "other")
_YESNO = frozenset({"is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will",
                    "would", "should"})
_WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")
_COMPARATIVE = re.compile(
    r"\b(older|younger|earlier|later|first|longer|shorter|larger|bigger|smaller|higher|lower|taller|more|less|"
    r"fewer|greater|newer|closer|farther|further|oldest|youngest|earliest)\b", re.I)
_SAME_BOTH = re.compile(r"\b(both|same|either|neither|in common|also)\b", re.I)
_OR_CHOICE = re.compile(r"\b\w+\b[^?]*\bor\b", re.I)
_RELATIVE = re.compile(r"\b(that|which|who|whom|whose|where|when|what)\b", re.I)
_OF_THE = re.compile(r"\bof (the|a|an)\b", re.I)
_POSSESSIVE = re.compile(r"\w(['’]s|s['’])(?=\s)")
_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”|\([^)]*\)")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_HOP_VERBS = re.compile(
    r"\b(born|died|founded|directed|wrote|written|composed|performed|produced|released|located|created|"
    r"played|starred|married|father|mother|spouse|director|author|performer|composer|founder|nationality|"
    r"country|birthplace|headquarter\w*)\b", re.I)

FEATURE_NAMES: tuple[str, ...] = (
    "log_words",
    "cap_spans",
    "quoted_or_paren",
    "comparative",
    "same_both",
    "or_choice",
    "relative_words",
    "of_the",
    "possessive",
    "years",
    "relation_words",
    *(f"wh_{w}" for w in WH_TYPES),
)
N_FEATURES = len(FEATURE_NAMES)


def _wh_type(words: list[str]) -> str:
    if not words:
        return "other"
    first = words[0].lower()
    for w in words[:4]:  # "In which year ...", "The director of X was born when?"
        lw = w.lower()
        if lw in WH_TYPES[:7]:
            return lw
    if first in _YESNO:
        return "yesno"
    return "other"


def _capitalised_spans(words: list[str]) -> int:
    """Runs of capitalised words, not counting the first word of the question."""
    spans, inside = 0, False
    for i, w in enumerate(words):
        cap = w[:1].isupper() and i > 0
        if cap and not inside:
            spans += 1
        inside = cap
    return spans


def question_features(question: str) -> np.ndarray:
    words = _WORD.findall(question)
    wh = _wh_type(words)
    relative = len(_RELATIVE.findall(question)) - (1 if wh in ("what", "who", "when", "where", "which") else 0)
    values = [
        math.log1p(len(words)),
        float(_capitalised_spans(words)),
        float(len(_QUOTED.findall(question))),
        float(len(_COMPARATIVE.findall(question))),
        float(len(_SAME_BOTH.findall(question))),
        1.0 if _OR_CHOICE.search(question) else 0.0,
        float(max(relative, 0)),
        float(len(_OF_THE.findall(question))),
        float(len(_POSSESSIVE.findall(question + " "))),
        float(len(_YEAR.findall(question))),
        float(len(_HOP_VERBS.findall(question))),
        *(1.0 if wh == w else 0.0 for w in WH_TYPES),
    ]
    return np.asarray(values, dtype=np.float32)


def features_batch(questions: Sequence[str]) -> np.ndarray:
    if not questions:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    return np.stack([question_features(q) for q in questions])
