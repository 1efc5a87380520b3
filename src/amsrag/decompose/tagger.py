"""The offline decomposer: two trained heads on the MiniLM encoder (DecompRC-style span pointing), then a
deterministic rewrite of the spans into sub-questions.

- the type head (multinomial logistic regression on the sentence vector and structural cues, temperature
  calibrated) says single / bridge / comparison / intersection / implicit;
- the tag head (logistic regression on each word piece's contextual vector) marks the compared entities
  (ENT) and a bridge's inner description (INNER: "the city where the founder of X was born");
- a comparison asks, per entity, the sub-questions of the most similar training comparison (the questions
  compared with their entities masked), its operator read from the question's comparative;
- a bridge asks the inner description as a question, then the question with the description replaced by
  `#1`.
The artifact is `decomposer.npz` with its card `decomposer.json` (`amsrag train decomposer train` rebuilds it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.decompose.features import TAGS, token_features, type_features
from amsrag.decompose.inner import INNER_FEATURES, best_inner, candidates, without_outer_verb
from amsrag.decompose.names import tidy_name
from amsrag.decompose.plan import PLAN_KINDS, SLOT, Operator, Plan, PlanKind, Step, ValueKind
from amsrag.embed.encoder import MiniLMEncoder, TokenStates
from amsrag.errors import AmsragError

MODEL_FILE = "decomposer.npz"
CARD_FILE = "decomposer.json"
REBUILD = "amsrag train decomposer train --out DIR"
# an outer question that asks only what kind of thing the inner description is: no second hop
_IDENTITY = re.compile(r"^\s*(?:what|which|who)(?:\s+(?:person|man|woman|individual|people|one|company|organi[sz]ation|"
                       rf"group|team|band|city|country|place|state|thing))?\s+(?:is|was|are|were)\s+{re.escape(SLOT)}"
                       r"\s*\??\s*$", re.IGNORECASE)
_PERSON_HEADS = re.compile(r"\b(performer|director|father|mother|wife|husband|founder|actor|actress|singer|author|"
                           r"writer|composer|producer|creator|player|spouse|son|daughter|brother|sister|child|"
                           r"man|woman|person|leader|president|king|queen|owner|designer|architect|coach|"
                           r"member|star|host|who)\b", re.I)


class DecomposerArtifactError(AmsragError):
    """The decomposer's model or card is missing or unreadable (the message names the file)."""


def default_directory() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "decomposer"))


@dataclass(frozen=True, slots=True)
class DecomposerModel:
    type_w: np.ndarray  # (kinds, features)
    type_b: np.ndarray
    temperature: float
    tag_w: np.ndarray  # (tags, token features)
    tag_b: np.ndarray
    bank: np.ndarray  # (comparisons, dim): masked training comparisons' sentence vectors
    bank_templates: tuple[tuple[str, ...], ...]
    card: dict[str, Any]
    inner_w: np.ndarray  # (INNER_FEATURES,): the inner-description ranker (`decompose.inner`)
    inner_b: float

    @classmethod
    def load(cls, directory: Path | str | None = None) -> DecomposerModel:
        directory = Path(directory) if directory is not None else default_directory()
        model_path, card_path = directory / MODEL_FILE, directory / CARD_FILE
        for path in (model_path, card_path):
            if not path.is_file():
                raise DecomposerArtifactError(f"the decomposer's file {path} is missing; rebuild it with `{REBUILD}`")
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
            with np.load(model_path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in ("type_w", "type_b", "tag_w", "tag_b", "bank", "inner_w", "inner_b")}
            templates = tuple(tuple(t) for t in card["bank_templates"])
            temperature = float(card["type_head"]["temperature"])
            inner_b = float(arrays["inner_b"].reshape(-1)[0])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DecomposerArtifactError(f"the decomposer's files in {directory} are unreadable ({exc}); rebuild "
                                          f"them with `{REBUILD}`") from exc
        if arrays["type_w"].shape[0] != len(PLAN_KINDS) or arrays["tag_w"].shape[0] != len(TAGS) \
                or arrays["bank"].shape[0] != len(templates) or arrays["inner_w"].shape != (len(INNER_FEATURES),):
            raise DecomposerArtifactError(f"{model_path} does not match its card {card_path}; rebuild with `{REBUILD}`")
        return cls(arrays["type_w"], arrays["type_b"], temperature, arrays["tag_w"], arrays["tag_b"],
                   arrays["bank"], templates, card, arrays["inner_w"], inner_b)

    def type_probs(self, features: np.ndarray) -> np.ndarray:
        z = (features @ self.type_w.T + self.type_b) / self.temperature
        z = z - z.max()
        p = np.exp(z)
        return np.asarray(p / p.sum())

    def tag_probs(self, features: np.ndarray) -> np.ndarray:
        z = features @ self.tag_w.T + self.tag_b
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return np.asarray(p / p.sum(axis=1, keepdims=True))


