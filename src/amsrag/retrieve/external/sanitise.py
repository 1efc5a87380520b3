"""Sanitising what external sources return: HTML stripped to its visible text (script / style
content dropped), instruction-like text ("ignore previous instructions", "you are now", "system
prompt", chat-template markers...) replaced by a marker, and the domain allowlist."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from html.parser import HTMLParser
from urllib.parse import urlsplit

INJECTION_MARK = "[removed: instruction-like text]"
_DROP_TAGS = frozenset({"script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "head"})
_BLOCK_TAGS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                         "td", "th", "blockquote", "pre", "ul", "ol", "table"})
_INJECTION = re.compile(
    r"(?is)"
    r"(?:\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|all|any|your|"
    r"the)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|context)\b[^.\n]*)"
    r"|(?:\byou\s+are\s+now\b[^.\n]*)"
    r"|(?:\b(?:system|developer)\s+(?:prompt|message|instructions?)\b[^.\n]*)"
    r"|(?:\bnew\s+instructions?\s*:[^\n]*)"
    r"|(?:\b(?:act|pretend|behave)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?(?:unrestricted|jailbroken|dan|"
    r"different|evil)\b[^.\n]*)"
    r"|(?:\bjailbreak\w*\b[^.\n]*)"
    r"|(?:\bdo\s+anything\s+now\b[^.\n]*)"
    r"|(?:<\|?(?:im_start|im_end|system|assistant|user|endoftext)\|?>)"
    r"|(?:\[/?INST\]|<</?SYS>>)"
    r"|(?:^\s*#{2,}\s*(?:instruction|system|response)s?\s*:?[^\n]*)"
    r"|(?:^\s*(?:system|assistant)\s*:[^\n]*)"
    r"|(?:\b(?:reveal|print|output|repeat)\b[^.\n]{0,30}\b(?:system\s+prompt|your\s+instructions|hidden\s+prompt)"
    r"[^.\n]*)",
    re.MULTILINE,
)



class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self.dropped: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP_TAGS:
            self._skip += 1
            self.dropped.add(tag)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def strip_html(text: str) -> tuple[str, list[str]]:
    """Visible text of an HTML fragment (script/style/... content dropped); flags name what was removed."""
    flags: list[str] = []
    if "<" in text and ">" in text:
        parser = _TextExtractor()
        parser.feed(text)
        parser.close()
        out = "".join(parser.parts)
        if out != text:
            flags.append("html_stripped")
        flags += [f"removed_{t}" for t in sorted(parser.dropped)]
        text = out
    else:
        text = html.unescape(text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line), flags


def neutralise(text: str) -> tuple[str, bool]:
    """Instruction-like spans replaced by a marker; True when any was found."""
    out, n = _INJECTION.subn(INJECTION_MARK, text)
    return out, n > 0


def domain_allowed(url: str, allowed: Sequence[str]) -> bool:
    """True when `url`'s host is one of `allowed` or a subdomain of one (always True for an empty list)."""
    if not allowed:
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        return False
    return any(host == d.lower().strip(".") or host.endswith("." + d.lower().strip(".")) for d in allowed)
