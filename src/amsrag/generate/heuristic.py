"""The heuristic reader (the default before the trained span reader; kept as its measured baseline): no LLM.

Sentences of the given passages are scored against the question by question-word overlap and, for the
best few (`generator.embed_sentences`), the shared MiniLM embedding, through the process's sentence cache
(the corrective step fills it with the same sentences). The question's expected answer type (who → PERSON,
when → DATE, how many → CARDINAL, …) picks spaCy entities, dates and numbers in the best sentences, and the
span nearest the question's words in the best-scoring sentence wins. Yes/no questions answer yes or no, and
"A or B" questions choose an option by the dates or numbers of its evidence. Below `abstain_threshold` the
answer is "insufficient evidence".
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from amsrag.config import GeneratorConfig
from amsrag.embed.cache import BatchLRU, shared_cache
from amsrag.embed.encoder import Encoder, passage_text_for_embedding
from amsrag.generate.answer_types import FALLBACK_LABELS, QuestionType, question_type
from amsrag.generate.base import ABSTAIN, EvidencePassage, Generation, check_passages
from amsrag.generate.metrics import normalize_answer
from amsrag.indexes.entities import parser_pipeline

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

MAX_SENTENCES = 400  # sentences read per question at most (the top passages' first sentences)
DOC_CACHE = 4096  # parsed sentences kept: the same evidence comes back across questions and systems
_TOKEN = re.compile(r"[a-z0-9]+")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"\b\d[\d,]*(?:\.\d+)?\b")
_NEGATION = re.compile(r"\b(not|never|no|neither|nor|n't|none)\b", re.IGNORECASE)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOP = _words(
    "a an the of in on at to for from by with and or is are was were be been being do does did what which who "
    "whom whose when where why how that this these those it its as into than then there their they he she his "
    "her him them has have had not no yes both either also any all some one many much more most same")


def nlp() -> Language:
    """spaCy with the parser (noun chunks) and NER, loaded once per process."""
    return parser_pipeline()


def content_words(text: str) -> set[str]:
    return {w for w in _TOKEN.findall(text.lower()) if w not in _STOP}


@dataclass(slots=True)
class _Sentence:
    passage: int
    text: str
    score: float = 0.0
    cosine: float = 0.0


@dataclass(slots=True)
class _Candidate:
    text: str
    sentence: int
    score: float
    kind: str  # "typed", "fallback", "chunk"


class HeuristicGenerator:
    name = "heuristic"
    knows = False
    logprobs = False
    streaming = False

    def __init__(self, encoder: Encoder, config: GeneratorConfig | None = None) -> None:
        self.encoder = shared_cache(encoder)  # the corrective step embeds the same sentences
        self.config = config or GeneratorConfig()
        self._docs: BatchLRU[Doc] = BatchLRU(DOC_CACHE)  # thread-safe: the engine may answer queries at once

    def closed_book(self, question: str) -> Generation:
        """An extractive reader knows nothing without evidence: it abstains."""
        return Generation(ABSTAIN, (), 0.0, True, generator=self.name, details={"closed_book": True})

    def generate_with_vector(self, question: str, passages: Sequence[EvidencePassage],
                             query_vector: np.ndarray | None) -> Generation:
        return self.generate(question, passages, query_vector=query_vector)

    def generate(self, question: str, passages: Sequence[EvidencePassage],
                 query_vector: np.ndarray | None = None) -> Generation:
        t0 = time.perf_counter()
        passages = check_passages(passages)
        answer, cited, confidence, details = self._answer(question, passages, query_vector)
        abstained = answer is None or confidence < self.config.abstain_threshold
        if abstained:
            details = {**details, "candidate": answer}
        text = ABSTAIN if abstained or answer is None else answer
        return Generation(text, () if abstained else cited, round(confidence, 4), abstained,
                          ms=(time.perf_counter() - t0) * 1000, generator=self.name, details=details)

    def _parsed(self, texts: list[str]) -> list[Doc]:
        """spaCy parses of sentences, cached (LRU)."""
        return self._docs.lookup(texts, lambda missing: list(nlp().pipe(missing)))

    # ------------------------------------------------------------------ scoring
    def _sentences(self, question: str, passages: list[EvidencePassage],
                   query_vector: np.ndarray | None) -> list[_Sentence]:
        from amsrag.text.sentences import split_sentences

        sentences = [_Sentence(i, s) for i, p in enumerate(passages) for s in split_sentences(p.text) if s.strip()]
        sentences = sentences[:MAX_SENTENCES]
        if not sentences:
            return []
        qwords = content_words(question)
        lexical = []
        for s in sentences:
            words = content_words(s.text) | content_words(passages[s.passage].title)
            overlap = len(qwords & words) / len(qwords) if qwords else 0.0
            lexical.append(0.4 * overlap + 0.05 / (1 + s.passage))
        # Only the lexically best sentences are embedded (the reader's main cost); the rest get the lowest
        # cosine of those. On 400 eval-benchmark questions with A4's passages, embedding the best 6 of ~22
        # sentences gave the EM (0.158) and F1 (0.200) of embedding them all, at a third of the time.
        order = sorted(range(len(sentences)), key=lambda i: (-lexical[i], i))[: self.config.embed_sentences]
        qv = query_vector if query_vector is not None else self.encoder.encode_query(question)
        vecs = self.encoder.encode([passage_text_for_embedding(passages[sentences[i].passage].title,
                                                               sentences[i].text) for i in order])
        cos = vecs @ np.asarray(qv, dtype=np.float32)
        floor = float(cos.min())
        for s in sentences:
            s.cosine = floor
        for i, c in zip(order, cos, strict=True):
            sentences[i].cosine = float(c)
        for s, lex in zip(sentences, lexical, strict=True):
            s.score = 0.6 * s.cosine + lex
        return sorted(sentences, key=lambda s: -s.score)

    def _answer(self, question: str, passages: list[EvidencePassage], query_vector: np.ndarray | None
                ) -> tuple[str | None, tuple[str, ...], float, dict[str, Any]]:
        qt = question_type(question)
        details: dict[str, Any] = {"answer_type": qt.kind}
        sentences = self._sentences(question, passages, query_vector)
        if not sentences:
            return None, (), 0.0, {**details, "reason": "no evidence sentences"}
        top = sentences[: self.config.sentences]
        details["sentence_score"] = round(top[0].score, 4)
        if qt.kind == "yesno":
            return self._yes_no(top, passages, details)
        if qt.kind == "choice":
            picked = self._choice(qt, question, sentences, passages, details)
            if picked[0] is not None:
                return picked
        return self._span(qt, question, top, passages, details)

    def _yes_no(self, top: list[_Sentence], passages: list[EvidencePassage], details: dict[str, Any]
                ) -> tuple[str | None, tuple[str, ...], float, dict[str, Any]]:
        best = top[0]
        answer = "no" if _NEGATION.search(best.text) else "yes"
        cited = tuple(dict.fromkeys(passages[s.passage].id for s in top[:2]))
        return answer, cited, _clip(best.score), details

    def _choice(self, qt: QuestionType, question: str, sentences: list[_Sentence], passages: list[EvidencePassage],
                details: dict[str, Any]) -> tuple[str | None, tuple[str, ...], float, dict[str, Any]]:
        """An "A or B" question: compare the options' dates / numbers, else their evidence scores."""
        evidence: dict[str, list[_Sentence]] = {}
        for option in qt.options:
            words = content_words(option)
            if not words:
                continue
            norm = normalize_answer(option)
            own = [s for s in sentences
                   if _covers(words, content_words(passages[s.passage].title)) or norm in normalize_answer(s.text)]
            if own:
                evidence[option] = own
        details["options"] = list(qt.options)
        if not evidence:
            return None, (), 0.0, details
        if len(evidence) == 1:  # only one option has evidence: no comparison possible, weak answer
            (option, own), = evidence.items()
            return option, (passages[own[0].passage].id,), 0.5 * _clip(own[0].score), details
        values: dict[str, float] = {}
        if qt.order in ("early", "late"):
            values = {o: v for o, own in evidence.items() if (v := _first_value(own, _YEAR)) is not None}
        elif qt.order in ("more", "less"):
            values = {o: v for o, own in evidence.items() if (v := _first_value(own, _NUMBER)) is not None}
        cited = tuple(dict.fromkeys(passages[own[0].passage].id for own in evidence.values()))
        if len(values) == len(evidence) and len(set(values.values())) > 1:
            pick = min if qt.order in ("early", "less") else max
            option = pick(values, key=values.__getitem__)
            details["option_values"] = values
            return option, cited, _clip(0.5 + 0.5 * max(s.score for own in evidence.values() for s in own[:1])), details
        option = max(evidence, key=lambda o: evidence[o][0].score)
        return option, cited, 0.6 * _clip(evidence[option][0].score), details

    def _span(self, qt: QuestionType, question: str, top: list[_Sentence], passages: list[EvidencePassage],
              details: dict[str, Any]) -> tuple[str | None, tuple[str, ...], float, dict[str, Any]]:
        qwords = content_words(question)
        qnorm = normalize_answer(question)
        docs = self._parsed([s.text for s in top])
        best_score = top[0].score
        candidates: list[_Candidate] = []
        for i, (s, doc) in enumerate(zip(top, docs, strict=True)):
            anchors = [t.i for t in doc if t.text.lower() in qwords]
            relative = s.score / best_score if best_score > 0 else 0.0
            for text, start, end, kind in _spans_of(doc, qt):
                words = content_words(text)
                if not words or words <= qwords or normalize_answer(text) in qnorm:
                    continue  # the answer is not something the question already says
                prox = 0.0
                if anchors:
                    d = min(abs(a - start) if a < start else abs(a - end + 1) for a in anchors)
                    prox = 1.0 / (1.0 + d / 4.0)
                weight = {"typed": 1.0, "fallback": 0.7, "chunk": 0.5 if qt.kind in ("other", "choice") else 0.4}[kind]
                candidates.append(_Candidate(text, i, weight * (0.7 * relative + 0.3 * prox) * _clip(s.score), kind))
        if not candidates:
            return None, (), 0.0, {**details, "reason": f"no {qt.kind} candidate in the evidence"}
        # the same span found in several sentences gains support
        support: dict[str, float] = {}
        for c in candidates:
            key = normalize_answer(c.text)
            support[key] = support.get(key, 0.0) + c.score
        best = max(candidates, key=lambda c: (support[normalize_answer(c.text)], c.score))
        total = sum(support.values())
        share = support[normalize_answer(best.text)] / total if total > 0 else 0.0
        confidence = _clip(best.score) * (0.5 + 0.5 * share)
        details.update({"span_kind": best.kind, "support_share": round(share, 4)})
        return _clean(best.text), (passages[top[best.sentence].passage].id,), confidence, details


