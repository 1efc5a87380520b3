"""Reader items derived from the structure of documentation (issue 37): question / answer pairs a folder of
Markdown documentation states by its shape, with the passage that holds the answer.

Shapes read from the passages the Markdown ingester makes (inline markup stripped, headings in the title
"Doc › Section"):
- a default statement ("Default: 30", "Default value: 70", "default: 'docs'") under a setting's heading or
  at the start of its definition item ("navigation_depth: … Default: 2.") → "What is the default value of
  {setting}?";
- an environment line ("Environment: CARGO_HTTP_TIMEOUT") under a setting's heading → "Which environment
  variable sets {setting}?";
- a definition item "name: Description." / "NAME --- Description." → "Which {option|environment variable}
  {description}?" (the name is the answer);
- an abbreviation "Link Time Optimization (LTO)" → "What does LTO stand for?".

Every item holds its gold passage and up to three distractor passages of the same documentation set
(passages of the same shape, so the owner of a statement has to be read, not guessed). Items carry their
set's name as `dataset` and their file as `group`: splits are by documentation set (`split_by_set`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from amsrag.generate.doc_cues import STATED, stated_value
from amsrag.generate.metrics import normalize_answer
from amsrag.generate.reader_windows import context_of
from amsrag.learn.reader.data import Item, Para, find_answer
from amsrag.types import Passage

_ENV_LINE = re.compile(r"(?m)^[ \t]*(?:[-*+][ \t]+)?Environment:[ \t]*(?P<v>[A-Z][A-Z0-9_]{2,})\b")
_DEF_ITEM = re.compile(r"(?m)^[ \t]*(?:[-*+][ \t]+)?(?P<name>[A-Za-z_][\w.-]{2,}|--[a-z][\w-]+)[ \t]*"
                       r"(?::|---|—)[ \t]+(?P<desc>[A-Z][^\n.]{15,160})")
_ABBREV = re.compile(r"\b(?P<long>(?:[A-Z][a-z]+[ -]){1,5}[A-Z][a-z]+)\s+\((?P<short>[A-Z]{2,6})\)")
_NOT_NAMES = frozenset({"default", "type", "environment", "note", "warning", "example", "see", "tip"})


def doc_passages(folder: Path, name: str) -> list[Passage]:
    """The passages of every Markdown file under `folder`, as `amsrag index build` makes them."""
    from amsrag.ingest.documents import read_document

    out: list[Passage] = []
    for path in sorted(folder.rglob("*.md")):
        out += read_document(path, f"{name}/{path.relative_to(folder)}", "markdown")
    return out


def _heading(title: str) -> str:
    parts = [p.strip() for p in title.split("›")]
    return parts[-1] if len(parts) > 1 else ""


def _env_kind(name: str) -> bool:
    return name.isupper() and "_" in name


def pairs(p: Passage) -> Iterable[tuple[str, str, str]]:
    """(kind, question, answer) pairs that `p` states by its shape."""
    heading = _heading(p.title)
    setting = heading if re.fullmatch(r"[\w.\-\[\]]{3,60}", heading or "") else ""
    for m in STATED.finditer(p.text):
        span = stated_value(p.text, m.end())
        if span is None:
            continue
        block = p.text.rfind("\n\n", 0, m.start()) + 1
        first = p.text[block:].lstrip().split("\n", 1)[0]
        d = _DEF_ITEM.match(first) or re.match(r"^[ \t]*(?P<name>[A-Za-z_][\w.-]{2,}):\s", first)
        owner = d.group("name") if d and d.group("name").lower() not in _NOT_NAMES else setting
        value = p.text[span[0]:span[1]].strip()
        if owner and value and value.lower() not in ("none", "see below", "see description"):
            yield "default", f"What is the default value of {owner}?", value
    for m in _ENV_LINE.finditer(p.text):
        if setting:
            yield "env", f"Which environment variable sets {setting}?", m.group("v")
    for m in _DEF_ITEM.finditer(p.text):
        name, desc = m.group("name"), m.group("desc").strip()
        if name.lower() in _NOT_NAMES or not re.search(r"[_.]|^--|-", name) or "#" in desc:
            continue  # a setting's name has _ . or -, or is an option: "Note: …", "Stable: No (#3358)" are not
        what = "environment variable" if _env_kind(name) else "option"
        yield "option", f"Which {what} {desc[0].lower()}{desc[1:]}?", name
    for m in _ABBREV.finditer(p.text):
        yield "abbreviation", f"What does {m.group('short')} stand for?", m.group("long")


def doc_items(passages: Sequence[Passage], name: str, seed: int = 13, distractors: int = 3) -> list[Item]:
    """Every pair of every passage as an `Item`: the gold passage plus `distractors` passages of the same set
    that do not hold the answer (preferring passages with the same shape of statement)."""
    rng = random.Random(f"{seed}:{name}")
    shaped = [p for p in passages if STATED.search(p.text) or _DEF_ITEM.search(p.text)]
    items: list[Item] = []
    seen: set[str] = set()
    for p in passages:
        for kind, question, answer in pairs(p):
            key = question.lower()
            if key in seen:  # the same question from two places: ambiguous, keep neither
                items = [it for it in items if it.question.lower() != key]
                continue
            seen.add(key)
            where = find_answer(context_of(p.title, p.text), [answer])
            if where is None:
                continue
            pool = [d for d in rng.sample(shaped, min(len(shaped), 12))
                    if d.id != p.id and find_answer(context_of(d.title, d.text), [answer]) is None][:distractors]
            paras = [Para(p.title, p.text, True)] + [Para(d.title, d.text, False) for d in pool]
            items.append(Item(f"{name}:{len(items)}", f"docs:{name}", question, [answer], paras,
                              group=p.id.split("#", 1)[0], qtype=kind, answer_para=0, answer_char=where))
    names = Counter(normalize_answer(it.answers[0]) for it in items if it.qtype == "option")
    return [it for it in items if it.qtype != "option" or names[normalize_answer(it.answers[0])] < 3]  # a label


def split_by_set(items: list[Item], held_out: Iterable[str]) -> None:
    """Items of the `held_out` documentation sets are `test`; the rest `train`."""
    test = {f"docs:{n}" for n in held_out}
    for it in items:
        it.split = "test" if it.dataset in test else "train"


def default_calibration(items: Sequence[Item], seed: int = 13) -> dict[str, Any]:
    """P(right) of the default statement `default_answers` picks, per match level, over the `default` items
    (gold + distractor passages, shuffled): (right + 1) / (n + 2) per level, with the counts."""
    from amsrag.generate.doc_cues import default_answers

    rng = random.Random(seed)
    counts: dict[str, list[int]] = {}
    for it in items:
        if it.qtype != "default":
            continue
        paras = list(it.paras)
        rng.shuffle(paras)
        found = default_answers(it.question, [Passage(id=f"p{i}", title=p.title, text=p.text)
                                              for i, p in enumerate(paras)])
        if not found or not found[0].level:
            continue
        right = normalize_answer(found[0].value) in {normalize_answer(a) for a in it.answers}
        c = counts.setdefault(found[0].level, [0, 0])
        c[0] += int(right)
        c[1] += 1
    return {"default_confidence": {k: round((r + 1) / (n + 2), 4) for k, (r, n) in counts.items()},
            "counts": {k: {"right": r, "read": n} for k, (r, n) in counts.items()},
            "items": sum(it.qtype == "default" for it in items)}
