"""Features of the citation-support audit: does the cited text support the answer to the question?

No NLI model runs offline here, so the signal is built from what amsrag has:
- reader (`READER_FEATURES`): the span reader's probability and score of the answer's best occurrence in
  the cited passages (`SpanReader.answer_support`), relative to the best span the reader sees there, and
  whether the answer could be read as a span at all (yes / no answers: the reader's answer-type head);
- text (`TEXT_FEATURES`): answer-string presence (whole and per token) in the cited text, the question's
  key entities (capitalised spans, quoted strings, dates, titles: no NER model, so an audit loads no spaCy)
  and content terms covered by the cited text and by the sentences holding the answer, the answer's shape
  against the expected answer type, and for a multi-hop question a bridge between the cited passages
  (`correct.sufficiency.find_bridge`);
- documentation (`doc_default`, issue 37): for a question asking for a default, whether the answer is the
  default the cited text states for the setting the question names (`generate.doc_cues.default_answers`),
  another default it states, or none: the reader barely reads "Default: false" lines, and the wrong answers
  there are the other values of the same passage (its "Possible values", its "Type:" line) or another
  setting's default.
An answer the reader cannot read (Chinese) is audited on the text features alone (`text_only`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from amsrag.correct.evaluator import passage_field
from amsrag.correct.sufficiency import find_bridge
from amsrag.correct.text import answer_type, content_terms, entity_coverage, query_entities
from amsrag.generate.metrics import normalize_answer
from amsrag.generate.reader_spans import SpanSupport
from amsrag.indexes.entities import entity_key
from amsrag.text.questions import is_yesno_question, question_options
from amsrag.text.sentences import split_sentences
from amsrag.types import Passage

# 2: question entities and bridge entities without spaCy (`ner=False`), so auditing loads no NER model
# 3: `doc_default` (issue 37)
FEATURE_VERSION = 3
READER_FEATURES: tuple[str, ...] = ("r_prob", "r_logit", "r_rel", "r_found")
TEXT_FEATURES: tuple[str, ...] = (
    "ans_exact", "ans_tok_cov", "ans_in_question", "yesno", "type_ok", "ent_cov", "ent_min", "has_ent",
    "term_cov", "sent_cov", "sent_ent", "multi_hop", "bridge", "n_cited", "ans_len", "doc_default",
)
FEATURE_NAMES: tuple[str, ...] = READER_FEATURES + TEXT_FEATURES
N_TEXT = len(TEXT_FEATURES)

Source = Literal["reader-span", "reader-yesno", "reader-absent", "text"]
_DIGIT = re.compile(r"\d")
_MONTHS = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b", re.I)
_NUMBER_WORDS = frozenset({"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                           "twelve", "hundred", "thousand", "million", "billion", "dozen", "several", "first",
                           "second", "third"})


@dataclass(frozen=True, slots=True)
class AuditFeatures:
    """One (question, answer, cited passages) row: the values in `FEATURE_NAMES` order, and where the
    reader features came from (`text`: no reader ran; they are zeros and the text-only model scores)."""

    values: np.ndarray
    source: Source

    def named(self) -> dict[str, float]:
        return {n: round(float(v), 4) for n, v in zip(FEATURE_NAMES, self.values, strict=True)}


def reader_features(support: SpanSupport | None, top_prob: float) -> tuple[list[float], Source]:
    """`READER_FEATURES` from the reader's support of the answer (None: no reader, zeros)."""
    if support is None:
        return [0.0] * len(READER_FEATURES), "text"
    if not support.found:
        return [0.0, -20.0, 0.0, 0.0], "reader-absent"
    yesno = normalize_answer(support.answer) in ("yes", "no")
    rel = support.prob if yesno else min(1.0, support.prob / max(top_prob, 1e-6))
    return ([support.prob, max(-20.0, min(20.0, support.score)), rel, 1.0],
            "reader-yesno" if yesno else "reader-span")


def _answer_regex(answer: str) -> re.Pattern[str] | None:
    tokens = normalize_answer(answer).split()
    if not tokens:
        return None
    return re.compile(r"(?<!\w)" + r"\s+".join(re.escape(t) for t in tokens) + r"(?!\w)")


def _type_ok(question: str, answer: str) -> float:
    norm = normalize_answer(answer)
    if norm in ("yes", "no"):
        return 1.0 if is_yesno_question(question) else 0.0
    options = question_options(question)
    if options is not None:
        return 1.0 if any(normalize_answer(o) == norm or norm in normalize_answer(o) for o in options) else 0.5
    kind = answer_type(question)
    words = set(norm.split())
    if kind == "date":
        return 1.0 if _DIGIT.search(answer) or _MONTHS.search(answer) else 0.0
    if kind == "number":
        return 1.0 if _DIGIT.search(answer) or words & _NUMBER_WORDS else 0.0
    if kind in ("person", "place", "org", "work"):
        return 1.0 if any(w[:1].isupper() for w in answer.split()) else 0.0
    return 1.0