def _spans_of(doc: Doc, qt: QuestionType) -> list[tuple[str, int, int, str]]:
    """(text, start token, end token, kind) of the answer candidates in one sentence."""
    out = [(e.text, e.start, e.end, "typed") for e in doc.ents if e.label_ in qt.labels]
    if qt.kind == "date" and not out:
        out = [(m.group(0), *_token_range(doc, m.start(), m.end()), "typed") for m in _YEAR.finditer(doc.text)]
    if not out and qt.kind in FALLBACK_LABELS:
        out = [(e.text, e.start, e.end, "fallback") for e in doc.ents if e.label_ in FALLBACK_LABELS[qt.kind]]
    if not out and qt.kind in ("other", "choice"):
        out = [(e.text, e.start, e.end, "typed") for e in doc.ents]
    if not out or qt.kind in ("other", "choice"):  # noun chunks: the last resort of typed questions
        out += [(c.text, c.start, c.end, "chunk") for c in doc.noun_chunks
                if not any(c.start <= e.start < c.end for e in doc.ents)]
    return out


def _token_range(doc: Doc, start: int, end: int) -> tuple[int, int]:
    span = doc.char_span(start, end, alignment_mode="expand")
    return (span.start, span.end) if span is not None else (0, 1)


def _first_value(sentences: list[_Sentence], pattern: re.Pattern[str]) -> float | None:
    for s in sentences[:6]:
        m = pattern.search(s.text)
        if m:
            try:
                return float(m.group(0).replace(",", ""))
            except ValueError:
                continue
    return None


def _covers(option_words: set[str], title_words: set[str]) -> bool:
    return bool(title_words) and len(option_words & title_words) / len(option_words | title_words) >= 0.5


def _clean(text: str) -> str:
    text = text.strip().strip(" ,;:.\"'“”()")
    return re.sub(r"'s$", "", text).strip()


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))
