"""Tri-state corrective actions (DESIGN §6, CRAG): assess a retrieved list, refine strips, rewrite the query.

- `CorrectiveStep.assess` scores every passage with the retrieval evaluator and aggregates the list
  score S: S >= upper -> "correct", S < lower -> "incorrect", else "ambiguous".
- correct -> `refine_strips`: keep relevant sentences plus the sentence before each (coreference),
  within a token budget.
- incorrect -> discard, `rewrite_query` (key entities and terms; an `llm` callable when a generator is
  configured), escalate to a wider strategy and/or an external source (the engine does the escalating).
- ambiguous -> both: refine what scored at least `keep_min`, and escalate.
Every result type has `to_dict()` for the trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from amsrag.config import CorrectiveConfig
from amsrag.correct.evaluator import RetrievalEvaluator, passage_field
from amsrag.correct.text import content_terms, query_entities, tokenizer
from amsrag.embed.tokens import TokenCounter
from amsrag.indexes.entities_zh import has_han

Action = Literal["correct", "ambiguous", "incorrect"]
_WORD = re.compile(r"[\w'’\-]+")
_REWRITE_STOP = frozenset({"what", "who", "whom", "whose", "which", "when", "where", "why", "how", "many", "much",
                           "name", "did", "does", "do", "is", "are", "was", "were", "the", "a", "an", "of", "in",
                           "on", "at", "for", "to", "by", "and", "or", "that", "this", "with", "from", "as",
                           "be", "been", "has", "have", "had", "it", "its", "also"})


def aggregate_scores(scores: np.ndarray, how: str = "max") -> float:
    """The list score S: `max`, or `top_weighted` (sorted scores weighted 1/rank, normalised)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return 0.0
    if how == "max":
        return float(s.max())
    if how == "top_weighted":
        s = np.sort(s)[::-1]
        w = 1.0 / np.arange(1, s.size + 1)
        return float((s * w).sum() / w.sum())
    raise ValueError(f"unknown aggregate {how!r}; use max or top_weighted")


def decide(score: float, upper: float, lower: float) -> Action:
    if score >= upper:
        return "correct"
    if score < lower:
        return "incorrect"
    return "ambiguous"


@dataclass(frozen=True, slots=True)
class Assessment:
    score: float  # aggregate S in [0, 1]
    per_passage: list[float]  # aligned with the assessed passages
    action: Action
    ids: list[str] = field(default_factory=list)
    upper: float = 0.0
    lower: float = 0.0
    aggregate: str = "max"
    ms: float = 0.0

    def keep(self, min_score: float) -> list[int]:
        """Indices of passages scoring at least `min_score`."""
        return [i for i, s in enumerate(self.per_passage) if s >= min_score]

    def to_dict(self) -> dict[str, Any]:
        return {"score": round(self.score, 4), "action": self.action,
                "per_passage": [{"id": i, "score": round(s, 4)} for i, s in
                                zip(self.ids or [""] * len(self.per_passage), self.per_passage, strict=True)],
                "thresholds": {"upper": self.upper, "lower": self.lower}, "aggregate": self.aggregate,
                "ms": round(self.ms, 3)}


@dataclass(frozen=True, slots=True)
class Strip:
    """A refined piece of one passage: some of its sentences, in order."""

    passage_id: str
    title: str
    text: str
    sentences: list[int]  # indices of the kept sentences in the passage
    score: float  # best sentence similarity to the query
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {"passage_id": self.passage_id, "title": self.title, "text": self.text, "sentences": self.sentences,
                "score": round(self.score, 4), "tokens": self.tokens}


def refine_strips(query: str, query_vector: np.ndarray | None, passages: Sequence[Any], token_budget: int,
                  evaluator: RetrievalEvaluator, min_similarity: float = 0.35, relative: float = 0.85,
                  context_before: int = 1, counter: TokenCounter | None = None) -> list[Strip]:
    """Relevant sentences of the passages, each with the `context_before` sentences before it, within
    `token_budget` tokens of the embedding tokenizer.

    A sentence is relevant when its (title-prefixed) cosine to the query reaches `min_similarity` and
    comes within `relative` of the best sentence of all passages (the title prefix lifts every sentence
    of an on-topic passage, so the relative cut does the selecting); the best sentence always is. Sentences
    are admitted by decreasing similarity (with their context) until the budget is spent; each strip
    keeps its sentences in passage order, and strips keep the passages' order.
    """
    if not passages:
        return []
    qv = evaluator.encoder.encode_query(query) if query_vector is None else np.asarray(query_vector, np.float32)
    counter = counter or TokenCounter()
    per = evaluator.sentences(passages)
    cands: list[tuple[float, int, int]] = []  # (similarity, passage index, sentence index)
    sims: list[np.ndarray] = []
    for pi, (_ss, vecs) in enumerate(per):
        s = vecs @ qv if len(vecs) else np.zeros(0)
        sims.append(s)
        cands += [(float(v), pi, si) for si, v in enumerate(s)]
    if not cands:
        return []
    best = max(c[0] for c in cands)
    cut = max(min_similarity, best * relative)
    chosen: dict[int, set[int]] = {}
    used = 0
    lengths: dict[tuple[int, int], int] = {}

    def n_tokens(pi: int, si: int) -> int:
        if (pi, si) not in lengths:
            lengths[(pi, si)] = counter.count(per[pi][0][si])
        return lengths[(pi, si)]

    for sim, pi, si in sorted(cands, key=lambda c: (-c[0], c[1], c[2])):
        if sim < cut and chosen:
            break
        want = [j for j in range(max(0, si - context_before), si + 1) if j not in chosen.get(pi, set())]
        cost = sum(n_tokens(pi, j) for j in want)
        if used + cost > token_budget:
            if not chosen and want:  # the best sentence alone, cut to the budget, rather than nothing
                chosen.setdefault(pi, set()).add(si)
                used += n_tokens(pi, si)
            continue
        chosen.setdefault(pi, set()).update(want)
        used += cost
    strips = []
    for pi in sorted(chosen):
        idx = sorted(chosen[pi])
        ss = per[pi][0]
        text = " ".join(ss[j] for j in idx)
        if n_tokens(pi, idx[0]) > token_budget:  # a single over-long sentence: cut by tokens
            offsets = counter.token_offsets(text)
            text = text[: offsets[token_budget - 1][1]] if len(offsets) > token_budget else text
        strips.append(Strip(passage_field(passages[pi], "id"), passage_field(passages[pi], "title"), text, idx,
                            float(max(sims[pi][j] for j in idx)), counter.count(text)))
    return strips


