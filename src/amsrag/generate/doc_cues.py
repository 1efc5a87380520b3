"""Default values read from the structure of documentation: "Default: 30" lines, "auto (default): …" items,
"The default is X." and `key = value` lines of a defaults block, each tied to the setting it belongs to.

The span reader was trained on Wikipedia-style questions and reads "What is the default of remote_branch?"
badly (a word of a neighbouring line). Documentation states defaults in a few fixed shapes under the name of
the setting: a heading ("Configuration › remote_branch"), a definition item ("navigation_depth: The maximum
depth … Default: 2."), a key of a defaults table. `default_answers` finds those statements in the passages
read, names the setting each belongs to (its owner), and ranks them by how well the owner and the passage's
headings match the question. The reader answers with the best one only when its owner is named in the
question (`DefaultAnswer.match` >= `STRONG`); its confidence comes from the card (`doc_cues`), measured on
held-out documentation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from amsrag.generate.base import EvidencePassage
from amsrag.generate.quote import head_length

DEFAULT_QUESTION = re.compile(r"\bdefault(?:s|ed)?\b", re.I)
STATED = re.compile(r"(?i)(?<![\w-])(?:(?:the\s+)?default(?:\s+value)?(?:\s+is|\s*:)|defaults\s+to)[ \t]+(?=\S)")
_ITEM_DEFAULT = re.compile(r"(?im)^[ \t]*(?:[-*+][ \t]+)?(?P<v>[\w.:/+-]+)[ \t]+\(default\)")
_ASSIGNMENT = re.compile(r"(?m)^[ \t]*(?P<k>[A-Za-z_][\w.-]*)[ \t]*=[ \t]*(?P<v>[^#\n]+?)[ \t]*(?:#.*)?$")
_DEFINED = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?(?P<name>-{0,2}[A-Za-z_][\w.\[\]-]*)(?:[ \t]+[\w<>.\[\]]+)?[ \t]*:\s")
_OPTION_LINE = re.compile(r"(?m)^[ \t]*(?P<name>--?[A-Za-z][\w-]*)\b")
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n")
_VALUE_END = re.compile(r"\.(?:\s|$)|\s\(|;|,\s+(?:or|and|if|unless|which)\b|\n")
_WORD = re.compile(r"[\w.\-]+")
_STOP = frozenset([
    "what", "which", "is", "the", "of", "a", "an", "in", "for", "by", "does", "do", "to", "value", "default",
    "defaults", "setting", "option", "use", "used", "how", "many", "much", "when", "are", "set"
])
STRONG = 3.0  # the owner is named in the question
NAMED = 2.0  # a heading of the passage is named in the question (the owner came from the headings)
MAX_VALUE_WORDS = 12


@dataclass(frozen=True, slots=True)
class DefaultAnswer:
    value: str
    passage: int  # index into the passages
    start: int  # of the value, in context_of(title, text)
    end: int
    owner: str
    match: float  # how well the owner and the headings match the question (>= NAMED: the question names it)
    level: str  # "owner": the question names the setting; "heading": a heading of its passage; "" neither


def stated_value(text: str, start: int) -> tuple[int, int] | None:
    """The value stated at `start`: up to the end of its sentence, line, or a parenthesis; None if too long."""
    m = _VALUE_END.search(text, start)
    end = m.start() if m else len(text)
    raw = text[start:end]
    stripped = raw.rstrip(" \t,:")
    if not stripped.strip() or len(stripped.split()) > MAX_VALUE_WORDS:
        return None
    return start, start + len(stripped)


def _block_start(text: str, pos: int) -> int:
    starts = [m.end() for m in _BLOCK_BREAK.finditer(text, 0, pos)]
    return starts[-1] if starts else 0


def _owner(text: str, pos: int) -> str:
    """The setting a statement at `pos` belongs to: the name defined at the start of its paragraph
    ("navigation_depth: …"), else the nearest option line above it ("--color when"), else "" (the headings)."""
    block = _block_start(text, pos)
    line_end = text.find("\n", block)
    first = text[block:line_end if line_end >= 0 else len(text)]
    m = _DEFINED.match(first)
    if m and m.group("name").lower() not in ("default", "type", "environment"):
        return m.group("name")
    options = [m for m in _OPTION_LINE.finditer(text, 0, pos) if len(_line(text, m.start()).split()) <= 3]
    return options[-1].group("name") if options else ""


def _words(s: str) -> set[str]:
    return {w.strip(".-").lower() for w in _WORD.findall(s)} - _STOP - {""}


def _named(question: str, name: str) -> bool:
    n = name.lower().strip().lstrip("-")
    return bool(n) and re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", question.lower()) is not None


def _match(question: str, owner: str, title: str, line: str) -> tuple[float, str]:
    """(score, level): STRONG when the question names the owner, NAMED when it names a heading of an ownerless
    statement; plus the share of the question's other content words found in the headings and the line."""
    score, level = 0.0, ""
    if owner and _named(question, owner):
        score, level = STRONG, "owner"
    elif not owner and any(_named(question, h) for h in title.split("›")[1:]):
        score, level = NAMED, "heading"
    rest = _words(question) - _words(owner)
    if rest:
        score += len(rest & (_words(title) | _words(line))) / len(rest)
    return score, level