def operator_of(question: str) -> Operator | None:
    """The comparison's operator from the question's comparative."""
    q = question.lower()
    if re.search(r"\bsame\b", q):
        return "same"
    if re.search(r"\b(different|differ)\b", q):
        return "different"
    if re.search(r"\b(younger|youngest|later|latest|more recent(ly)?|most recent(ly)?|last|newer|newest)\b", q):
        return "later"
    if re.search(r"\b(first|earlier|earliest|older|oldest|before)\b", q):
        return "earlier"
    if re.search(r"\b(fewer|less|least|smaller|smallest|lower|lowest|shorter|shortest)\b", q):
        return "less"
    if re.search(r"\b(more|most|larger|largest|bigger|biggest|greater|greatest|higher|highest|taller|tallest|"
                 r"longer|longest)\b", q):
        return "more"
    if re.match(r"\s*(are|were|is|was|do|does|did|have|has)\b", q):
        return "both"
    return None


VALUE_OF: dict[str, ValueKind] = {"earlier": "date", "later": "date", "more": "number", "less": "number",
                                  "same": "text", "different": "text", "both": "yesno"}


def both_check(question: str, entities: tuple[str, ...], entity: str) -> str:
    """ "Are A and B both frozen drinks?" about `entity`: "Is <entity> frozen drinks?" (a yes/no check)."""
    q = question
    spans = sorted((q.find(e), q.find(e) + len(e)) for e in entities if q.find(e) >= 0)
    if len(spans) >= 2:
        q = q[:spans[0][0]] + entity + q[spans[-1][1]:]
    q = re.sub(r"\s+\b(both|each|all)\b", "", q, count=1)
    q = re.sub(r"^\s*(Are|Were|Do|Have)\b", lambda m: {"are": "Is", "were": "Was", "do": "Does", "have": "Has"}[
        m.group(1).lower()], q)
    return q


_NAME_WORD = re.compile(r"\s+[A-Z0-9][\w'’.\-]*")


def whole_name(question: str, entity: str) -> str:
    """`entity` as the question writes the name: run on over the capitalised words that follow it ("Joe" ->
    "Joe Diffie"), without trailing lower-case words ("Ann Beattie have in common" -> "Ann Beattie").

    >>> whole_name("Do Dusty Drake and Joe Diffie sing country?", "Joe")
    'Joe Diffie'
    """
    at = question.find(entity)
    if at < 0:
        return entity
    end = at + len(entity)
    while (more := _NAME_WORD.match(question, end)) is not None:
        end = more.end()
    words = question[at:end].split()
    while len(words) > 1 and not words[-1][:1].isupper() and not words[-1][:1].isdigit():
        words.pop()
    return " ".join(words)


def shared_question(question: str, entities: tuple[str, ...], entity: str) -> str:
    """ "Both A and B sing which genre?" about `entity`: "A sing which genre?"; "What profession do A and B have in
    common?" -> "What profession do A have?" (an intersection step: the reader reads it for one entity)."""
    q = question
    spans = sorted((q.find(e), q.find(e) + len(e)) for e in entities if q.find(e) >= 0)
    if len(spans) >= 2:
        q = q[:spans[0][0]] + entity + q[spans[-1][1]:]
    q = re.sub(r"\b(both|each)\s+", "", q, count=1, flags=re.I)
    q = re.sub(r"\b(have|has|had)\s+in\s+common\b", r"\1", q, flags=re.I)
    q = re.sub(r"\s+in\s+common\b", "", q, flags=re.I)
    return q[:1].upper() + q[1:]


