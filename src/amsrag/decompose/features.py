"""What the decomposer's two heads read: the question's sentence vector with a few structural cues (plan type),
and each word piece's contextual vector with its shape (entity / inner-description tags)."""

from __future__ import annotations

import re

import numpy as np

from amsrag.embed.encoder import TokenStates

TAGS = ("O", "ENT", "INNER")
LEXICAL = ("either_or", "yes_no_start", "both", "same_different", "comparative", "capital_runs", "words",
           "relative_inside", "possessive", "number_cue")
_EITHER_OR = re.compile(r"[,:]?\s*[^,?]+\s+or\s+[^,?]+\?\s*$", re.I)
_YESNO = re.compile(r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I)
_COMPARATIVE = re.compile(r"\b(first|earlier|later|older|younger|oldest|youngest|more|less|fewer|longer|shorter|"
                          r"taller|larger|bigger|smaller|higher|lower|\w+er than|most|least)\b", re.I)
_RELATIVE = re.compile(r"\S\s+(who|which|that|where|whose|whom)\b", re.I)
_CAPITAL_RUN = re.compile(r"(?:\b[A-Z][\w'-]*(?:\s+(?:of|the|and|de|von)\s+)?)+")
_NUMBER_CUE = re.compile(r"\b(how many|how much|population|number of)\b", re.I)


def lexical_features(question: str) -> np.ndarray:
    body = question[1:] if question else ""
    runs = len(_CAPITAL_RUN.findall(body))
    return np.array([
        float(bool(_EITHER_OR.search(question))),
        float(bool(_YESNO.match(question))),
        float(" both " in f" {question.lower()} "),
        float(bool(re.search(r"\b(same|different|differ)\b", question, re.I))),
        float(bool(_COMPARATIVE.search(question))),
        min(runs, 6) / 3.0,
        min(len(question.split()), 40) / 20.0,
        float(bool(_RELATIVE.search(question))),
        float("'s " in question or "s' " in question),
        float(bool(_NUMBER_CUE.search(question))),
    ], dtype=np.float32)


def type_features(states: TokenStates, question: str) -> np.ndarray:
    return np.concatenate([states.sentence, lexical_features(question)]).astype(np.float32)


def token_features(states: TokenStates, question: str) -> np.ndarray:
    """(tokens, dim + 3): each word piece's vector, whether its word is capitalised, whether it starts a word,
    its relative position (special tokens included; their rows are ignored)."""
    n = len(states.offsets)
    shape = np.zeros((n, 3), dtype=np.float32)
    for i, (a, b) in enumerate(states.offsets):
        if b <= a:
            continue
        start = a
        while start > 0 and question[start - 1].isalnum():
            start -= 1
        shape[i, 0] = float(question[start].isupper())
        shape[i, 1] = float(start == a)
        shape[i, 2] = i / max(n - 1, 1)
    return np.concatenate([states.states, shape], axis=1)


def token_tags(states: TokenStates, spans: dict[str, list[tuple[int, int]]]) -> np.ndarray:
    """Each word piece's tag index from character spans per tag (special tokens: -1)."""
    tags = np.zeros(len(states.offsets), dtype=np.int64)
    for i, (a, b) in enumerate(states.offsets):
        if b <= a:
            tags[i] = -1
            continue
        for t, name in enumerate(TAGS):
            if any(s <= a and b <= e for s, e in spans.get(name, [])):
                tags[i] = t
    return tags
