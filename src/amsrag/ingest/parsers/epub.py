"""EPUB 2 and 3 books: the spine's XHTML documents in reading order, each read as HTML is (`html.html_blocks`).

The archive's `META-INF/container.xml` names the package document (OPF); its `dc:title` is the title, its
spine the reading order (items marked `linear="no"`, often notes, are read in their place too). The book's
headings carry the section path across chapters. No anchors: a fragment inside the archive opens nothing
in a browser, so a citation names the file and the section. Bounded like DOCX and PPTX: the unzipped size, each
chapter's markup and the text. A book whose chapters are encrypted (DRM; font obfuscation alone is fine) is
skipped as "encrypted"; XML with entity declarations is not read.
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from urllib.parse import unquote
from xml.etree import ElementTree

from amsrag.ingest.parsers.base import Block, ParseBudget, ParsedDocument, SkippedDocument, TextBudget, mib
from amsrag.ingest.parsers.html import html_blocks

_CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
_MIMETYPE = b"application/epub+zip"
_CHAPTER_TYPES = frozenset(("application/xhtml+xml", "text/html"))
_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
    "enc": "http://www.w3.org/2001/04/xmlenc#",
}
# Reading-system fallbacks: their text ("Your Reading System does not support canvas.") is not the book's.
_FALLBACK_TAGS = ("canvas", "video", "audio")


class _Book:
    def __init__(self, path: Path, archive: zipfile.ZipFile, budget: ParseBudget) -> None:
        self.path = path
        self.archive = archive
        self.budget = budget
        self.entries = {info.filename: info for info in archive.infolist()}

    def skip(self, reason: str) -> SkippedDocument:
        return SkippedDocument(self.path, reason)

    def read(self, name: str, limit: int, what: str) -> bytes:
        info = self.entries.get(name)
        if info is None:
            raise self.skip(f"damaged EPUB: {what} {name!r} is missing")
        if info.file_size > limit:
            raise self.skip(f"{what} {name!r} is {mib(info.file_size)} unzipped, more than ingest.max_markup_mb "
                            f"({mib(limit)})")
        try:
            with self.archive.open(info) as stream:
                data = stream.read(limit + 1)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise self.skip(f"damaged EPUB: {name!r} does not unzip ({exc})") from None
        if len(data) > limit:  # the header understated the size
            raise self.skip(f"{what} {name!r} is larger than ingest.max_markup_mb ({mib(limit)}) unzipped")
        return data

    def xml(self, name: str, what: str) -> ElementTree.Element:
        data = self.read(name, self.budget.max_markup_bytes, what)
        if b"<!ENTITY" in data:
            raise self.skip(f"{what} {name!r} declares XML entities (not read)")
        try:
            return ElementTree.fromstring(data)
        except ElementTree.ParseError as exc:
            raise self.skip(f"damaged EPUB: {what} {name!r} is not well-formed XML ({exc})") from None

    def package_path(self) -> str:
        root = self.xml(_CONTAINER, "the container")
        rootfile = root.find("c:rootfiles/c:rootfile", _NS)
        full_path = rootfile.get("full-path") if rootfile is not None else None
        if not full_path:
            raise self.skip("damaged EPUB: the container names no package document")
        return full_path

    def encrypted(self) -> set[str]:
        if _ENCRYPTION not in self.entries:
            return set()
        root = self.xml(_ENCRYPTION, "the encryption list")
        return {unquote(ref.get("URI", "")) for ref in root.iter(f"{{{_NS['enc']}}}CipherReference")}


def _spine(package: ElementTree.Element, base: str) -> list[str]:
    """Archive names of the spine's (X)HTML documents, in reading order."""
    manifest = {item.get("id"): item for item in package.iterfind("opf:manifest/opf:item", _NS)}
    names: list[str] = []
    for ref in package.iterfind("opf:spine/opf:itemref", _NS):
        item = manifest.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _CHAPTER_TYPES or not item.get("href"):
            continue  # an SVG or image page in the spine has no text to read
        href = unquote(item.get("href", "").split("#", 1)[0])
        names.append(posixpath.normpath(posixpath.join(base, href)))
    return names


def parse_epub(path: Path, budget: ParseBudget) -> ParsedDocument:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SkippedDocument(path, f"not an EPUB (not a zip archive: {exc})") from None
    with archive:
        book = _Book(path, archive, budget)
        unzipped = sum(info.file_size for info in book.entries.values())
        if unzipped > budget.max_package_bytes:
            raise book.skip(f"{mib(unzipped)} unzipped, more than ingest.max_file_mb ({mib(budget.max_package_bytes)})")
        if "mimetype" in book.entries and book.read("mimetype", 64, "the mimetype").strip() != _MIMETYPE:
            raise book.skip("not an EPUB (its mimetype entry names another format)")
        package_name = book.package_path()
        package = book.xml(package_name, "the package document")
        chapters = _spine(package, posixpath.dirname(package_name))
        if not chapters:
            raise book.skip("damaged EPUB: the spine lists no (X)HTML document")
        locked = book.encrypted() & set(chapters)
        if locked:
            raise book.skip(f"encrypted (DRM): {len(locked)} of its {len(chapters)} chapters")
        text = TextBudget(path, budget)
        blocks: list[Block] = []
        first_title = ""
        for name in chapters:
            markup = book.read(name, budget.max_markup_bytes, "chapter").decode("utf-8", errors="replace")
            page_title, chapter = html_blocks(markup, text, drop=_FALLBACK_TAGS)
            first_title = first_title or page_title
            blocks += [Block(b.kind, b.text, b.level, grid=b.grid) for b in chapter]
    title_node = package.find("opf:metadata/dc:title", _NS)
    title = (title_node.text or "").strip() if title_node is not None else ""
    return ParsedDocument(title=title or first_title or path.stem, blocks=blocks)
