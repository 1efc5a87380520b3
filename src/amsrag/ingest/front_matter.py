"""The `tags` of a Markdown file's front matter (the block between `---` lines that opens the file).

Only `tags` is read, in the spellings static-site generators use; its values become the document's tags:

    ---                          ---                     ---
    tags: [admin, "on call"]     tags: admin, ops        tags:
    ---                          ---                       - admin
                                                           - ops
                                                         ---

A plain value is a comma-separated list (`tags: admin` is one tag). An unclosed `[`, an item that is not a
tag (empty, or holding a comma) or a `tags:` followed by anything else is an InputError naming the file
and line. Other keys and a file without front matter give no tags.

>>> markdown_tags("---\\ntitle: Guide\\ntags: [admin, 'on call']\\n---\\n# Guide\\n", "guide.md")
('admin', 'on call')
>>> markdown_tags("---\\ntags:\\n  - ops\\n  - admin\\n---\\ntext", "a.md")
('ops', 'admin')
>>> markdown_tags("# No front matter\\ntags: [x]", "b.md")
()
"""

from __future__ import annotations

import re

from amsrag.errors import InputError
from amsrag.filters import check_tag

_KEY = re.compile(r"tags[ \t]*:[ \t]*(.*?)[ \t]*(?:#.*)?")
_ITEM = re.compile(r"[ \t]*-[ \t]+(.*?)[ \t]*")
_HEAD_LINES = 200  # front matter longer than this is not looked for further


def markdown_tags(text: str, where: str) -> tuple[str, ...]:
    """The tags of the front matter of Markdown `text` (from the file `where`, for messages), in order."""
    lines = text.lstrip("\ufeff").splitlines()[:_HEAD_LINES]
    if not lines or lines[0].strip() != "---":
        return ()
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return ()
    for i in range(1, end):
        found = _KEY.fullmatch(lines[i])
        if found is None:
            continue
        place = f"{where}: front matter line {i + 1}"
        value = found.group(1)
        if value:
            return _inline(value, place)
        items = []
        for j in range(i + 1, end):
            item = _ITEM.fullmatch(lines[j])
            if item is None:
                break
            items.append(_tag(item.group(1), f"{where}: front matter line {j + 1}"))
        if not items:
            raise InputError(f"{place}: `tags:` is followed by no '- TAG' lines; write tags: [a, b], "
                             f"tags: a, b or one '- TAG' line per tag")
        return tuple(dict.fromkeys(items))
    return ()


def _inline(value: str, place: str) -> tuple[str, ...]:
    if value.startswith("["):
        if not value.endswith("]"):
            raise InputError(f"{place}: `tags: {value}` opens a list it does not close; write tags: [a, b]")
        value = value[1:-1]
        if not value.strip():
            return ()
        return tuple(dict.fromkeys(_tag(v, place) for v in _split(value, place)))
    return tuple(dict.fromkeys(_tag(v, place) for v in value.split(",")))


def _split(value: str, place: str) -> list[str]:
    """The items of a flow list, commas inside quotes kept (the tag check refuses them)."""
    items, current, quote = [], "", ""
    for ch in value:
        if quote:
            current += ch
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            current += ch
            quote = ch
        elif ch == ",":
            items.append(current)
            current = ""
        else:
            current += ch
    if quote:
        raise InputError(f"{place}: `tags` has an unclosed {quote} quote")
    return [*items, current]


def _tag(raw: str, place: str) -> str:
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return check_tag(text, place)