def _light(s: str) -> str:
    """Lower case, quotes and backticks stripped, white space collapsed: "[]" keeps its brackets (SQuAD
    normalisation empties it), "'docs'" reads as docs."""
    s = re.sub(r"[`\"“”‘’']", "", s.lower())
    return " ".join(s.split()).strip(" .,;:")


_DEFAULT_LEVELS = {"owner": 1.0, "heading": 0.5}


def doc_default(question: str, answer: str, titles: Sequence[str], texts: Sequence[str]) -> float:
    """0 unless the question asks for a default; then 1 when the answer is the default the cited text states
    for the setting the question names, 0.5 for a heading the question names, 0.25 for a default of no named
    owner, -1 when it is no default the cited text states."""
    from amsrag.generate.doc_cues import DEFAULT_QUESTION, default_answers

    if not DEFAULT_QUESTION.search(question):
        return 0.0
    cited = [Passage(f"c{i}", text, title) for i, (title, text) in enumerate(zip(titles, texts, strict=True))]
    light, norm = _light(answer), normalize_answer(answer)
    best = -1.0
    for found in default_answers(question, cited):
        if (light and _light(found.value) == light) or (norm and normalize_answer(found.value) == norm):
            best = max(best, _DEFAULT_LEVELS.get(found.level, 0.25))
    return best


def text_features(question: str, answer: str, passages: Sequence[Any], multi_hop: bool) -> list[float]:
    """`TEXT_FEATURES` of one answer against the cited passages (dicts or objects with id / title / text)."""
    titles = [passage_field(p, "title") for p in passages]
    texts = [passage_field(p, "text") for p in passages]
    full = "\n".join(f"{t}\n{x}" for t, x in zip(titles, texts, strict=True))
    low = full.lower()
    norm_text = normalize_answer(full)
    norm_answer = normalize_answer(answer)
    a_tokens = norm_answer.split()
    yesno = norm_answer in ("yes", "no")
    pattern = _answer_regex(answer)
    exact = 1.0 if pattern is not None and pattern.search(norm_text) else 0.0
    text_tokens = set(norm_text.split())
    tok_cov = sum(t in text_tokens for t in a_tokens) / len(a_tokens) if a_tokens else 0.0
    q_tokens = set(normalize_answer(question).split())
    in_question = sum(t in q_tokens for t in a_tokens) / len(a_tokens) if a_tokens else 0.0

    keys = [entity_key(s) for s in query_entities(question, titles, ner=False)]
    terms = set(content_terms(full))
    covs = [entity_coverage(k, low, terms) for k in keys]
    q_terms = set(content_terms(question))
    term_cov = len(q_terms & terms) / len(q_terms) if q_terms else 0.0

    # the sentences that hold the answer (with their passage's title): do they also hold the question?
    sent_cov = sent_ent = 0.0
    if pattern is not None and not yesno:
        for title, text in zip(titles, texts, strict=True):
            for sentence in split_sentences(text) or [text]:
                if not pattern.search(normalize_answer(sentence)):
                    continue
                local = f"{title}\n{sentence}"
                local_terms = set(content_terms(local))
                q_local = q_terms - set(a_tokens)
                if q_local:
                    sent_cov = max(sent_cov, len(q_local & local_terms) / len(q_local))
                if keys:
                    sent_ent = max(sent_ent, float(np.mean([entity_coverage(k, local.lower(), local_terms)
                                                            for k in keys])))
    bridge = 0.0
    if multi_hop and len(passages) >= 2:
        bridge = 1.0 if find_bridge(passages, set(keys), ner=False) is not None else 0.0
    return [exact, tok_cov, in_question, 1.0 if yesno else 0.0, _type_ok(question, answer),
            float(np.mean(covs)) if covs else 0.0, float(min(covs)) if covs else 0.0, 1.0 if keys else 0.0,
            term_cov, sent_cov, sent_ent, 1.0 if multi_hop else 0.0, bridge, math.log1p(len(passages)),
            math.log1p(len(a_tokens)), doc_default(question, answer, titles, texts)]


def audit_features(question: str, answer: str, passages: Sequence[Any], multi_hop: bool,
                   support: SpanSupport | None, top_prob: float = 0.0) -> AuditFeatures:
    """Every feature of one audited answer; `support`: the reader's reading of `answer` in `passages`."""
    r, source = reader_features(support, top_prob)
    return AuditFeatures(np.array(r + text_features(question, answer, passages, multi_hop), dtype=np.float64),
                         source)
