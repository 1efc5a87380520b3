"""Reading input files: UTF-8 text, JSON and JSON Lines (optionally gzipped), and passage JSONL.

Every failure is an `InputError` naming the file and, for JSON Lines, the 1-based line number.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import zlib
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from amsrag.errors import InputError
from amsrag.types import Passage, describe_bad_char, lone_surrogate_at, strip_control

_BOM = "\ufeff"
clean_text = strip_control


def file_fingerprint(path: Path) -> str:
    """sha256 of the file's bytes: what tells a changed document from an unchanged one."""
    h = hashlib.sha256()
    with _reading(path), open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_size(path: Path, max_mb: float) -> None:
    """InputError when the file is larger than `max_mb` MiB."""
    size = path.stat().st_size
    if size > max_mb * 1024 * 1024:
        raise InputError(f"{path}: {size / 1024 / 1024:.1f} MiB is larger than the input limit of {max_mb:g} MiB "
                         f"(ingest.max_file_mb in the index configuration); split the file or raise the limit")


def is_gzipped(path: Path) -> bool:
    return path.suffix.lower() == ".gz"


def base_suffix(path: Path) -> str:
    """The extension that names the content: `.jsonl` for both `a.jsonl` and `a.jsonl.gz`."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def base_name(path: Path) -> str:
    """The file name without its content and compression extensions (`nq-open.jsonl.gz` -> `nq-open`)."""
    name = path.name
    if name.lower().endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    return name[: -len(suffix)] if suffix else name


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Translate OS and gzip failures into InputError."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a valid gzip file ({exc})") from None


def _open_binary(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if is_gzipped(path) else open(path, "rb")


def decode_utf8(data: bytes, path: Path, base_offset: int = 0, line: int | None = None) -> str:
    """Strict UTF-8 decoding; the error names the byte offset (in the decompressed stream for .gz)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = " of the decompressed data" if is_gzipped(path) else ""
        on_line = f" (line {line})" if line is not None else ""
        raise InputError(
            f"{path}: not UTF-8 text: invalid byte 0x{data[exc.start]:02x} at byte offset "
            f"{base_offset + exc.start}{where}{on_line}; convert the file to UTF-8"
        ) from None


def read_text(path: Path) -> str:
    """The whole file as text (UTF-8, a leading byte-order mark dropped)."""
    with _reading(path), _open_binary(path) as fh:
        data = fh.read()
    return decode_utf8(data, path).removeprefix(_BOM)


def iter_text_windows(path: Path, block_chars: int = 1 << 18, window_chars: int = 1 << 16,
                      read_bytes: int = 1 << 20) -> Iterator[str | None]:
    """A text file as a stream of windows of about `window_chars` characters, None between two pieces: a
    piece ends at a blank line once it holds `block_chars` characters (the blank line is dropped; a chunk
    never spans two pieces). A line longer than `read_bytes` is read `read_bytes` at a time, so no window,
    line or piece is ever held whole (but a run of whitespace-only line, held until its line ends)."""
    out: list[str] = []
    out_chars = 0
    size = line_start_size = 0
    held: list[str] = []  # the fragments of the line so far while it is all whitespace
    line_start, blank = True, True
    for frag, ends in _iter_fragments(path, read_bytes):
        if line_start:
            line_start_size, blank, held = size, True, []
        if blank and not frag.strip():
            held.append(frag)
        else:
            if blank:
                out += held
                out_chars += sum(map(len, held))
                held, blank = [], False
            out.append(frag)
            out_chars += len(frag)
        size += len(frag)
        line_start = ends
        if ends:
            cut = _end_line(blank, line_start_size, block_chars)
            if cut:
                size = 0
            elif blank:
                out += held
                out_chars += sum(map(len, held))
            held = []
            if cut:
                if out:
                    yield "".join(out)
                out, out_chars = [], 0
                yield None
        if out_chars >= window_chars:  # a window may end inside a line
            yield "".join(out)
            out, out_chars = [], 0
    if not line_start and blank and not _end_line(blank, line_start_size, block_chars):
        out += held  # the last line, without a newline: whitespace kept unless it cuts (then dropped)
    if out:
        yield "".join(out)