def both_predicate(question: str, entities: tuple[str, ...]) -> str:
    """What a "both" question asks of each entity: "Are Medici and Senet both board games?" -> "board games"."""
    q = question
    for e in entities:
        q = q.replace(e, " ")
    q = re.sub(r"^\s*(are|were|is|was|do|does|did|have|has)\b", " ", q, flags=re.I)
    q = re.sub(r"\b(both|each|all|and|or|of them)\b", " ", q, flags=re.I)
    return " ".join(q.replace("?", " ").replace(",", " ").split())


def inner_question(inner: str) -> str:
    """The inner description as a question the span reader answers ("the performer of song X" -> "Who is …?")."""
    head = inner.split(" who ")[0] if " who " in inner else inner
    wh = "Who" if _PERSON_HEADS.search(head) else "What"
    inner = re.sub(r"^(The|A|An) ", lambda m: m.group(1).lower() + " ", inner.strip())  # a statement's subject
    return f"{wh} is {inner.rstrip('?')}?"


@dataclass(frozen=True, slots=True)
class Word:
    start: int
    end: int
    text: str
    logit: float  # log-odds of the tag, averaged over the word's pieces


_WORD = re.compile(r"[\w][\w'.-]*|[^\w\s]")
DETERMINERS = frozenset({"the", "a", "an"})
_JOINERS = frozenset({"and", "or", ",", "?", "both", "same", "either"})
_DANGLING = frozenset({"of", "in", "on", "by", "for", "to", "with", "from", "at", "the", "a", "an", "and", "or"})
_RELATIVE = frozenset({"who", "whom", "whose", "which", "that", "where", "when"})
_OUTER_STOP = frozenset({"what", "who", "whom", "whose", "which", "where", "when", "how", "is", "was", "are", "were",
                         "the", "a", "an", "of", "did", "does", "do"})


def words_with(question: str, offsets: list[tuple[int, int]], probs: np.ndarray, tag: int) -> list[Word]:
    """The question's words with the tag's log-odds, from the word pieces inside each word."""
    out = []
    for m in _WORD.finditer(question):
        a, b = m.span()
        ps = [float(probs[i, tag]) for i, (s, e) in enumerate(offsets) if e > s and s >= a and e <= b]
        if not ps:
            continue
        p = min(max(float(np.mean(ps)), 1e-4), 1 - 1e-4)
        out.append(Word(a, b, m.group(0), math.log(p / (1 - p))))
    return out


def _as_written(question: str, option: str) -> str:
    """An either-or option as the question writes it: with a leading "The" the option pattern drops, and from a
    loose match only its trailing name ("Which magazine was started first Arthur's Magazine" -> "Arthur's
    Magazine")."""
    words = option.split()
    if len(words) > 4 and any(w[:1].islower() and w.lower() not in ("of", "and", "the", "for", "in", "de")
                              for w in words):
        k = len(words)
        while k > 0 and (words[k - 1][:1].isupper() or words[k - 1][:1].isdigit()
                         or words[k - 1].lower() in ("of", "and", "the", "for", "in", "de")):
            k -= 1
        option = " ".join(words[k:]) or option
    at = question.find(option)
    if at >= 4 and question[at - 4:at] == "The ":
        return question[at - 4:at + len(option)]
    return option


def tidied(question: str, spans: list[tuple[int, int]]) -> tuple[str, ...]:
    """The tag head's entity spans redrawn on the names the question writes (`names.tidy_name`); as they were
    when two redrawn names would overlap."""
    names = sorted(tidy_name(question, a, b) for a, b in spans)
    if any(names[k][1] > names[k + 1][0] for k in range(len(names) - 1)):
        names = sorted(spans)
    return tuple(question[a:b] for a, b in names)


def partner(question: str, start: int, end: int) -> list[tuple[int, int]]:
    """The name joined to a lone entity span by "and"/"or" ("Are Ranger Rick and [Tennis] both …?"): the word on
    the joiner's other side, as a span for `tidy_name` to widen; none when no joiner is there."""
    before = re.search(r"(\S+)\s+(?:and|or)\s+$", question[:start])
    if before is not None:
        return [before.span(1)]
    after = re.match(r"\s+(?:and|or)\s+(\S+)", question[end:])
    return [(end + after.start(1), end + after.end(1))] if after is not None else []


def best_span(words: list[Word], allowed: Callable[[int, int], bool]) -> tuple[int, int, float] | None:
    """The word span (i, j inclusive) with the largest sum of log-odds among the `allowed` ones (positive sum)."""
    best: tuple[int, int, float] | None = None
    for i in range(len(words)):
        total = 0.0
        for j in range(i, len(words)):
            total += words[j].logit
            if total > 0 and allowed(i, j) and (best is None or total > best[2]):
                best = (i, j, total)
    return best


