"""A bridge's inner description, chosen among the question's noun-phrase constituents.

The tag head scores each word's odds of being in the inner description ("the city where the founder of X was
born"); on its own, the best-scoring word span often crosses a phrase boundary ("the lyrics to the 2016/2017
Australian production"). Here the candidates are the dependency parse's noun-phrase subtrees (spaCy's
parser), a cut name extended to its end, and a linear ranker, trained on the aligned spans of the public
decompositions (`learn.decomposer.train`), picks one from the tag head's scores over the phrase and the
phrase's syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from spacy.tokens import Doc, Token

INNER_FEATURES = ("logit_sum", "logit_mean", "logit_max", "positive_share", "words", "starts_determiner",
                  "relative_pronoun", "has_of", "head_proper", "at_start", "question_share", "name_only",
                  "head_subject", "head_prep_object", "head_object", "has_verb", "at_end", "one_word", "after_of",
                  "bare_noun_start", "ends_participle")
_WH = frozenset({"what", "who", "whom", "whose", "which", "where", "when", "how"})
_RELATIVE = frozenset({"who", "whom", "whose", "which", "that", "where", "when"})
_OUTER_STOP = frozenset({"what", "who", "is", "was", "the", "of", "a", "did", "does", "do", "are", "were", "which",
                         "when", "where", "how", "in"})
_NAME_POS = frozenset({"PROPN", "DET", "PUNCT", "NUM", "ADP", "CCONJ"})


class ScoredWord(Protocol):
    """A question word with the tag head's log-odds of it being in the inner description."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def logit(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    start: int  # character offsets in the question
    end: int
    features: np.ndarray


def candidates(doc: Doc, words: Sequence[ScoredWord]) -> list[Candidate]:
    """The noun phrases of the parse (a noun's subtree, also cut after each of its right dependents) that are no
    wh-phrase and leave the outer question some content, with their features (`INNER_FEATURES`)."""
    out: dict[tuple[int, int], Candidate] = {}
    asked = asked_word(doc)
    for head in doc:
        if head.pos_ not in ("NOUN", "PROPN", "NUM") or head.dep_ == "compound":
            continue
        a = head.left_edge.i
        if doc[a].lower_ in _WH:
            continue
        # the phrase with its first k right dependents (k = 0 … all), each also run on over a name the parse
        # cut off ("the director of film | Last Rampage")
        ends = {head.i, *(child.right_edge.i for child in head.rights)}
        for b in sorted(ends):
            while b > a and doc[b].is_punct and doc[b].text not in ')"':
                b -= 1
            for last in sorted({b, _name_end(doc, b)}):
                span = doc[a:last + 1]
                if sum(t.text == "(" for t in span) != sum(t.text == ")" for t in span):
                    continue
                if asked is not None and a <= asked <= last:  # what the question asks stays in the outer one
                    continue
                _add(out, doc, head, a, last, words)
    return sorted(out.values(), key=lambda c: (c.start, c.end))


def asked_word(doc: Doc) -> int | None:
    """The token of the question word: the opening one ("Which film …", "In what year …"), else, in a question
    written as a statement ("X is a judge on a show hosted by whom?"), the last one."""
    for t in doc[:3]:
        if t.lower_ in _WH:
            return t.i
        if t.pos_ != "ADP":
            break
    return next((t.i for t in reversed(doc) if t.lower_ in _WH), None)


def _name_end(doc: Doc, b: int) -> int:
    """The end of the capitalised run (with a parenthesised qualifier) right after token `b`, else `b`."""
    n = len(doc)
    while b + 1 < n and doc[b + 1].lower_ not in _WH and (
            doc[b + 1].text[:1].isupper() or (doc[b + 1].text in "()" and doc[b].text[:1].isupper())
            or (doc[b + 1].text == ")" and "(" in doc[:b + 1].text)):
        b += 1
    return b


def _add(out: dict[tuple[int, int], Candidate], doc: Doc, head: Token, a: int, b: int,
         words: Sequence[ScoredWord]) -> None:
    """Tokens `a`..`b` (headed by `head`) as a candidate, unless it leaves the outer question no content."""
    start, end = doc[a].idx, doc[b].idx + len(doc[b].text)
    if (start, end) in out:
        return
    inside = [w for w in words if w.start >= start and w.end <= end]
    outside = [w for w in words if (w.end <= start or w.start >= end) and w.text.isalnum()
               and w.text.lower() not in _OUTER_STOP]
    if not inside or not outside:
        return
    logits = np.array([w.logit for w in inside], dtype=np.float64)
    span = doc[a:b + 1]
    lower = [t.lower_ for t in span]
    features = np.array([
        logits.sum() / 5, logits.mean(), logits.max(), float((logits > 0).mean()), len(inside) / 10,
        float(doc[a].lower_ in ("the", "a", "an")), float(any(t in _RELATIVE for t in lower)),
        float("of" in lower), float(head.pos_ == "PROPN"), float(a == 0), len(inside) / max(len(words), 1),
        float(all(t.pos_ in _NAME_POS for t in span)), float(head.dep_ in ("nsubj", "nsubjpass")),
        float(head.dep_ == "pobj"), float(head.dep_ in ("dobj", "attr")),
        float(any(t.pos_ == "VERB" for t in span)), float(b >= len(doc) - 2), float(len(inside) == 1),
        float(a > 0 and doc[a - 1].lower_ == "of"), float(doc[a].pos_ == "NOUN"),
        float(doc[b].tag_ == "VBN" and all(t.is_punct for t in doc[b + 1:]))],  # "… born?": the predicate
        dtype=np.float32)
    out[(start, end)] = Candidate(start, end, features)


_AUXILIARY = frozenset({"is", "was", "are", "were", "does", "do", "did"})
_BE_HAVE = _AUXILIARY | {"be", "been", "being", "has", "have", "had"}


def without_outer_verb(doc: Doc, start: int, end: int) -> int:
    """The end of the inner description `start`..`end` (character offsets) once the outer question's own verb is
    given back. When the description is the subject of a question opened by an auxiliary ("Which country is
    [the firm that owns Babycham located]?", "What city was [the author of X born in]?") and runs to the question
    mark, its last verb with the prepositions after it is the outer question's ("… is #1 located?"); a verb
    behind its own auxiliary ("the state where X is located") stays in the description."""
    inside = [t for t in doc if t.idx >= start and t.idx + len(t.text) <= end]
    before = [t for t in doc if t.idx + len(t.text) <= start]
    after = [t for t in doc if t.idx >= end]
    if len(inside) < 3 or any(not t.is_punct for t in after) or not before or before[-1].lower_ not in _AUXILIARY:
        return end
    opening = before[1] if before[0].pos_ == "ADP" and len(before) > 1 else before[0]
    if opening.lower_ not in _WH:
        return end
    i = len(inside) - 1
    while i > 0 and inside[i].tag_ in ("IN", "RP"):
        i -= 1
    verb = inside[i]
    if i < 2 or not verb.tag_.startswith("VB") or inside[i - 1].lower_ in _BE_HAVE \
            or inside[i - 1].lower_ in _RELATIVE:
        return end
    return inside[i - 1].idx + len(inside[i - 1].text)


def best_inner(cands: Sequence[Candidate], weights: np.ndarray, bias: float) -> Candidate | None:
    """The candidate the ranker scores highest (None without candidates)."""
    if not cands:
        return None
    scores = np.stack([c.features for c in cands]) @ weights + bias
    return cands[int(np.argmax(scores))]
