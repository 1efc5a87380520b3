"""Markdown to plain-text sections: split at headings, strip markup lightly.

Kept: the text of paragraphs, list items, quotes, table cells, link texts and code blocks.
Dropped: images, HTML tags and comments, link reference definitions, front matter, thematic
breaks, emphasis markers. The document title is the first level-1 heading, else the fallback. Each
heading's anchor is the slug GitHub (and GitLab, and most renderers after them) gives it: `heading_slugs`.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field

from amsrag.text.citations import SECTION_JOIN

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LINK_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*\S+.*$")
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_LIST = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)

_INLINE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"!\[[^\]]*\]\[[^\]]*\]"), ""),
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # links -> link text
    (re.compile(r"\[([^\]]+)\]\[[^\]]*\]"), r"\1"),
    (re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>"), r"\1"),  # autolinks
    (re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"), ""),  # HTML tags
    (re.compile(r"(`+)(.+?)\1"), r"\2"),  # inline code
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # strong
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"\1"),  # emphasis
    (re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"), r"\1"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),  # strikethrough
)


def strip_inline(text: str) -> str:
    """Inline markup removed: emphasis, links (-> their text), images (dropped), HTML, code ticks."""
    for pattern, repl in _INLINE:
        text = pattern.sub(repl, text)
    return html.unescape(text)


def _slug_char(c: str) -> bool:
    return c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"


class HeadingSlugs:
    """GitHub's heading anchors (github-slugger): the heading text lowercased, every character but letters,
    marks, numbers, `_`, `-` and spaces removed, spaces made `-`; a slug met before gets `-1`, `-2`, ..."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def slug(self, heading: str) -> str:
        base = "".join(c for c in heading.lower() if _slug_char(c)).replace(" ", "-")
        result = base
        while result in self.seen:
            self.seen[base] += 1
            result = f"{base}-{self.seen[base]}"
        self.seen[result] = 0
        return result


@dataclass(slots=True)
class Section:
    heading: str  # "" before the first heading
    level: int  # 0 before the first heading
    lines: list[str] = field(default_factory=list)
    anchor: str | None = None  # the heading's slug (None before the first heading and for an empty heading)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def _drop_front_matter(lines: list[str]) -> list[str]:
    if not lines or lines[0].strip() != "---":
        return lines
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return lines[i + 1 :]
    return lines


def _table_row(line: str) -> str:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return " | ".join(c for c in cells if c)


def _clean_line(line: str) -> str | None:
    """A content line as plain text; None for lines that carry no text."""
    if _BREAK.match(line) or _LINK_DEF.match(line) or _TABLE_RULE.match(line):
        return None
    line = _QUOTE.sub("", line)
    line = _LIST.sub(r"\1", line)
    if line.strip().startswith("|") and line.count("|") >= 2:
        line = _table_row(line)
    return strip_inline(line).rstrip()


def _setext_level(line: str, previous: str | None) -> int:
    """1 or 2 when `line` underlines `previous` as a setext heading, else 0."""
    if previous is None or not previous.strip() or _LIST.match(previous) or _QUOTE.match(previous):
        return 0
    m = _SETEXT.match(line)
    if not m:
        return 0
    return 1 if m.group(1).startswith("=") else 2


class _Parser:
    def __init__(self) -> None:
        self.sections: list[Section] = [Section("", 0)]
        self.slugs = HeadingSlugs()
        self.fence: str | None = None
        self.previous: str | None = None  # the last raw paragraph line, a setext candidate

    def heading(self, text: str, level: int) -> None:
        heading = strip_inline(text).strip()
        self.sections.append(Section(heading, level, anchor=self.slugs.slug(heading) or None))
        self.previous = None

    def feed(self, line: str) -> None:
        if self.fence is not None:
            if line.strip().startswith(self.fence):
                self.fence = None
            else:
                self.sections[-1].lines.append(line.rstrip())
            return
        fence = _FENCE.match(line)
        if fence:
            self.fence = fence.group(1)[0] * 3
            self.previous = None
            return
        level = _setext_level(line, self.previous)
        if level:
            self.sections[-1].lines.pop()
            self.heading(self.previous or "", level)
            return
        atx = _ATX.match(line)
        if atx:
            self.heading(atx.group(2) or "", len(atx.group(1)))
            return
        cleaned = _clean_line(line)
        self.previous = line if cleaned else None
        self.sections[-1].lines.append(cleaned or "")


def parse_markdown(source: str, fallback_title: str) -> tuple[str, list[Section]]:
    """(document title, sections in order, empty ones included)."""
    parser = _Parser()
    for line in _drop_front_matter(_COMMENT.sub("", source).splitlines()):
        parser.feed(line)
    title = next((s.heading for s in parser.sections if s.level == 1 and s.heading), "") or fallback_title
    return title, parser.sections


def section_title(doc_title: str, section: Section, is_title_heading: bool) -> str:
    """`Doc title › Section` inside a section; the bare document title before any and under the H1."""
    if not section.heading or is_title_heading:
        return doc_title
    return f"{doc_title}{SECTION_JOIN}{section.heading}"
