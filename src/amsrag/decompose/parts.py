"""A question that asks two or more things at once, cut into parts that are each retrieved and read alone.

Two shapes are recognised, both common in questions about documentation and rare in QA data sets:

- two clauses, the second opening with a question word after "and", ";" or a comma:
  "Which command builds the site, and which one serves it?" -> "Which command builds the site?",
  "Which command serves it?" ("one" takes the first part's head noun, "its" the first part's topic);
- one question over coordinated names (identifiers with `_`, `.`, `-` or `::`, or code spans):
  "What are the default remote_branch and remote_name?" -> "What is the default remote_branch?",
  "What is the default remote_name?".

Questions that compare or relate what they coordinate ("between A and B", "A and B both ...", "A or B")
are left whole: they need both things in one reading, which the decomposer's comparison plan does.

>>> split_parts("What is the default site_dir, and what is the default dev_addr?")
('What is the default site_dir?', 'What is the default dev_addr?')
>>> split_parts("Are Ed Wood and Scott Derrickson of the same nationality?")
('Are Ed Wood and Scott Derrickson of the same nationality?',)
"""

from __future__ import annotations

import re

MAX_PARTS = 3
MIN_PART_WORDS = 3  # the first part; a later one needs MIN_PART_WORDS + 1 ("in what year" is not a question)
WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "why", "how"})
AUXILIARIES = frozenset({"is", "are", "was", "were", "does", "do", "did", "can", "could", "should", "will", "would"})
# after ", and" an auxiliary opens a question ("..., and is the cache shared?") unless an adverb or a participle
# follows it; after a bare "and" it continues the first clause ("... and was later executed", "Which city
# hosted X and is the capital of Y?")
_CONTINUATIONS = frozenset({"not", "also", "later", "then", "still", "now", "never", "often", "once", "being",
                            "been", "used", "known", "called", "named", "based", "made", "born", "located"})
_PRONOUNS = re.compile(r"\b(it|its|he|his|him|she|her|they|their|them)\b|\bthis\s+so\b|\bthis\s*$", re.IGNORECASE)
_MODALS = AUXILIARIES | {"must", "may", "might", "lets", "let"}
# a word that ends the head noun phrase after "which"/"what" ("Which environment variable sets ...")
_HEAD_END = _MODALS | {"to", "that", "of", "in", "for", "on", "by", "with", "from", "when", "if"}
_RELATING = re.compile(r"\b(between|both|same|differ(?:ent|ence|s)?|compare[ds]?|together|versus|vs\.?|either|"
                       r"neither|respectively)\b", re.IGNORECASE)
# a cut: "and" or ";" (a comma alone opens relative and subordinate clauses far more often than questions)
_CLAUSE_CUT = re.compile(r"\s*(?:[,;]\s*and|\band|;)\s+(?=(?:(?:in|on|for|from|at|to|by|with|of)\s+)?(\w+)\s+(\w+))",
                         re.IGNORECASE)
_NAME = r"(?:`[^`]+`|[A-Za-z_][\w-]*(?:(?:[._]|::|-)[\w-]+)+)"
_COORDINATED = re.compile(rf"(?P<lead>\b(?:the\s+)?(?:default\s+)?(?:value\s+of\s+)?)(?P<a>{_NAME})\s*,?\s+and\s+"
                          rf"(?P<again>(?:the\s+)?(?:default\s+)?(?:value\s+of\s+)?)(?P<b>{_NAME})")
_PLURAL_COPULA = re.compile(r"^(what|which)\s+are\b", re.IGNORECASE)
_TOPIC = re.compile(r"\b(?:of|for|in)\s+((?:the\s+)?[\w.-]+(?:\s+[\w.-]+){0,3})\s*$", re.IGNORECASE)
_LAST_OBJECT = re.compile(r"\b((?:the|a|an)\s+[\w.-]+(?:\s+[\w.-]+){0,2})\s*$", re.IGNORECASE)
_COPULA_SUBJECT = re.compile(r"^(?:who|what|where|which)\s+(?:is|are|was|were)\s+(.+)$", re.IGNORECASE)


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'.-]+", text)


def _finish(text: str) -> str:
    text = text.strip().rstrip("?,;. ")
    return text[:1].upper() + text[1:] + "?"


