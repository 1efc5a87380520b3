"""Cheap lexical and structural features of a question (a few microseconds each).

They add what a mean-pooled sentence embedding blurs: comparison patterns, nested relative
clauses and possessive chains (bridges), how many named things the question mentions, the wh-type.
Style cues of one data set (trailing "?", lower-case NQ questions) are deliberately left out: they
would tell the data set, not the hop count. `FEATURE_VERSION` and `FEATURE_NAMES` are written into
the artifact; a load with a mismatching spec is refused.

Version 2 adds structure that holds across data sets (the hop head is judged leave-one-data-set-out):
relation chains ("the director of the film that ..."), "of ... of" nesting, entities described instead
of named ("the Mexican boxer born on ..."), named-entity counts, and a two-entity comparison flag, which
also keeps such questions out of zero_hop (`is_comparison`): they need both entities' passages by
construction, whatever a generator happens to guess.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

FEATURE_VERSION = 2
# The classifier's budget: features (and the embedding the classifier computes itself) see at most this many
# characters of a question. The encoder reads 256 word pieces at most anyway; a few of the patterns below are
# quadratic in the length of a question without "?" (100 kB of words: 17 s), 2,000 characters: < 10 ms.
# The service and the engine refuse longer questions (`serve.max_question_chars`, 2,000 by default).
MAX_QUESTION_CHARS = 2000
EMPTY_QUESTION = ("query is empty: the question holds only white space or control characters (an empty question "
                  "cannot be answered)")


def bounded(question: str) -> str:
    """The part of `question` the classifier reads: its first `MAX_QUESTION_CHARS` characters."""
    return question[:MAX_QUESTION_CHARS]


def is_blank(text: str) -> bool:
    """Nothing but white space and control / format characters (NUL, zero-width spaces, ...)."""
    return not any(not c.isspace() and not unicodedata.category(c).startswith("C") for c in text)


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
_RELATION_NOUNS = (
    r"director|father|mother|spouse|wife|husband|son|daughter|child|children|founder|author|creator|composer|"
    r"performer|producer|writer|owner|publisher|manufacturer|developer|capital|headquarters|birthplace|"
    r"sibling|brother|sister|uncle|aunt|grandfather|grandmother|nephew|niece|successor|predecessor|"
    r"leader|president|mayor|governor|head|member|designer|architect|editor|singer|star|"
    r"lyricist|screenwriter|coach|captain|team|county|country|city|state|province|district|"
    r"university|school|college|company|label|band|album|film|novel|book|show|series|song")
_CHAIN = re.compile(rf"\bthe (?:\w+ )?(?:{_RELATION_NOUNS})s? (?:of|for|in|from|behind) (?:the |a |an )?", re.I)
_OF_OF = re.compile(r"\bof\b[^?,]{1,40}?\bof\b", re.I)
_DESCRIBED = re.compile(
    r"\b(the|a|an) (?:[A-Za-z-]+ ){0,3}?(?:man|woman|person|actor|actress|singer|band|company|city|country|town|"
    r"film|movie|team|player|author|group|artist|writer|musician|politician|organization|organisation|club|"
    r"school|university|show|series|album|song|novel|book|building|state|river|station)\b,? "
    r"(who|that|which|whose|where|in which|known)\b", re.I)
_DESCRIBED_BY_EVENT = re.compile(
    r"\b(born|founded|established|formed|released|located|based|named)\b (in|on|at|by|after|for)\b", re.I)
# a run of capitalised words, possibly joined by "of"/"the"/"de"/...; not the question's first word
_NAME = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][\w'’.-]*(?: (?:(?:of|the|de|von|van|der|du|la|le) )?[A-Z][\w'’.-]*)*")
_TWO_SIDES = re.compile(r"\b(both|same|either|neither|in common|together|also|too)\b", re.I)
_CHOICE = re.compile(r"\b\w[^?]*?,? or \w", re.I)
_BRIDGE_WORDS = re.compile(r"\b(this|that|the same|which also|who also|and what|and which|and who)\b", re.I)

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
    "relation_chains",
    "of_of",
    "described_entity",
    "described_by_event",
    "names",
    "two_entity_comparison",
    "two_entities_shared",
    "bridge_words",
    "commas",
    "conjunctions",
)
N_FEATURES = len(FEATURE_NAMES)
COMPARISON = FEATURE_NAMES.index("two_entity_comparison")  # the column `is_comparison` fills


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


def is_comparison(question: str) -> bool:
    """Two named entities set against each other ("Who was born first, A or B?", "Are A and B both ...?")."""
    question = bounded(question)
    names = len(_NAME.findall(question))
    if names < 2:
        return False
    if _CHOICE.search(question) and (_COMPARATIVE.search(question) or _TWO_SIDES.search(question)):
        return True
    if _COMPARATIVE.search(question) and re.search(r"\bthan\b", question, re.I):
        return True
    return bool(_TWO_SIDES.search(question)) and _wh_type(_WORD.findall(question)) == "yesno"


def question_features(question: str) -> np.ndarray:
    """The feature row of `question` (of its first `MAX_QUESTION_CHARS` characters)."""
    question = bounded(question)
    words = _WORD.findall(question)
    names = len(_NAME.findall(question))
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
        float(len(_CHAIN.findall(question))),
        float(len(_OF_OF.findall(question))),
        float(len(_DESCRIBED.findall(question))),
        float(len(_DESCRIBED_BY_EVENT.findall(question))),
        float(names),
        1.0 if is_comparison(question) else 0.0,
        1.0 if _TWO_SIDES.search(question) and names >= 2 else 0.0,
        float(len(_BRIDGE_WORDS.findall(question))),
        float(question.count(",")),
        float(sum(1 for w in words if w.lower() in ("and", "but"))),
    ]
    return np.asarray(values, dtype=np.float32)


def features_batch(questions: Sequence[str]) -> np.ndarray:
    if not questions:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    return np.stack([question_features(q) for q in questions])
