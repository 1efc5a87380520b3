"""Metadata filters (`--where`): which passages a search may return, by source file, type or document.

One shape for every interface; the CLI flag is a compact spelling of it:

    --where 'source=guides/*.pdf' --where 'type=pdf,html'
    {"source": ["guides/*.pdf"], "type": ["pdf", "html"]}

Fields AND together; the values of one field OR (a field given twice adds values). `source` globs
match a passage's `source` metadata (the path inside its synced folder) or its document key
(`NAME/relative/path`); `doc` globs match the document key only; `type` is the input format. Globs
are `fnmatch`'s, case-sensitive: `*` matches any characters, `/` included.

>>> w = Where.parse(["source=guides/*.pdf", "type=pdf,html"])
>>> w.matches({"source": "guides/admin.pdf", "type": "pdf"})
True
>>> w.matches({"source": "notes/todo.md", "type": "markdown"})
False
>>> Where.from_json({"type": ["html"]}) == Where.parse(["type=html"])
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import translate
from functools import lru_cache
from typing import Any

from amsrag.errors import InputError

FIELDS = ("source", "type", "doc")
TYPES = ("pdf", "html", "docx", "pptx", "markdown", "text")  # `Passage.metadata["type"]` of document files
_FIELD_HELP = "source (glob), type (pdf, html, docx, pptx, markdown, text) or doc (glob of the document key)"


@dataclass(frozen=True, slots=True)
class Where:
    """A metadata filter: the passages whose `source` matches one of `source`'s globs, whose `type` is one of
    `type`, and whose document key matches one of `doc`'s globs (an empty field does not filter).
    Falsy when it filters nothing."""

    source: tuple[str, ...] = ()
    type: tuple[str, ...] = ()
    doc: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.source or self.type or self.doc)

    # ---- parsing ----------------------------------------------------------------------------------
    @classmethod
    def parse(cls, specs: Iterable[str] | None) -> Where:
        """The filter of CLI `--where` strings `FIELD=VALUE[,VALUE…]`.

        >>> Where.parse(["type=pdf", "type=html", "doc=manual/*"])
        Where(source=(), type=('pdf', 'html'), doc=('manual/*',))
        >>> Where.parse(["colour=red"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        amsrag.errors.InputError: --where 'colour=red': unknown field 'colour'; filter by source (glob), ...
        """
        values: dict[str, list[str]] = {f: [] for f in FIELDS}
        for spec in specs or ():
            if not isinstance(spec, str) or "=" not in spec:
                raise InputError(f"--where {spec!r}: expected FIELD=VALUE[,VALUE…], e.g. 'type=pdf,html' or "
                                 f"'source=guides/*.pdf'")
            name, _, raw = spec.partition("=")
            name = name.strip()
            items = [v.strip() for v in raw.split(",")]
            values[_field(name, f"--where {spec!r}")].extend(_values(name, items, f"--where {spec!r}"))
        return cls._make(values)

    @classmethod
    def from_json(cls, obj: object) -> Where:
        """The filter of a request's `where` object: `{"source": [globs], "type": [types], "doc": [globs]}`
        (a field's value may be one string instead of a list; null or {} filters nothing).

        >>> Where.from_json({"source": "guides/*", "type": ["pdf"]})
        Where(source=('guides/*',), type=('pdf',), doc=())
        """
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise InputError(f"`where` must be an object such as {{\"type\": [\"pdf\"]}}, got {type(obj).__name__}")
        values: dict[str, list[str]] = {f: [] for f in FIELDS}
        for name, raw in obj.items():
            where = f"`where.{name}`"
            field = _field(str(name), where)
            items = [raw] if isinstance(raw, str) else raw
            if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
                raise InputError(f"{where} must be a string or a list of strings, got {raw!r}")
            values[field].extend(_values(field, [v.strip() for v in items], where))
        return cls._make(values)

    @classmethod
    def of(cls, value: Where | Mapping[str, Any] | Sequence[str] | None) -> Where:
        """A filter from any of its spellings: a `Where`, the request object, or `--where` strings.

        >>> Where.of(["type=pdf"]) == Where.of({"type": "pdf"}) == Where(type=("pdf",))
        True
        """
        if isinstance(value, Where):
            return value
        if value is None or isinstance(value, Mapping):
            return cls.from_json(value)
        if isinstance(value, str):
            return cls.parse([value])
        return cls.parse(value)

    @classmethod
    def _make(cls, values: Mapping[str, Sequence[str]]) -> Where:
        return cls(**{f: tuple(dict.fromkeys(values[f])) for f in FIELDS})

    # ---- matching ---------------------------------------------------------------------------------
    def matches(self, passage: Any) -> bool:
        """Whether a passage (anything with `metadata` and `doc_id`) or a metadata mapping (its document key
        under `doc_id`, if any) passes the filter."""
        if isinstance(passage, Mapping):
            meta, doc_id = passage, passage.get("doc_id")
        else:
            meta, doc_id = passage.metadata or {}, getattr(passage, "doc_id", None)
        return self.allows(doc_id, meta.get("source"), meta.get("type"))

    def allows(self, doc_id: object, source: object, kind: object) -> bool:
        """Whether a passage of document key `doc_id` with metadata `source` and `type` passes."""
        doc = doc_id if isinstance(doc_id, str) else None
        src = source if isinstance(source, str) else None
        if self.type and kind not in self.type:
            return False
        if self.doc and (doc is None or not _globs(self.doc).match(doc)):
            return False
        if self.source:
            pattern = _globs(self.source)
            if not any(n is not None and pattern.match(n) for n in (src, doc)):
                return False
        return True

    # ---- spelling -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, list[str]]:
        """The request-field form, fields that filter only: `Where.from_json(w.to_dict()) == w`."""
        return {f: list(getattr(self, f)) for f in FIELDS if getattr(self, f)}

    def cli_args(self) -> list[str]:
        """The `--where` strings of this filter: `Where.parse(w.cli_args()) == w`."""
        return [f"{f}={','.join(getattr(self, f))}" for f in FIELDS if getattr(self, f)]


@lru_cache(maxsize=256)
def _globs(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern matching a whole string that any of `globs` matches (`fnmatch.fnmatchcase` semantics)."""
    return re.compile("|".join(f"(?:{translate(g)})" for g in globs))


def _field(name: str, where: str) -> str:
    if name not in FIELDS:
        raise InputError(f"{where}: unknown field {name!r}; filter by {_FIELD_HELP}")
    return name


def _values(field: str, items: Sequence[str], where: str) -> list[str]:
    if not items or any(not v for v in items):
        raise InputError(f"{where}: empty value for {field}; give one or more values separated by commas")
    if field == "type":
        items = [v.lower() for v in items]
        unknown = [v for v in items if v not in TYPES]
        if unknown:
            raise InputError(f"{where}: unknown type {unknown[0]!r}; types are {', '.join(TYPES)}")
    return list(items)