def _head(first: str) -> str:
    """The noun phrase a "which"/"what" question asks for: "environment variable" in "Which environment variable
    sets ...". Empty when the question does not open that way."""
    words = first.split()
    if len(words) < 3 or words[0].lower() not in ("which", "what"):
        return ""
    head: list[str] = []
    for i, w in enumerate(words[1:5]):
        lw = w.lower()
        if lw in _HEAD_END or (i > 0 and lw.endswith("s") and not lw.endswith("ss")):
            break
        head.append(w)
    return " ".join(head) if len(head) < len(words) - 1 else ""


def _resolve(second: str, first: str) -> str:
    """`second` with "which one" / "which" + verb given the first part's head noun, and "its" / "it" the first
    part's topic (its closing "of / for / in ..." phrase, the subject of "what is X", or its closing object), so
    that the part reads on its own."""
    head = _head(first)
    m = re.match(r"^(which|what)\s+(one|ones)\b", second, re.IGNORECASE)
    if head and m:
        second = f"{m.group(1)} {head}{second[m.end():]}"
    elif head and re.match(r"^which\s+\w+", second, re.IGNORECASE):
        which, verb, *rest = second.split()
        if verb.lower() in _MODALS or (verb.endswith("s") and not verb.endswith("ss")):
            second = " ".join([which, head, verb, *rest])
    body = first.rstrip("?")
    topic = _TOPIC.search(body) or _COPULA_SUBJECT.match(body) or _LAST_OBJECT.search(body)
    if topic:
        phrase = topic.group(1)
        second = re.sub(r"\bits\s+", f"{phrase}'s ", second, count=1)
        second = re.sub(r"\bit\b(?!')", phrase, second, count=1)
    return second


def _clauses(question: str) -> list[str]:
    body = question.strip().rstrip("?").strip()
    cuts = [m for m in _CLAUSE_CUT.finditer(body) if m.start() > 0 and (
        m.group(1).lower() in WH_WORDS or (m.group(1).lower() in AUXILIARIES and m.group(0).lstrip()[:1] in ",;"
                                           and m.group(2).lower() not in _CONTINUATIONS))]
    if not cuts:
        return [question]
    pieces, start = [], 0
    for m in cuts:
        pieces.append(body[start:m.start()])
        start = m.end()
    pieces.append(body[start:])
    if (len(pieces) > MAX_PARTS or len(_words(pieces[0])) < MIN_PART_WORDS
            or any(len(_words(p)) <= MIN_PART_WORDS for p in pieces[1:])):
        return [question]
    if pieces[0].split()[0].lower() not in WH_WORDS | AUXILIARIES:
        return [question]  # "If X and how ...": not a question before the cut
    later = [_resolve(p, pieces[0]) for p in pieces[1:]]
    if any(_PRONOUNS.search(p) for p in later):
        return [question]  # a part that does not read on its own ("what did he study?"): the question stays whole
    return [_finish(p) for p in [pieces[0], *later]]


def _coordinated(question: str) -> list[str]:
    m = _COORDINATED.search(question)
    if m is None:
        return [question]
    code_like = re.compile(r"[._`:]|^--")
    lead_words = (m.group("lead") + m.group("again")).lower()
    if not (code_like.search(m.group("a")) or code_like.search(m.group("b"))) and not (
            "default" in lead_words or "value" in lead_words):
        return [question]  # hyphenated words ("jet-lag and shift-work"), not names of settings
    before, after = question[:m.start()], question[m.end():]
    lead = m.group("lead") or m.group("again")
    first = _PLURAL_COPULA.sub(lambda c: f"{c.group(1)} is", before + m.group("lead") + m.group("a") + after)
    second = _PLURAL_COPULA.sub(lambda c: f"{c.group(1)} is", before + lead + m.group("b") + after)
    return [_finish(re.sub(r"\s+", " ", first)), _finish(re.sub(r"\s+", " ", second))]


def split_parts(question: str) -> tuple[str, ...]:
    """The parts of `question`: itself alone when it asks one thing (or relates the things it names)."""
    if _RELATING.search(question) or re.search(r"\bor\b", question, re.IGNORECASE):
        return (question,)
    parts = _clauses(question)
    if len(parts) == 1:
        parts = _coordinated(question)
    return tuple(parts) if len(parts) > 1 else (question,)
