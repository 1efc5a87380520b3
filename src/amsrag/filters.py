"""Metadata filters (`--where`): which passages a search may return, by source file, type, document, the
document's tags or the date its file was last modified.

One shape for every interface; the CLI flag is a compact spelling of it:

    --where 'source=guides/*.pdf' --where 'type=pdf,html' --where 'tag=admin,ops'
    --where 'modified>=2025-01-01' --where 'modified<2026-01-01'
    {"source": ["guides/*.pdf"], "type": ["pdf", "html"], "tag": ["admin", "ops"],
     "modified": {"gte": "2025-01-01", "lt": "2026-01-01"}}

Fields AND together; the values of one field OR (a field given twice adds values). `source` globs
match a passage's `source` metadata (the path inside its synced folder) or its document key
(`NAME/relative/path`); `doc` globs match the document key only; `type` is the input format. Globs
are `fnmatch`'s, case-sensitive: `*` matches any characters, `/` included.

`tag` and `modified` read the document's row (`amsrag.store.documents.DocumentMeta`): `tag=a,b` keeps
documents carrying any of the tags (exact, case-sensitive); `modified` takes bounds `>=`, `>`, `<=`, `<`
(JSON: `gte`, `gt`, `lte`, `lt`), each at most once, all of which must hold. A bound is a date
`YYYY-MM-DD` or a time `YYYY-MM-DDTHH:MM[:SS]` with an optional `Z` or `±HH:MM` (UTC when it has none).
A date compares by the (UTC) day: `modified<=2025-01-31` includes the whole 31st, `modified>2025-01-31`
starts on February 1st. A document without a recorded modification time or tags matches no such bound.

>>> w = Where.parse(["source=guides/*.pdf", "type=pdf,html"])
>>> w.matches({"source": "guides/admin.pdf", "type": "pdf"})
True
>>> w.matches({"source": "notes/todo.md", "type": "markdown"})
False
>>> Where.from_json({"type": ["html"]}) == Where.parse(["type=html"])
True
>>> recent = Where.parse(["modified>=2025-01-01", "modified<2026-01-01", "tag=admin"])
>>> recent.to_dict()
{'tag': ['admin'], 'modified': {'gte': '2025-01-01', 'lt': '2026-01-01'}}
>>> recent.cli_args()
['tag=admin', 'modified>=2025-01-01', 'modified<2026-01-01']
>>> recent.allows("kb/a.md", "a.md", "markdown", modified="2025-12-31T23:59:59Z", tags=("admin", "ops"))
True
>>> recent.allows("kb/a.md", "a.md", "markdown", modified="2026-01-01T00:00:00Z", tags=("admin",))
False
>>> Where.parse(["modified<=2025-01-31"]).allows("d", None, None, modified="2025-01-31T18:00:00Z")
True
>>> Where.parse(["modified>=2025-02-30"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
amsrag.errors.InputError: --where 'modified>=2025-02-30': '2025-02-30' is not a date; write YYYY-MM-DD or ...
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from fnmatch import translate
from functools import lru_cache
from typing import Any

from amsrag.errors import InputError

FIELDS = ("source", "type", "doc", "tag", "modified")
LIST_FIELDS = ("source", "type", "doc", "tag")  # FIELD=VALUE[,VALUE…]; `modified` takes bounds
TYPES = ("pdf", "html", "docx", "pptx", "epub", "markdown", "text")  # `Passage.metadata["type"]` of document files
BOUNDS = {">=": "gte", ">": "gt", "<=": "lte", "<": "lt"}  # CLI operator -> JSON key, in canonical order
_OPERATORS = {v: k for k, v in BOUNDS.items()}
_FIELD_HELP = ("source (glob), type (pdf, html, docx, pptx, epub, markdown, text), doc (glob of the document key), "
               "tag, or modified (modified>=DATE, modified<DATE, …)")
_SPEC = re.compile(r"([^=<>]*?)\s*(>=|<=|=|>|<)(.*)", re.DOTALL)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?")
DATE_HELP = "write YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] with an optional Z or ±HH:MM"


@dataclass(frozen=True, slots=True)
class Where:
    """A metadata filter: the passages whose `source` matches one of `source`'s globs, whose `type` is one of
    `type`, whose document key matches one of `doc`'s globs, whose document carries one of `tag` and was
    modified within every bound of `modified` ((operator, bound) pairs, JSON keys `gte`…; an empty field
    does not filter). Falsy when it filters nothing."""

    source: tuple[str, ...] = ()
    type: tuple[str, ...] = ()
    doc: tuple[str, ...] = ()
    tag: tuple[str, ...] = ()
    modified: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.source or self.type or self.doc or self.tag or self.modified)

    @property
    def reads_documents(self) -> bool:
        """Whether the filter reads the documents' rows (tags, modification time), not only the passages."""
        return bool(self.tag or self.modified)

    # ---- parsing ----------------------------------------------------------------------------------
    @classmethod
    def parse(cls, specs: Iterable[str] | None) -> Where:
        """The filter of CLI `--where` strings `FIELD=VALUE[,VALUE…]` or `modified OP DATE` (OP one of
        `>=`, `>`, `<=`, `<`).

        >>> Where.parse(["type=pdf", "type=html", "doc=manual/*"])
        Where(source=(), type=('pdf', 'html'), doc=('manual/*',), tag=(), modified=())
        >>> Where.parse(["colour=red"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        amsrag.errors.InputError: --where 'colour=red': unknown field 'colour'; filter by source (glob), ...
        >>> Where.parse(["modified=2025-01-01"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        amsrag.errors.InputError: --where 'modified=2025-01-01': modified takes a bound: modified>=DATE, ...
        """
        values: dict[str, list[str]] = {f: [] for f in LIST_FIELDS}
        bounds: dict[str, str] = {}
        for spec in specs or ():
            where = f"--where {spec!r}"
            found = _SPEC.fullmatch(spec) if isinstance(spec, str) else None
            if found is None:
                raise InputError(f"{where}: expected FIELD=VALUE[,VALUE…], e.g. 'type=pdf,html', "
                                 f"'source=guides/*.pdf' or 'modified>=2025-01-01'")
            name, op, raw = found.group(1).strip(), found.group(2), found.group(3)
            field = _field(name, where)
            if field == "modified":
                if op == "=":
                    raise InputError(f"{where}: modified takes a bound: modified>=DATE, modified>DATE, "
                                     f"modified<=DATE or modified<DATE ({DATE_HELP})")
                _add_bound(bounds, BOUNDS[op], raw.strip(), where)
                continue
            if op != "=":
                raise InputError(f"{where}: only modified takes {', '.join(BOUNDS)}; write {field}=VALUE[,VALUE…]")
            values[field].extend(_values(field, [v.strip() for v in raw.split(",")], where))
        return cls._make(values, bounds)

    @classmethod
    def from_json(cls, obj: object) -> Where:
        """The filter of a request's `where` object: `{"source": [globs], "type": [types], "doc": [globs],
        "tag": [tags], "modified": {"gte": DATE, "lt": DATE}}` (a list field's value may be one string
        instead of a list; null or {} filters nothing).

        >>> Where.from_json({"source": "guides/*", "type": ["pdf"]})
        Where(source=('guides/*',), type=('pdf',), doc=(), tag=(), modified=())
        >>> Where.from_json({"modified": {"gt": "2025-06-01T08:00+02:00"}}).modified
        (('gt', '2025-06-01T06:00:00Z'),)
        """
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise InputError(f"`where` must be an object such as {{\"type\": [\"pdf\"]}}, got {type(obj).__name__}")
        values: dict[str, list[str]] = {f: [] for f in LIST_FIELDS}
        bounds: dict[str, str] = {}
        for name, raw in obj.items():
            where = f"`where.{name}`"
            field = _field(str(name), where)
            if field == "modified":
                if not isinstance(raw, Mapping):
                    raise InputError(f"{where} must be an object of bounds such as {{\"gte\": \"2025-01-01\", "
                                     f"\"lt\": \"2026-01-01\"}}, got {raw!r}")
                for key, bound in raw.items():
                    if key not in _OPERATORS:
                        raise InputError(f"{where}: unknown bound {key!r}; bounds are {', '.join(_OPERATORS)}")
                    if not isinstance(bound, str):
                        raise InputError(f"`where.modified.{key}` must be a date string, got {bound!r}")
                    _add_bound(bounds, key, bound.strip(), f"`where.modified.{key}`")
                continue
            items = [raw] if isinstance(raw, str) else raw
            if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
                raise InputError(f"{where} must be a string or a list of strings, got {raw!r}")
            values[field].extend(_values(field, [v.strip() for v in items], where))
        return cls._make(values, bounds)

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
    def _make(cls, values: Mapping[str, Sequence[str]], bounds: Mapping[str, str]) -> Where:
        ordered = tuple((key, bounds[key]) for key in _OPERATORS if key in bounds)
        return cls(**{f: tuple(dict.fromkeys(values[f])) for f in LIST_FIELDS}, modified=ordered)

    # ---- matching ---------------------------------------------------------------------------------
    def matches(self, passage: Any, document: Any = None) -> bool:
        """Whether a passage (anything with `metadata` and `doc_id`) or a metadata mapping (its document key
        under `doc_id`, if any) passes the filter; `document` (anything with `modified` and `tags`, such as a
        `DocumentInfo`) is the passage's document row, None when it has none."""
        if isinstance(passage, Mapping):
            meta, doc_id = passage, passage.get("doc_id")
        else:
            meta, doc_id = passage.metadata or {}, getattr(passage, "doc_id", None)
        return self.allows(doc_id, meta.get("source"), meta.get("type"), getattr(document, "modified", None),
                           getattr(document, "tags", None) or ())

    def allows(self, doc_id: object, source: object, kind: object, modified: object = None,
               tags: Iterable[str] = ()) -> bool:
        """Whether a passage of document key `doc_id` with metadata `source` and `type` passes, its document
        modified at `modified` (UTC `YYYY-MM-DDTHH:MM:SSZ`, None when unknown) and carrying `tags`."""
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
        if self.tag and not any(t in self.tag for t in tags):
            return False
        if self.modified:
            if not isinstance(modified, str) or not modified:
                return False
            return all(_within(modified, key, bound) for key, bound in self.modified)
        return True

    # ---- spelling -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The request-field form, fields that filter only: `Where.from_json(w.to_dict()) == w`."""
        out: dict[str, Any] = {f: list(getattr(self, f)) for f in LIST_FIELDS if getattr(self, f)}
        if self.modified:
            out["modified"] = dict(self.modified)
        return out

    def cli_args(self) -> list[str]:
        """The `--where` strings of this filter: `Where.parse(w.cli_args()) == w`."""
        out = [f"{f}={','.join(getattr(self, f))}" for f in LIST_FIELDS if getattr(self, f)]
        return out + [f"modified{_OPERATORS[key]}{bound}" for key, bound in self.modified]