def default_answers(question: str, passages: Sequence[EvidencePassage]) -> list[DefaultAnswer]:
    """Every default stated in `passages`, best match to the question first (empty unless the question asks
    for a default)."""
    if not DEFAULT_QUESTION.search(question):
        return []
    found: dict[tuple[int, int], DefaultAnswer] = {}

    def add(pi: int, p: EvidencePassage, a: int, b: int, owner: str, line: str) -> None:
        head = head_length(p.title)
        score, level = _match(question, owner, p.title, line)
        cand = DefaultAnswer(p.text[a:b].strip(), pi, a + head, b + head, owner, score - 0.001 * pi, level)
        key = (pi, a)
        if key not in found or cand.match > found[key].match:
            found[key] = cand

    for pi, p in enumerate(passages):
        text = p.text
        for m in STATED.finditer(text):
            span = stated_value(text, m.end())
            if span is not None:
                add(pi, p, *span, _owner(text, m.start()), _line(text, m.start()))
        for m in _ITEM_DEFAULT.finditer(text):
            add(pi, p, m.start("v"), m.end("v"), _owner(text, m.start()), _line(text, m.start()))
        if re.search(r"(?i)\bdefault", text):
            for m in _ASSIGNMENT.finditer(text):
                if STATED.search(text, max(0, m.start() - 400), m.start()) or "default" in text[:m.start()].lower():
                    add(pi, p, m.start("v"), m.end("v"), m.group("k"), _line(text, m.start()))
    return sorted(found.values(), key=lambda c: -c.match)


def _line(text: str, pos: int) -> str:
    a = text.rfind("\n", 0, pos) + 1
    b = text.find("\n", pos)
    return text[a:b if b >= 0 else len(text)]


# "Which option / setting / flag / environment variable … ?": the answer is a name as documentation writes one
NAME_QUESTION = re.compile(r"\b(?:which|what)\s+(?:(?!(?:the|a|an|is|are|does|do)\b)[\w-]+\s+){0,3}?"
                           r"(?:option|setting|flag|switch|environment variable|variable|key|parameter|field|tag|"
                           r"config(?:uration)? value|directive)s?\b", re.I)
_NAME_SHAPE = re.compile(r"^(?:--?[A-Za-z][\w-]*|![A-Z]+|[A-Za-z_]\w*(?:[._-]\w+)+|[A-Z][A-Z0-9]{3,})$")
NAME_MARGIN = 8.0  # logits a name may trail the reader's best span by and still be chosen (MkDocs; Cargo checks)


# "Which / what command … ?": the answer is a command line as documentation shows one ("mkdocs new my-project")
COMMAND_QUESTION = re.compile(r"\b(?:which|what)\s+(?:(?!(?:the|a|an|is|are|does|do)\b)[\w-]+\s+){0,2}?"
                              r"(?:sub)?commands?\b(?![ -]line)", re.I)
_COMMAND_LINE = re.compile(r"[a-z][\w.-]*(?:[ \t]+[a-z<\[][\w.<>\[\]-]*){1,3}")
_PROMPT = frozenset(["", "$", ">", "%", "#"])
_SHELL_WORDS = frozenset(["cd", "ls", "echo", "export", "source", "cat", "mkdir", "rm", "cp", "mv", "set", "sudo",
                          "touch", "chmod"])
COMMAND_MARGIN = 8.0  # logits a command line may trail the reader's best span by and still be chosen (MkDocs)


def asks_for_command(question: str) -> bool:
    """The question asks which command does something (not which command-line option, nor a default)."""
    return COMMAND_QUESTION.search(question) is not None and DEFAULT_QUESTION.search(question) is None


def command_line(context: str, start: int) -> tuple[int, int] | None:
    """The command line a span starting at `start` opens: (start, end) of the whole line when the span starts
    it (after a shell prompt, if any) and the line is two to four lower-case words that do not begin with a
    shell built-in ("mkdocs new my-project", "poetry env info"); else None."""
    line_start = context.rfind("\n", 0, start) + 1
    if context[line_start:start].strip() not in _PROMPT:
        return None
    end = context.find("\n", start)
    end = len(context) if end < 0 else end
    line = context[start:end].rstrip()
    if not _COMMAND_LINE.fullmatch(line) or line.split()[0] in _SHELL_WORDS:
        return None
    return start, start + len(line)


def asks_for_name(question: str) -> bool:
    """The question asks which option, setting, flag or variable does something (not for a default)."""
    return NAME_QUESTION.search(question) is not None and DEFAULT_QUESTION.search(question) is None


def is_name(text: str, question: str) -> bool:
    """`text` is shaped like an option, setting or variable name, and is not one the question already says."""
    t = text.strip()
    said = re.search(rf"(?<![\w-]){re.escape(t.lower())}(?![\w-])", question.lower()) is not None
    return bool(_NAME_SHAPE.match(t)) and not said and not _named(question, t)
