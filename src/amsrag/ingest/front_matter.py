"""The `tags` of a Markdown file's front matter (the YAML block between `---` lines that opens the file).

The block is parsed by PyYAML (`safe_load`); only `tags` is read, in the spellings static-site generators use —
a list, or a comma-separated string — and its values become the document's tags:

    ---                          ---                     ---
    tags: [admin, "on call"]     tags: admin, ops        tags:
    ---                          ---                       - admin
                                                           - ops
                                                         ---

Front matter that is not valid YAML, or a `tags` that is neither a list nor a string of tags (empty, a mapping,
an item holding a comma) is an InputError naming the file. Other keys and a file without front matter give no
tags.

>>> markdown_tags("---\\ntitle: Guide\\ntags: [admin, 'on call']\\n---\\n# Guide\\n", "guide.md")
('admin', 'on call')
>>> markdown_tags("---\\ntags:\\n  - ops\\n  - admin\\n---\\ntext", "a.md")
('ops', 'admin')
>>> markdown_tags("# No front matter\\ntags: [x]", "b.md")
()
"""

from __future__ import annotations

from amsrag.errors import InputError
from amsrag.filters import check_tag

_HEAD_LINES = 200  # front matter longer than this is not looked for further


def markdown_tags(text: str, where: str) -> tuple[str, ...]:
    """The tags of the front matter of Markdown `text` (from the file `where`, for messages), in order."""
    lines = text.lstrip("\ufeff").splitlines()[:_HEAD_LINES]
    if not lines or lines[0].strip() != "---":
        return ()
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return ()
    import yaml

    place = f"{where}: front matter"
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{place}{at}: not valid YAML ({problem})") from None
    if not isinstance(data, dict) or data.get("tags") is None:
        return ()
    tags = data["tags"]
    if isinstance(tags, str):
        tags = tags.split(",")
    if not isinstance(tags, list) or not tags:
        raise InputError(f"{place}: `tags` must be a list or a comma-separated string, got {tags!r}; write "
                         f"tags: [a, b], tags: a, b or one '- TAG' line per tag")
    return tuple(dict.fromkeys(check_tag(t, place) for t in tags))