class TaggerDecomposer:
    """`decompose(question) -> Plan` with the trained heads; build with `load()` (the shipped artifact)."""

    name = "tagger"

    def __init__(self, model: DecomposerModel, encoder: MiniLMEncoder) -> None:
        self.model = model
        self.encoder = encoder

    @classmethod
    def load(cls, directory: Path | str | None = None, encoder: MiniLMEncoder | None = None) -> TaggerDecomposer:
        return cls(DecomposerModel.load(directory), encoder or MiniLMEncoder())

    def decompose(self, question: str) -> Plan:
        states = self.encoder.token_states([question])[0]
        probs = self.model.type_probs(type_features(states, question))
        by_kind: dict[str, float] = {k: float(p) for k, p in zip(PLAN_KINDS, probs, strict=True)}
        kind: PlanKind = PLAN_KINDS[int(np.argmax(probs))]
        tags = self.model.tag_probs(token_features(states, question))
        if kind == "comparison":
            return self._comparison(question, states, tags, by_kind)
        if kind == "bridge":
            return self._bridge(question, states, tags, by_kind)
        if kind == "intersection":
            return self._intersection(question, states, tags, by_kind)
        return Plan(kind, by_kind)

    def entities(self, question: str, states: TokenStates, tags: np.ndarray) -> tuple[str, ...]:
        """The compared entities: the two options of an either-or question, else the two best ENT spans (one span
        "A and B" is split at its "and")."""
        from amsrag.text.questions import question_options

        options = question_options(question)
        if options is not None:
            return tuple(_as_written(question, o) for o in options)
        words = words_with(question, states.offsets, tags, TAGS.index("ENT"))

        def name_like(i: int, j: int) -> bool:
            inner = {w.text.lower() for w in words[i:j + 1]}
            return words[i].text.lower() not in _JOINERS and words[j].text.lower() not in _JOINERS \
                and "," not in inner and "?" not in inner and i > 0

        first = best_span(words, name_like)
        if first is None:
            return ()
        a, b = first[0], first[1]
        texts = [w.text.lower() for w in words[a:b + 1]]
        if texts.count("and") == 1:  # "Medici and Senet": two names joined
            k = a + texts.index("and")
            if k > a and k < b:
                first_name = self._name_start(words, a)  # "Eve | Beglarian and Zach Bogosian": the whole name
                return tidied(question, [(words[first_name].start, words[k - 1].end),
                                         (words[k + 1].start, words[b].end)])
        second = best_span(words, lambda i, j: name_like(i, j) and (j < a - 1 or i > b + 1))
        if second is None:
            return tidied(question, [(words[a].start, words[b].end), *partner(question, words[a].start,
                                                                              words[b].end)])
        spans = sorted([(a, b), (second[0], second[1])])
        return tidied(question, [(words[self._name_start(words, i)].start, words[j].end) for i, j in spans])

    @staticmethod
    def _name_start(words: list[Word], i: int) -> int:
        """Back over the capitalised words before a span ("Derrickson" -> "Scott Derrickson"), not the first word."""
        while i > 1 and words[i - 1].text[:1].isupper() and words[i].text[:1].isupper():
            i -= 1
        return i

    def _comparison(self, question: str, states: TokenStates, tags: np.ndarray, probs: dict[str, float]) -> Plan:
        entities = self.entities(question, states, tags)
        operator = operator_of(question)
        if len(entities) < 2 or operator is None:
            why = "fewer than two entities found" if len(entities) < 2 else "no comparative the executor applies"
            return Plan("comparison", probs, entities=entities, notes=(why,))
        value = VALUE_OF[operator]
        if operator == "both":
            predicate = both_predicate(question, entities)
            if not predicate:
                return Plan("comparison", probs, entities=entities, notes=("no predicate to check",))
            checks = tuple((Step(f"What is {e}?", e),) for e in entities)
            return Plan("comparison", probs, chains=checks, entities=entities, operator=operator, value=value,
                        predicate=predicate)
        if not len(self.model.bank_templates):
            return Plan("comparison", probs, entities=entities, operator=operator, value=value,
                        notes=("the artifact has no comparison templates",))
        templates, similarity = self.nearest_templates(question, entities)
        chains: tuple[tuple[Step, ...], ...] = tuple(
            tuple(Step(t.replace("{E}", e if i == 0 else SLOT), e) for i, t in enumerate(templates)) for e in entities)
        return Plan("comparison", probs, chains=chains, entities=entities, operator=operator, value=value,
                    notes=(f"sub-questions of the nearest training comparison (cosine {similarity:.2f})",))

    def _intersection(self, question: str, states: TokenStates, tags: np.ndarray, probs: dict[str, float]) -> Plan:
        entities = self.entities(question, states, tags)
        if len(entities) < 2:
            return Plan("intersection", probs, entities=entities, notes=("fewer than two entities found",))
        entities = tuple(whole_name(question, e) for e in entities[:2])
        steps = tuple(Step(shared_question(question, entities, e), e) for e in entities)
        return Plan("intersection", probs, steps=steps, entities=entities)

    def nearest_templates(self, question: str, entities: tuple[str, ...]) -> tuple[tuple[str, ...], float]:
        masked = question
        for letter, e in zip("XYZW", entities, strict=False):
            masked = masked.replace(e, letter)
        v = self.encoder.encode_query(masked)
        sims = self.model.bank @ v
        best = int(np.argmax(sims))
        return self.model.bank_templates[best], float(sims[best])

    def _bridge(self, question: str, states: TokenStates, tags: np.ndarray, probs: dict[str, float]) -> Plan:
        words = words_with(question, states.offsets, tags, TAGS.index("INNER"))

        def description(i: int, j: int) -> bool:
            """A noun phrase ("the director of film X", "X's father") that leaves the outer question some content
            and cuts no name in two; a relative clause in it runs to the question's end."""
            if i == 0 or j <= i or words[j].text in "?," or not (
                    words[i].text.lower() in DETERMINERS or words[i].text[:1].isupper()):
                return False
            if j + 1 < len(words) and words[j + 1].text[:1].isupper():  # a name runs on: the span cuts it
                return False
            if words[j].text.lower().endswith(("'s", "s'", "’s")) or words[j].text.lower() in _DANGLING:
                return False  # "X's father": the head noun belongs in it; no span ends on "of"
            if words[i].text[:1].isupper() and words[i - 1].text[:1].isupper() and i > 1:
                return False
            inside = [w.text.lower() for w in words[i:j + 1]]
            if j + 1 < len(words) and words[j + 1].text == "(":  # "film Devotion (1929 Film)": one name
                return False
            if inside.count("(") != inside.count(")") or not (words[j].text[-1:].isalnum() or words[j].text == ")"):
                return False
            if any(w in _RELATIVE for w in inside) and j < len(words) - 2:
                return False
            outside = [w.text.lower() for k, w in enumerate(words) if (k < i or k > j) and w.text.isalnum()]
            return any(w not in _OUTER_STOP for w in outside)

        from amsrag.indexes.entities import parser_pipeline

        doc = parser_pipeline()(question)
        chosen = best_inner(candidates(doc, words), self.model.inner_w, self.model.inner_b)
        if chosen is not None:
            a, b = chosen.start, without_outer_verb(doc, chosen.start, chosen.end)
        else:  # no noun phrase the parse offers: the best word span the tag head allows
            span = best_span(words, description)
            if span is None:
                return Plan("bridge", probs, notes=("no inner description found",))
            i, j = span[0], span[1]
            inside = [w.text.lower() for w in words[i:j + 1]]
            rel = next((k for k, w in enumerate(inside) if w in _RELATIVE), None)
            if rel is not None and "of" in inside[:rel]:  # "the seat of [the county where X is located]"
                i += max(k for k in range(rel) if inside[k] == "of") + 1
            a, b = words[i].start, without_outer_verb(doc, words[i].start, words[j].end)
        inner = question[a:b]
        rest = f"{question[:a]}{SLOT}{question[b:]}"
        if rest.strip(" ?") == SLOT:
            return Plan("bridge", probs, notes=(f"inner description {inner!r} is the whole question",))
        if _IDENTITY.match(rest):  # "What person was the director of X?": one hop, whatever the type head says
            return Plan("single", probs, notes=(f"{rest!r} asks only who or what {inner!r} is",))
        return Plan("bridge", probs, steps=(Step(inner_question(inner)), Step(rest)))
