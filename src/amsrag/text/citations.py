"""Where a passage came from, as a reader opens it: `admin-guide.pdf p. 14 · Installation › Building from source`.

Read from the passage metadata that document ingest writes (`source`, `page`, `page_end`, `section`, `anchor`,
`char_start`, `char_end`); passages without a `source` (data sets, passage JSONL) have no citation. `anchor` is the
fragment that opens the source at the passage's section (an HTML heading's id, a Markdown heading's slug).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

CITATION_KEYS = ("source", "page", "page_end", "section", "anchor", "char_start", "char_end")
FRAGMENT_SAFE = "-._~!$&'()*+,;=:@/?"  # what a URL fragment may hold as it is (RFC 3986); the rest %-encoded
SECTION_JOIN = " › "  # between the headings of a section path, in `section` and in a passage's title


def page_label(metadata: Mapping[str, Any]) -> str:
    """`p. 14` or `pp. 14-15` for a passage with pages, else ""."""
    page = metadata.get("page")
    if page is None:
        return ""
    end = metadata.get("page_end")
    return f"pp. {page}-{end}" if end and end != page else f"p. {page}"


def citation_label(metadata: Mapping[str, Any]) -> str:
    """`file p. N · Section › Subsection` (the parts that are known), "" without a source file."""
    source = metadata.get("source")
    if not isinstance(source, str) or not source or "type" not in metadata:
        return ""
    place = " ".join(part for part in (source, page_label(metadata)) if part)
    section = metadata.get("section")
    return f"{place} · {section}" if isinstance(section, str) and section else place


def citation_of(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The structured citation of a passage (its known fields and `label`), None when it has none."""
    label = citation_label(metadata)
    if not label:
        return None
    return {**{k: metadata[k] for k in CITATION_KEYS if metadata.get(k) not in (None, "")}, "label": label}


def fragment(metadata: Mapping[str, Any]) -> str:
    """The place in the source file a citation opens: `#page=N` for a passage with a page, else `#ANCHOR` for one
    with a section anchor, else ""."""
    page = metadata.get("page")
    if isinstance(page, int) and not isinstance(page, bool):
        return f"#page={page}"
    anchor = metadata.get("anchor")
    if isinstance(anchor, str) and anchor:
        return "#" + quote(anchor, safe=FRAGMENT_SAFE)
    return ""