def rewrite_query(query: str, passages: Sequence[Any] = (), max_terms: int = 12,
                  llm: Callable[[str], str] | None = None) -> str:
    """A keyword query for a wider or external search: the question's key entities first, then its content
    words (no question words), at most `max_terms` items. With `llm`, the model rewrites the question
    (one line, no quotes); an empty or failed LLM answer falls back to the keyword rewrite. A question with
    Chinese in it is kept whole (whitespace collapsed)."""
    if llm is not None:
        try:
            prompt = ("Rewrite the question as a short web search query with its key entities and terms. "
                      f"Answer with the query only.\nQuestion: {query}\nQuery:")
            out = " ".join(str(llm(prompt)).strip().strip("\"'").split())
            if out and len(out) <= 4 * max(len(query), 32):
                return out
        except Exception:  # an LLM failure must not cost the corrective step; keywords still work
            pass
    if has_han(query):
        # BM25 segments Chinese and drops its stop words itself; a keyword list of whole Han runs would lose
        # the question's single Latin letters and numbers ("G 对应哪一类问题" → "对应哪一类问题").
        return " ".join(query.split())
    entities = query_entities(query, [passage_field(p, "title") for p in passages])
    items: list[str] = []
    covered: set[str] = set()
    for e in entities:
        items.append(e)
        covered |= set(content_terms(e))
    stem = tokenizer()
    for w in _WORD.findall(query):
        lw = w.lower()
        if lw in _REWRITE_STOP or len(lw) < 2:
            continue
        stems = stem(w)
        if not stems or set(stems) <= covered:
            continue
        covered |= set(stems)
        items.append(w)
    return " ".join(items[:max_terms]) if items else " ".join(query.split())


@dataclass(frozen=True, slots=True)
class Correction:
    """What the corrective step did to one list: the assessment, the kept passages, the strips, the rewrite."""

    assessment: Assessment
    kept: list[int]  # indices of passages kept (empty for incorrect)
    strips: list[Strip]
    rewritten_query: str | None  # set when the action calls for a wider / external search
    escalate: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.assessment.to_dict(), "kept": self.kept, "strips": [s.to_dict() for s in self.strips],
                "rewritten_query": self.rewritten_query, "escalate": self.escalate}


class CorrectiveStep:
    """The corrective step over one evaluator and one `CorrectiveConfig`."""

    def __init__(self, config: CorrectiveConfig | None = None, evaluator: RetrievalEvaluator | None = None,
                 encoder: Any = None, llm: Callable[[str], str] | None = None) -> None:
        self.config = config or CorrectiveConfig.model_validate({})
        self.evaluator = evaluator or RetrievalEvaluator.load(self.config.evaluator or None, encoder=encoder)
        self.llm = llm

    def assess(self, query: str, query_vector: np.ndarray | None, passages: Sequence[Any],
               passage_vectors: np.ndarray | None = None) -> Assessment:
        import time

        t = time.perf_counter()
        scores = self.evaluator.score(query, query_vector, passages, passage_vectors) if len(passages) else \
            np.zeros(0)
        s = aggregate_scores(scores, self.config.aggregate)
        c = self.config
        return Assessment(s, [float(v) for v in scores], decide(s, c.upper, c.lower),
                          [passage_field(p, "id") for p in passages], c.upper, c.lower, c.aggregate,
                          (time.perf_counter() - t) * 1000)

    def correct(self, query: str, query_vector: np.ndarray | None, passages: Sequence[Any],
                passage_vectors: np.ndarray | None = None) -> Correction:
        """Assess, then act: strips for correct, rewrite + escalate for incorrect, both for ambiguous."""
        a = self.assess(query, query_vector, passages, passage_vectors)
        c = self.config
        if a.action == "incorrect":
            return Correction(a, [], [], rewrite_query(query, passages, c.rewrite_max_terms, self.llm), True)
        kept = list(range(len(passages))) if a.action == "correct" else a.keep(c.keep_min)
        strips = refine_strips(query, query_vector, [passages[i] for i in kept], c.strip_token_budget,
                               self.evaluator, c.strip_min_similarity, c.strip_relative, c.strip_context_before)
        if a.action == "correct":
            return Correction(a, kept, strips, None, False)
        return Correction(a, kept, strips, rewrite_query(query, passages, c.rewrite_max_terms, self.llm), True)