def check_tag(tag: object, where: str) -> str:
    """`tag` stripped, or an InputError naming `where`: a tag is a non-empty string without commas (the
    separator of `--where tag=a,b` and `--tag a,b`)."""
    if not isinstance(tag, str):
        raise InputError(f"{where}: a tag must be a string, got {tag!r}")
    text = tag.strip()
    if not text or "," in text:
        raise InputError(f"{where}: tag {tag!r} is {'empty' if not text else 'not one tag (it holds a comma)'}; "
                         f"tags are non-empty and hold no commas")
    return text


def utc_stamp(moment: datetime) -> str:
    """`moment` as the UTC `YYYY-MM-DDTHH:MM:SSZ` that documents record and filters compare (naive: UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _within(modified: str, key: str, bound: str) -> bool:
    """Whether a recorded UTC time passes one bound; a date bound compares the time's day."""
    value = modified[:10] if len(bound) == 10 else modified
    if key == "gte":
        return value >= bound
    if key == "gt":
        return value > bound
    if key == "lte":
        return value <= bound
    return value < bound


def _add_bound(bounds: dict[str, str], key: str, raw: str, where: str) -> None:
    if key in bounds:
        raise InputError(f"{where}: a second {_OPERATORS[key]} bound on modified ({bounds[key]} already); give each "
                         f"bound once")
    bounds[key] = _bound(raw, where)


def _bound(raw: str, where: str) -> str:
    """A date bound as `YYYY-MM-DD`, a time bound as UTC `YYYY-MM-DDTHH:MM:SSZ`."""
    try:
        if _DATE.fullmatch(raw):
            return date.fromisoformat(raw).isoformat()
        if _TIME.fullmatch(raw):
            return utc_stamp(datetime.fromisoformat(raw))
    except ValueError:
        pass
    raise InputError(f"{where}: {raw!r} is not a date; {DATE_HELP}")


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
    if field == "tag":
        items = [check_tag(v, where) for v in items]
    return list(items)
