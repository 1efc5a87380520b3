"""HTML main content with its heading structure, by selectolax (lexbor; MIT).

Dropped: scripts, styles, forms, navigation and page chrome (`nav`, `header`, `footer`, `aside`, and
elements whose class or id names navigation, a sidebar, breadcrumbs, a footer or a local table of
contents). The content root is `main`, else `[role=main]`, else `article` when there is one, else `body`.
Headings `h1`-`h6` become headings; `pre` a code block kept whole; `ul` / `ol` / `dl` one list block
(nested items indented); `table` a table block of `cell | cell` rows, with its grid when it is a real table
(`html_tables`; a layout table's content is read as blocks); everything else paragraph text.

A heading's anchor is its `id`, else the `id` of an element in it (or an `a name`), else the target of its
permalink (`<a href="#x">¶</a>`), else an empty `a` with a `name` or `id` just before it, else the `id` of
the nearest enclosing `section` / `div` / `article` with an id when this heading is that element's first
one and no text stands before it there. A heading with none of these has no anchor: a citation never points
at another heading's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from amsrag.ingest.parsers.base import Block, Grid, ParseBudget, ParsedDocument, SkippedDocument, TextBudget, mib
from amsrag.ingest.parsers.html_tables import html_grid, is_layout, squash, table_rows

_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "form", "nav", "header", "footer", "aside",
              "iframe", "object", "button", "select", "head")
_CHROME = re.compile(r"(?:^|[-_ ])(?:nav|navbar|navheader|navfooter|navigation|breadcrumbs?|sidebar|sphinxsidebar|"
                     r"related|footer|header|menu|toc|skip)(?:$|[-_ ])", re.IGNORECASE)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_LISTS = ("ul", "ol", "dl")
_BLOCK_TAGS = frozenset(("p", "div", "section", "article", "main", "blockquote", "figure", "figcaption", "li",
                         "dd", "dt", "br", "hr", "address", "details", "summary", "center", "body", "tr", "td",
                         "th", *_HEADINGS, *_LISTS, "pre", "table"))
_HEADING_MARKS = "¶#§ \u00a0"  # permalink signs that documentation generators put after a heading
_SECTIONS = ("section", "div", "article")
_HEADING_SELECTOR = ", ".join(_HEADINGS)
_squash = squash


def _is_chrome(node: Any) -> bool:
    attrs = node.attributes
    marks = f"{attrs.get('class') or ''} {attrs.get('id') or ''}".strip()
    if marks and _CHROME.search(marks):
        return True
    return attrs.get("role") in ("navigation", "banner", "contentinfo")


def _content_root(tree: Any) -> Any:
    for selector in ("main", "[role=main]", "article"):
        found = tree.css(selector)
        if len(found) == 1:
            return found[0]
    return tree.body or tree.root


def _list_lines(node: Any, depth: int, out: list[str]) -> None:
    """Items of a ul / ol / dl as `- item` lines, nested lists indented."""
    for child in node.iter():
        if child.tag in ("li", "dt", "dd"):
            inline: list[Any] = []
            nested: list[Any] = []
            for part in child.iter(include_text=True):
                (nested if part.tag in _LISTS else inline).append(part)
            text = _squash(" ".join(p.text(deep=True, separator=" ") for p in inline))
            if text:
                marker = "" if child.tag == "dd" else "- "
                indent = "  " * (depth + (1 if child.tag == "dd" else 0))
                out.append(f"{indent}{marker}{text}")
            for sub in nested:
                _list_lines(sub, depth + 1, out)
        elif child.tag in _LISTS:
            _list_lines(child, depth + 1, out)


def _id(node: Any, name: str = "id") -> str | None:
    value = (node.attributes.get(name) or "").strip()
    return value if value and not any(c.isspace() for c in value) else None


def _permalink(heading: Any) -> str | None:
    """The target of a permalink sign in the heading (`<a class="headerlink" href="#x">¶</a>`)."""
    for link in heading.css("a[href^='#']"):
        if not _squash(link.text(deep=True)).strip(_HEADING_MARKS + "\U0001f517"):
            href = _id(link, "href")
            return unquote(href[1:]) or None if href else None
    return None


def _previous_marker(heading: Any) -> str | None:
    prev = heading.prev
    while prev is not None and prev.tag == "-text" and not (prev.text_content or "").strip():
        prev = prev.prev
    if prev is None or prev.tag != "a" or _squash(prev.text(deep=True)):
        return None
    return _id(prev) or _id(prev, "name")


def _text(node: Any) -> str:
    return _squash(node.text(deep=True, separator=" "))


def _enclosing(heading: Any, root: Any) -> str | None:
    node = heading.parent
    while node is not None and node.mem_id != root.mem_id:
        anchor = _id(node)
        if anchor is not None:
            first = node.css_first(_HEADING_SELECTOR)
            ok = node.tag in _SECTIONS and first is not None and first.mem_id == heading.mem_id
            # and nothing with text stands before the heading: the anchor opens the page at it
            ok = ok and _text(node).startswith(_text(heading))
            return anchor if ok else None
        node = node.parent
    return None


def heading_anchor(heading: Any, root: Any) -> str | None:
    """The fragment that opens the page at `heading`, None when it has none (module doc)."""
    own = _id(heading)
    if own is not None:
        return own
    for inner in heading.css("[id], a[name]"):
        if inner.mem_id != heading.mem_id:
            return _id(inner) or _id(inner, "name")
    return _permalink(heading) or _previous_marker(heading) or _enclosing(heading, root)


class _Walker:
    def __init__(self, budget: TextBudget, root: Any) -> None:
        self.blocks: list[Block] = []
        self.inline: list[str] = []
        self.budget = budget
        self.root = root

    def emit(self, kind: str, text: str, level: int = 0, anchor: str | None = None, grid: Grid | None = None) -> None:
        if text.strip():
            self.blocks.append(Block(kind, self.budget.take(text), level, anchor=anchor,  # type: ignore[arg-type]
                                     grid=grid))

    def flush(self) -> None:
        text = _squash(" ".join(self.inline))
        self.inline = []
        self.emit("text", text)

    def walk(self, node: Any) -> None:
        for child in node.iter(include_text=True):
            tag = child.tag
            if tag == "-text":
                self.inline.append(child.text_content or "")
            elif tag in _HEADINGS:
                self.flush()
                heading = _squash(child.text(deep=True, separator=" ")).rstrip(_HEADING_MARKS)
                self.emit("heading", heading, _HEADINGS[tag], heading_anchor(child, self.root))
            elif tag == "pre":
                self.flush()
                self.emit("code", (child.text(deep=True) or "").strip("\n"))
            elif tag in _LISTS:
                self.flush()
                lines: list[str] = []
                _list_lines(child, 0, lines)
                self.emit("list", "\n".join(lines))
            elif tag == "table" and is_layout(child):
                self.flush()
                self.walk(child)
                self.flush()
            elif tag == "table":
                self.flush()
                self.emit("table", "\n".join(table_rows(child)), grid=html_grid(child))
            elif tag in _BLOCK_TAGS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)


def html_blocks(markup: str, budget: TextBudget, drop: tuple[str, ...] = ()) -> tuple[str, list[Block]]:
    """The `<title>` and the content blocks of one HTML page (`drop`: more tags to leave out with their text)."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(markup)
    title_node = tree.css_first("title")
    title = _squash(title_node.text()) if title_node is not None else ""
    tree.strip_tags([*_DROP_TAGS, *drop])
    for node in tree.css("[class], [id], [role]"):
        if _is_chrome(node):
            node.decompose()
    root = _content_root(tree)
    walker = _Walker(budget, root)
    walker.walk(root)
    walker.flush()
    return title, walker.blocks


def parse_html(path: Path, budget: ParseBudget) -> ParsedDocument:
    size = path.stat().st_size
    if size > budget.max_markup_bytes:
        raise SkippedDocument(path, f"{mib(size)} of HTML, more than ingest.max_markup_mb "
                                    f"({mib(budget.max_markup_bytes)})")
    data = path.read_bytes()
    head = data[:2048].lstrip().lower()
    if head.startswith((b"%pdf", b"pk\x03\x04")) or b"\x00" in data[:4096]:
        raise SkippedDocument(path, "not HTML (binary content); check the file's extension")
    title, blocks = html_blocks(data.decode("utf-8", errors="replace"), TextBudget(path, budget))
    first_heading = next((b for b in blocks if b.kind == "heading"), None)
    if first_heading is not None and first_heading.level == 1:
        title = first_heading.text  # <title> often adds the site's name
    title = title or path.stem
    return ParsedDocument(title=title, blocks=blocks)
