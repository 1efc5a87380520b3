"""Prompts for LLM generators: numbered passages, a short answer with [n] citations, context capped
to the model's window (passages truncated, tokens counted with the model's own tokenizer)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from amsrag.generate.base import ABSTAIN, EvidencePassage, GeneratorError

SYSTEM_RAG = (
    "Answer the question using only the numbered passages. Reply with a short answer of a few words, "
    "followed by the number of the passage that supports it in brackets, for example: Paris [2]. "
    f"If the passages do not contain the answer, reply: {ABSTAIN}."
)
SYSTEM_CLOSED = "Answer the question with a short answer of a few words, and nothing else."
MIN_PASSAGE_TOKENS = 16  # a passage cut shorter than this is dropped instead

_STATED = re.compile(r"\bthe answer is:?\s*([^\n]+)", re.IGNORECASE)
CountTokens = Callable[[str], int]
Truncate = Callable[[str, int], str]  # text cut to at most n tokens


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: list[dict[str, str]]
    passages: list[EvidencePassage]  # the passages the prompt numbers 1..n (maybe fewer than given)
    truncated: int  # passages cut short
    dropped: int  # passages left out for lack of room


def user_message(question: str, blocks: Sequence[str]) -> str:
    body = "\n\n".join(blocks)
    return f"Passages:\n{body}\n\nQuestion: {question}\nAnswer:"


def closed_book_messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_CLOSED}, {"role": "user", "content": f"Question: {question}\nAnswer:"}]


def build_prompt(question: str, passages: Sequence[EvidencePassage], budget: int, count: CountTokens,
                 truncate: Truncate) -> Prompt:
    """Messages whose token count (by `count`, over the message texts) fits `budget`.

    Passages keep their order (best first); each gets an equal share of the room left after the
    instructions and the question, and a passage's unused share passes to the ones after it. Tokens
    are not additive across joins, so the assembled prompt is counted again and, if over, rebuilt
    with less room.
    """
    fixed = count(SYSTEM_RAG) + count(user_message(question, []))
    room = budget - fixed
    if room < MIN_PASSAGE_TOKENS:
        raise GeneratorError(f"the question alone needs {fixed} tokens, more than the prompt budget of {budget}: "
                             "raise n_ctx or lower max_tokens")
    for _ in range(8):
        prompt = _fill(question, passages, room, count, truncate)
        used = sum(count(m["content"]) for m in prompt.messages)
        if used <= budget:
            return prompt
        room -= used - budget + 2
    raise GeneratorError(f"could not fit the passages into the prompt budget of {budget} tokens")


def _fill(question: str, passages: Sequence[EvidencePassage], room: int, count: CountTokens,
          truncate: Truncate) -> Prompt:
    blocks: list[str] = []
    kept: list[EvidencePassage] = []
    truncated = 0
    for i, p in enumerate(passages):
        share = room // (len(passages) - i)
        head = f"[{len(kept) + 1}] {p.title}: " if p.title else f"[{len(kept) + 1}] "
        block = head + " ".join(p.text.split())
        n = count(block) + 1  # +1: the blank line between passages
        if n > share:
            if share - count(head) - 1 < MIN_PASSAGE_TOKENS:
                continue
            block = head + truncate(" ".join(p.text.split()), share - count(head) - 1)
            truncated += 1
            n = count(block) + 1
        room -= n
        blocks.append(block)
        kept.append(p)
    messages = [{"role": "system", "content": SYSTEM_RAG}, {"role": "user", "content": user_message(question, blocks)}]
    return Prompt(messages, kept, truncated, len(passages) - len(kept))


def char_estimate(text: str) -> int:
    """Token estimate for servers whose tokenizer we cannot run: ~4 characters per token, rounded up."""
    return (len(text) + 3) // 4


def char_truncate(text: str, tokens: int) -> str:
    return text[: max(0, tokens * 4)]


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    answer: str
    citations: tuple[str, ...]
    abstained: bool
    invalid_citations: list[int]
    citation_source: str  # "model" (the [n] markers), "match" (answer text found in a passage) or "none"


def parse_answer(raw: str, passages: Sequence[EvidencePassage]) -> ParsedAnswer:
    """An LLM reply as a short answer: the first non-empty line, [n] markers turned into passage ids.

    A reply without a valid marker cites the first passage that contains the answer text, if any.
    """
    from amsrag.generate.base import parse_citations, validate_citations
    from amsrag.generate.metrics import normalize_answer

    stated = _STATED.search(raw)  # small models often add "The answer is: X" after echoing a passage
    line = stated.group(1).strip() if stated else next((ln.strip() for ln in raw.strip().splitlines() if ln.strip()),
                                                       "")
    for prefix in ("answer:", "a:"):
        if line.lower().startswith(prefix):
            line = line[len(prefix):].strip()
    answer, cited, invalid = parse_citations(line, passages)
    answer = answer.strip().rstrip(".").strip()
    if not answer or ABSTAIN in answer.lower():
        return ParsedAnswer(ABSTAIN, (), True, invalid, "none")
    source = "model" if cited else "none"
    if not cited:
        norm = normalize_answer(answer)
        match = [p.id for p in passages if norm and norm in normalize_answer(f"{p.title} {p.text}")]
        cited = validate_citations(match[:1], passages)
        source = "match" if cited else "none"
    return ParsedAnswer(answer, cited, False, invalid, source)