def _end_line(blank: bool, size_before: int, block_chars: int) -> bool:
    """Whether a line ends the piece: a blank line once the piece holds `block_chars` characters."""
    return blank and size_before >= block_chars


def _incomplete_tail(data: bytes) -> int:
    """How many bytes at the end of `data` begin a UTF-8 character that the next bytes complete."""
    for i in range(1, min(3, len(data)) + 1):
        byte = data[-i]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead
            continue
        need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
        return i if need > i else 0
    return 0


def _iter_fragments(path: Path, read_bytes: int) -> Iterator[tuple[str, bool]]:
    """(decoded text, whether it ends a line) of a UTF-8 file (gzipped or not) read a line at a time, a line
    longer than `read_bytes` in pieces (never cutting a character); a leading BOM dropped."""
    offset, lineno, carry = 0, 1, b""
    with _reading(path), _open_binary(path) as fh:
        while True:
            raw = fh.readline(read_bytes)
            if not raw:
                if carry:  # the file ends inside a character: the decoder names the byte
                    decode_utf8(carry, path, offset, lineno)
                return
            data = carry + raw
            ends = data.endswith(b"\n")
            cut = 0 if ends else _incomplete_tail(data)
            data, carry = (data[: len(data) - cut], data[len(data) - cut :]) if cut else (data, b"")
            text = decode_utf8(data, path, offset, lineno)
            if offset == 0:
                text = text.removeprefix(_BOM)
            offset += len(data)
            yield text, ends
            if ends:
                lineno += 1


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, decoded line) of a UTF-8 file (gzipped or not), a leading BOM dropped."""
    offset = 0
    with _reading(path), _open_binary(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = decode_utf8(raw, path, offset, lineno)
            offset += len(raw)
            yield lineno, line.removeprefix(_BOM) if lineno == 1 else line


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed value) for every non-blank line."""
    for lineno, line in _iter_lines(path):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{lineno}: malformed JSON: {exc.msg} (column {exc.colno})") from None
        yield lineno, value


# A .json file larger than this whose top level is an array is read an item at a time (`ijson`); a smaller
# one, or an object, is parsed whole (`json`: exact line numbers in its errors).
STREAM_JSON_BYTES = 8 << 20


_UTF8_BOM = _BOM.encode("utf-8")


def _json_items(path: Path) -> Generator[Any, None, None]:
    """The items of the JSON array `path` holds, read as a stream."""
    import ijson

    with _reading(path), _open_binary(path) as fh:
        if fh.read(3) != _UTF8_BOM:
            fh.seek(0)
        try:
            yield from ijson.items(fh, "item", use_float=True)
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: malformed JSON: {exc}") from None


def _json_stream(path: Path) -> Generator[Any, None, None] | None:
    """The items of a large .json array as a stream, else None (read it whole)."""
    if base_suffix(path) != ".json" or path.stat().st_size <= STREAM_JSON_BYTES:
        return None
    with _reading(path), _open_binary(path) as fh:
        head = fh.read(64).removeprefix(_UTF8_BOM).lstrip(b" \t\r\n")
    return _json_items(path) if head[:1] == b"[" else None


def read_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg} (column {exc.colno})") from None


def is_json_lines(path: Path) -> bool:
    return base_suffix(path) == ".jsonl"


def iter_records(path: Path) -> Iterator[tuple[str, Any]]:
    """(place, record) of a JSONL file (place `file:line`) or of a JSON array (place `file[index]`).

    A JSON object that is not an array is yielded once, as itself.
    """
    if is_json_lines(path):
        for lineno, value in iter_jsonl(path):
            yield f"{path}:{lineno}", value
        return
    items = _json_stream(path)
    if items is not None:
        for i, value in enumerate(items):
            yield f"{path}[{i}]", value
        return
    data = read_json(path)
    if isinstance(data, list):
        for i, value in enumerate(data):
            yield f"{path}[{i}]", value
    else:
        yield str(path), data


