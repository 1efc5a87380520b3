"""HTML main content with its heading structure, by selectolax (lexbor; MIT).

Dropped: scripts, styles, forms, navigation and page chrome (`nav`, `header`, `footer`, `aside`, and
elements whose class or id names navigation, a sidebar, breadcrumbs, a footer or a local table of
contents). The content root is `main`, else `[role=main]`, else `article` when there is one, else `body`.
Headings `h1`-`h6` become headings; `pre` a code block kept whole; `ul` / `ol` / `dl` one list block
(nested items indented); `table` a table block of `cell | cell` rows; everything else paragraph text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from amsrag.ingest.parsers.base import Block, ParseBudget, ParsedDocument, SkippedDocument, TextBudget, mib

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


def _squash(text: str) -> str:
    return " ".join(text.split())


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


def _table_rows(node: Any) -> list[str]:
    rows = []
    for tr in node.css("tr"):
        cells = [_squash(cell.text(deep=True, separator=" ")) for cell in tr.iter() if cell.tag in ("td", "th")]
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


class _Walker:
    def __init__(self, budget: TextBudget) -> None:
        self.blocks: list[Block] = []
        self.inline: list[str] = []
        self.budget = budget

    def emit(self, kind: str, text: str, level: int = 0) -> None:
        if text.strip():
            self.blocks.append(Block(kind, self.budget.take(text), level))  # type: ignore[arg-type]

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
                self.emit("heading", heading, _HEADINGS[tag])
            elif tag == "pre":
                self.flush()
                self.emit("code", (child.text(deep=True) or "").strip("\n"))
            elif tag in _LISTS:
                self.flush()
                lines: list[str] = []
                _list_lines(child, 0, lines)
                self.emit("list", "\n".join(lines))
            elif tag == "table":
                self.flush()
                self.emit("table", "\n".join(_table_rows(child)))
            elif tag in _BLOCK_TAGS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)


def parse_html(path: Path, budget: ParseBudget) -> ParsedDocument:
    from selectolax.lexbor import LexborHTMLParser

    size = path.stat().st_size
    if size > budget.max_markup_bytes:
        raise SkippedDocument(path, f"{mib(size)} of HTML, more than ingest.max_markup_mb "
                                    f"({mib(budget.max_markup_bytes)})")
    data = path.read_bytes()
    head = data[:2048].lstrip().lower()
    if head.startswith((b"%pdf", b"pk\x03\x04")) or b"\x00" in data[:4096]:
        raise SkippedDocument(path, "not HTML (binary content); check the file's extension")
    tree = LexborHTMLParser(data.decode("utf-8", errors="replace"))
    title_node = tree.css_first("title")
    title = _squash(title_node.text()) if title_node is not None else ""
    tree.strip_tags(list(_DROP_TAGS))
    for node in tree.css("[class], [id], [role]"):
        if _is_chrome(node):
            node.decompose()
    walker = _Walker(TextBudget(path, budget))
    walker.walk(_content_root(tree))
    walker.flush()
    first_heading = next((b for b in walker.blocks if b.kind == "heading"), None)
    if first_heading is not None and first_heading.level == 1:
        title = first_heading.text  # <title> often adds the site's name
    title = title or path.stem
    return ParsedDocument(title=title, blocks=walker.blocks)