def first_record(path: Path) -> Any:
    """The first record of a JSON / JSONL file (None when it holds none)."""
    if is_json_lines(path):
        for _, value in iter_jsonl(path):
            return value
        return None
    items = _json_stream(path)
    if items is not None:
        with closing(items):
            return next(items, None)
    data = read_json(path)
    if isinstance(data, list):
        return data[0] if data else None
    return data


# ---------------------------------------------------------------- passage JSONL


def split_flashrag_contents(contents: str) -> tuple[str, str]:
    """FlashRAG corpus `contents` is `"Title"\\ntext`: return (title, text); no newline -> ("", contents)."""
    head, sep, rest = contents.partition("\n")
    if not sep:
        return "", contents.strip()
    title = head.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1].strip()
    return title, rest.strip()


def check_text(value: str, place: str) -> str:
    """`value`, or an InputError naming `place` when it holds a character UTF-8 cannot carry."""
    bad = lone_surrogate_at(value)
    if bad is not None:
        raise InputError(f"{place}: not valid Unicode: {describe_bad_char(value, bad)}; send UTF-8 text")
    return value


_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_id(value: str, place: str) -> str:
    """An id (of a passage or a document), or an InputError naming `place`: a control character (NUL, a
    line break, a tab...) in an id breaks the lines, logs and URLs that carry it."""
    check_text(value, place)
    bad = _ID_CONTROL.search(value)
    if bad is not None:
        raise InputError(f"{place}: {value[:80]!r} holds the control character U+{ord(bad.group()):04X} at "
                         f"character {bad.start()}; ids are one line of printable text")
    return value


def _optional_str(record: dict[str, Any], key: str, place: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{place}: `{key}` must be a string, got {type(value).__name__}")
    return check_text(value, f"{place}: `{key}`")


def _passage_id(record: dict[str, Any], place: str) -> str | None:
    value = record.get("id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"{place}: `id` must be a string or an integer, got {type(value).__name__}")
    pid = str(value).strip()
    if not pid:
        raise InputError(f"{place}: `id` is empty; give a non-empty id or leave the field out")
    return check_id(pid, f"{place}: `id`")


def _title_and_text(record: dict[str, Any], place: str) -> tuple[str, str]:
    title = clean_text(_optional_str(record, "title", place)).strip()
    if "text" in record:
        text = clean_text(_optional_str(record, "text", place)).strip()
    elif "contents" in record:
        text = clean_text(_optional_str(record, "contents", place))
        if "title" not in record:
            title, text = split_flashrag_contents(text)
        text = text.strip()
    else:
        text = ""
    if not text:
        raise InputError(f"{place}: passage without text: each line needs a `text` (or `contents`) that is not "
                         f"empty once whitespace and control characters are removed")
    return title, text


def passage_from_record(record: Any, place: str, default_doc_id: str | None = None) -> Passage:
    """One passage JSONL record `{id?, title?, text | contents, doc_id?, metadata?}`; without a doc_id
    the passage belongs to `default_doc_id` (its file), else to itself."""
    if not isinstance(record, dict):
        raise InputError(f"{place}: expected a JSON object per line, got {type(record).__name__}")
    title, text = _title_and_text(record, place)
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InputError(f"{place}: `metadata` must be a JSON object, got {type(metadata).__name__}")
    doc_id = _optional_str(record, "doc_id", place).strip() or default_doc_id
    if doc_id:
        check_id(doc_id, f"{place}: `doc_id`")
    return Passage.make(text=text, title=title, id=_passage_id(record, place), doc_id=doc_id, metadata=metadata)


def read_passage_jsonl(path: Path, default_doc_id: str | None = None) -> Iterator[tuple[str, Passage]]:
    """(place `file:line`, passage) for every line of a passage JSONL file."""
    for lineno, record in iter_jsonl(path):
        if is_table_record(record):
            continue  # a table (amsrag.ingest.tables reads it)
        place = f"{path}:{lineno}"
        yield place, passage_from_record(record, place, default_doc_id)


def is_table_record(record: object) -> bool:
    """A JSONL line of the `tables` section: {"table": {...}} and no passage text."""
    return isinstance(record, dict) and "table" in record and not ({"text", "contents"} & set(record))
