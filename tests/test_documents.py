"""Documents people have: PDF, HTML, DOCX and PPTX parsed into blocks, chunked at headings with citations
(source, page, section, offsets), and bad documents skipped by name while the rest of a folder indexes.
Fixtures: tests/fixtures/documents (SOURCES.md there gives each file's origin and licence)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.ingest.blocks import document_passages, extracted_text
from amsrag.ingest.formats import detect_format
from amsrag.ingest.parsers import ParseBudget, SkippedDocument, parse_document
from amsrag.ingest.parsers.pdf import dehyphenate, running_lines
from amsrag.text.citations import citation_label, citation_of, page_label
from amsrag.types import Passage

DOCS = Path(__file__).parent / "fixtures" / "documents"


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


def passages_of(name: str, counter: TokenCounter, config: ChunkConfig | None = None) -> list[Passage]:
    path = DOCS / name
    fmt = detect_format(path)
    return document_passages(parse_document(path, fmt), f"docs/{name}", name, fmt, config, counter)


def containing(passages: list[Passage], needle: str) -> Passage:
    found = [p for p in passages if needle in p.text]
    assert found, f"no passage contains {needle!r}"
    return found[0]


def check_offsets(name: str, passages: list[Passage]) -> None:
    path = DOCS / name
    full = extracted_text(parse_document(path, detect_format(path)))
    for p in passages:
        assert full[p.metadata["char_start"] : p.metadata["char_end"]] == p.text


# ---------------------------------------------------------------- PDF


def test_pdf_pages_and_outline_sections(counter: TokenCounter) -> None:
    got = passages_of("debian-reference-p30-33.pdf", counter)
    root = containing(got, "The root account is also called superuser")
    assert root.metadata["page"] == 1 and root.metadata["type"] == "pdf"
    assert root.metadata["section"] == "GNU/Linux tutorials › Console basics › The root account"
    assert root.title == "Debian Reference (pages 30-33) › The root account"
    assert containing(got, "six switchable VT100-like").metadata["page"] == 2
    sudo = containing(got, "For the typical single user workstation")
    assert sudo.metadata["page"] == 4 and sudo.metadata["section"].endswith("› sudo configuration")
    assert all(p.metadata["source"] == "debian-reference-p30-33.pdf" for p in got)
    # the running head "Debian Reference N / 233" of every page is gone, and so is the "1.1.4" before a title
    assert not any("Debian Reference" in p.text and "/ 233" in p.text for p in got)
    assert not any(line.strip() == "1.1.4" for p in got for line in p.text.splitlines())
    check_offsets("debian-reference-p30-33.pdf", got)


def test_pdf_page_range_when_a_chunk_runs_onto_the_next_page(counter: TokenCounter) -> None:
    got = passages_of("cite.pdf", counter, ChunkConfig(max_tokens=512, overlap_tokens=0))
    spanning = [p for p in got if "page_end" in p.metadata]
    assert spanning and all(p.metadata["page_end"] == p.metadata["page"] + 1 for p in spanning)
    assert page_label(spanning[0].metadata) == f"pp. {spanning[0].metadata['page']}-{spanning[0].metadata['page_end']}"
    assert page_label({"page": 3}) == "p. 3" and page_label({}) == ""


def test_pdf_hyphenation_and_page_numbers_removed(counter: TokenCounter) -> None:
    got = passages_of("cite.pdf", counter)
    text = "\n".join(p.text for p in got)
    assert "compressed into a range" in text and "superscript citation" in text  # "com-/pressed" joined
    assert "\ufffe" not in text
    groups = containing(got, "Groups of three or more consecutive numbers").metadata  # the top of page 2
    assert groups["page"] <= 2 <= groups.get("page_end", groups["page"]) and groups.get("page_end", 2) <= 3
    # the bare page number that ends every page is a running foot
    assert not any(p.text.rstrip().endswith(f"\n{n}") for p in got for n in range(1, 6))
    check_offsets("cite.pdf", got)


def test_pdf_of_only_repeated_lines_keeps_them(counter: TokenCounter) -> None:
    got = passages_of("heads-only.pdf", counter)  # every page: the same header and footer, a page number
    assert got and "This is the header of the inserted pdf document\nLandscape 1" in got[0].text


def test_dehyphenate_keeps_compounds_the_document_spells_with_a_hyphen() -> None:
    assert dehyphenate("an exam-\nple here", set()) == "an example here"
    assert dehyphenate("a well-\nknown fact", {"well-known"}) == "a well-\nknown fact"
    assert dehyphenate("see ISO-\n9000", set()) == "see ISO-\n9000"  # a digit does not start a lower-case word
    pages = [["Manual 1", "body a", "Page 1"], ["Manual 2", "body b", "Page 2"], ["Manual 3", "c", "Page 3"],
             ["Manual 4", "body d", "Page 4"]]
    assert running_lines(pages) == {"manual #", "page #"}
    # a slide built up over three of ten pages repeats its first line without a page number: content, kept
    slides = [["Information overload", f"point {'abc'[n - 2]}"] if n in (2, 3, 4) else [f"topic {chr(97 + n)}"]
              for n in range(12)]
    assert running_lines(slides) == set()
    assert running_lines([["CONFIDENTIAL", f"text {chr(97 + n)}"] for n in range(10)]) == {"confidential"}


# ---------------------------------------------------------------- HTML, DOCX, PPTX


def test_html_main_content_headings_and_whole_code_blocks(counter: TokenCounter) -> None:
    got = passages_of("policy-diversions.html", counter)
    text = "\n".join(p.text for p in got)
    assert "Quick search" not in text and "Table of Contents" not in text  # the Sphinx sidebar
    first = got[0]
    assert first.title.startswith("7. Diversions") and first.metadata["section"] == ""
    code = containing(got, "dpkg-divert --package smailwrapper --add --rename")
    assert "--divert /usr/sbin/smail.real /usr/sbin/smail" in code.text  # the whole block in one passage
    assert "page" not in code.metadata and code.metadata["type"] == "html"
    check_offsets("policy-diversions.html", got)


def test_epub_chapters_in_reading_order_with_their_sections(counter: TokenCounter) -> None:
    got = passages_of("trees.epub", counter)
    assert [p.metadata["section"] for p in got] == ["Classification"] * 3 + ["Morphology"] * 4  # the spine's order
    assert all(p.title.startswith("Trees › ") and p.metadata["type"] == "epub" and "page" not in p.metadata
               for p in got)
    rings = containing(got, "growth rings")
    assert rings.metadata["section"] == "Morphology" and rings.metadata["source"] == "trees.epub"
    text = "\n".join(p.text for p in got)
    assert "Reading System does not support canvas" not in text  # a reading system's fallback, not the book
    assert "Classification Morphology" not in text  # the title page's table of contents (a nav)
    check_offsets("trees.epub", got)


def epub_variant(tmp_path: Path, name: str, replace: dict[str, bytes | None]) -> Path:
    """trees.epub with some entries replaced (bytes) or left out (None)."""
    out = tmp_path / name
    with zipfile.ZipFile(DOCS / "trees.epub") as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = replace.get(info.filename, src.read(info))
            if data is not None:
                dst.writestr(info.filename, data)
        for entry, data in replace.items():
            if entry not in src.namelist() and data is not None:
                dst.writestr(entry, data)
    return out


def encryption_of(uri: str) -> bytes:
    return (b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
            b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
            b'<enc:CipherReference URI="' + uri.encode() + b'"/></enc:CipherData></enc:EncryptedData></encryption>')


def test_bad_epubs_are_skipped_with_their_reason(tmp_path: Path) -> None:
    as_epub = tmp_path / "book.epub"
    shutil.copy(DOCS / "policy-diversions.html", as_epub)
    assert skipped(as_epub, "epub").startswith("not an EPUB (not a zip archive")
    assert skipped(epub_variant(tmp_path, "odt.epub", {"mimetype": b"application/vnd.oasis.opendocument.text"}),
                   "epub").startswith("not an EPUB (its mimetype")
    assert skipped(epub_variant(tmp_path, "drm.epub", {"META-INF/encryption.xml": encryption_of("EPUB/c2.xhtml")}),
                   "epub") == "encrypted (DRM): 1 of its 3 chapters"
    fonts_only = epub_variant(tmp_path, "fonts.epub", {"META-INF/encryption.xml": encryption_of("EPUB/font.otf")})
    assert parse_document(fonts_only, "epub").title == "Trees"  # obfuscated fonts leave the text readable
    assert "'EPUB/c1.xhtml' is missing" in skipped(epub_variant(tmp_path, "cut.epub", {"EPUB/c1.xhtml": None}),
                                                   "epub")
    assert "names no package document" in skipped(
        epub_variant(tmp_path, "nocontainer.epub", {"META-INF/container.xml": b"<container/>"}), "epub")
    package = zipfile.ZipFile(DOCS / "trees.epub").read("EPUB/package.opf")
    laughs = b'<?xml version="1.0"?><!DOCTYPE p [<!ENTITY a "aaaa">]>' + package.split(b"?>", 1)[1]
    assert "declares XML entities" in skipped(epub_variant(tmp_path, "laughs.epub", {"EPUB/package.opf": laughs}),
                                              "epub")
    assert "not well-formed XML" in skipped(
        epub_variant(tmp_path, "badxml.epub", {"EPUB/package.opf": package[:200]}), "epub")
    assert "more than ingest.max_file_mb" in skipped(DOCS / "trees.epub", "epub", ParseBudget(max_package_bytes=4096))
    assert "more than ingest.max_markup_mb" in skipped(DOCS / "trees.epub", "epub", ParseBudget(max_markup_bytes=3000))
    assert "characters of text" in skipped(DOCS / "trees.epub", "epub", ParseBudget(max_text_chars=1000))


def test_docx_heading_path_lists_and_tables(counter: TokenCounter) -> None:
    got = passages_of("handbook.docx", counter)
    build = containing(got, "rebuild its firmware")
    assert build.metadata["section"] == "Installation › Building from source"
    assert build.title == "Lighthouse keeper handbook › Building from source"
    assert "- Unpack the controller sources.\n- Run the make command" in build.text
    assert "Wind clockwork | 18:00" in containing(got, "Cover lens").text
    word = passages_of("word-styles.docx", counter)  # a file Word itself wrote
    # no title in its properties: its first heading is the title, so the path below it is empty
    assert [(p.title, p.metadata["section"], p.text) for p in word] == [
        ("Heading 1", "", "no specified style\n\nmissing style"), ("Heading 1", "", "Body Text")]
    check_offsets("handbook.docx", got)


def test_pptx_slides_are_pages(counter: TokenCounter) -> None:
    got = passages_of("slides.pptx", counter)
    fog = containing(got, "fog horn")
    assert (fog.metadata["page"], fog.metadata["section"]) == (2, "Fog signal")
    assert "Compressor oil" in fog.text and "spare diaphragm" in fog.text  # an indented point and the notes
    assert containing(got, "November | Paraffin and flour").metadata["page"] == 3


# ---------------------------------------------------------------- bad documents


def skipped(path: Path, fmt: str, budget: ParseBudget | None = None) -> str:
    with pytest.raises(SkippedDocument) as info:
        parse_document(path, fmt, budget)
    assert str(info.value).startswith(f"{path}: skipped: ")
    return info.value.reason


def test_bad_documents_are_skipped_with_their_reason(tmp_path: Path) -> None:
    assert skipped(DOCS / "encrypted.pdf", "pdf").startswith("encrypted")
    assert skipped(DOCS / "image-only.pdf", "pdf").startswith("no text layer")
    assert "more than ingest.max_pages (3)" in skipped(DOCS / "cite.pdf", "pdf", ParseBudget(max_pages=3))
    assert "characters of text" in skipped(DOCS / "cite.pdf", "pdf", ParseBudget(max_text_chars=1000))
    truncated = tmp_path / "cut.pdf"
    truncated.write_bytes((DOCS / "cite.pdf").read_bytes()[:3000])
    assert skipped(truncated, "pdf").startswith("corrupt PDF")
    html_as_pdf = tmp_path / "page.pdf"
    shutil.copy(DOCS / "policy-diversions.html", html_as_pdf)
    assert skipped(html_as_pdf, "pdf").startswith("not a PDF")
    pdf_as_docx = tmp_path / "report.docx"
    shutil.copy(DOCS / "cite.pdf", pdf_as_docx)
    assert skipped(pdf_as_docx, "docx").startswith("corrupt DOCX (not a valid zip")
    cut_docx = tmp_path / "cut.docx"
    cut_docx.write_bytes((DOCS / "handbook.docx").read_bytes()[:9000])
    assert skipped(cut_docx, "docx").startswith("corrupt DOCX")
    plain_zip = tmp_path / "deck.pptx"
    with zipfile.ZipFile(plain_zip, "w") as z:
        z.writestr("notes.txt", "not a presentation")
    assert skipped(plain_zip, "pptx").startswith("not a PPTX")
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        for info in zipfile.ZipFile(DOCS / "handbook.docx").infolist():
            z.writestr(info, zipfile.ZipFile(DOCS / "handbook.docx").read(info))
        z.writestr("word/filler.xml", b"<a>" + b" " * (3 << 20) + b"</a>")
        z.writestr("word/media/filler.bin", b"\0" * (5 << 20))
    assert skipped(bomb, "docx", ParseBudget(max_markup_bytes=2 << 20)).startswith("its XML unzips to 3.")
    assert skipped(bomb, "docx", ParseBudget(max_package_bytes=4 << 20)).startswith("unzips to 8.")
    assert "of HTML, more than ingest.max_markup_mb" in skipped(DOCS / "policy-diversions.html", "html",
                                                                ParseBudget(max_markup_bytes=4096))
    binary_html = tmp_path / "saved.html"
    shutil.copy(DOCS / "image-only.pdf", binary_html)
    assert skipped(binary_html, "html").startswith("not HTML")


# ---------------------------------------------------------------- OCR of scanned PDFs (the ocr extra)


def scan_of(source: Path, out: Path, pages: int = 1, dpi: int = 300) -> Path:
    """An image-only PDF of `source`'s first pages, as a scanner would make it (grey bitmaps, no text layer)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(source))
    images = [doc[i].render(scale=dpi / 72, grayscale=True).to_pil() for i in range(pages)]
    doc.close()
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return out


def test_ocr_lines_are_rebuilt_from_boxes_in_reading_order() -> None:
    from amsrag.ingest.parsers.ocr import lines_of

    def box(x: float, y: float, w: float = 50, h: float = 20) -> list[list[float]]:
        return [[x, y], [x + w, y], [x + w, y + h], [x, y + h]]

    result = [[box(200, 102), "shell.", 0.97], [box(10, 100), "Now you are in the", 0.99],
              [box(10, 140), "foo:~$ ls\uff0c", 0.9], [box(300, 141), "~", 0.2]]  # a speck read as "~"
    assert lines_of(result) == ["Now you are in the shell.", "foo:~$ ls,"]
    assert lines_of([]) == []


@pytest.mark.slow
def test_a_scanned_pdf_is_read_by_ocr_with_its_pages(tmp_path: Path, counter: TokenCounter,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from amsrag.ingest.parsers import ocr

    if not ocr.available():
        pytest.skip("the ocr extra is not installed")  # the test extra installs it: CI runs this test
    source = DOCS / "debian-reference-p30-33.pdf"
    scan = scan_of(source, tmp_path / "scan.pdf")
    assert "no text layer" in skipped(scan, "pdf", ParseBudget(ocr_pages=0)) and "OCR is off" in skipped(
        scan, "pdf", ParseBudget(ocr_pages=0))
    two = scan_of(source, tmp_path / "two.pdf", pages=2)
    assert "of 2 pages, more than ingest.ocr_max_pages (1)" in skipped(two, "pdf", ParseBudget(ocr_pages=1))
    with monkeypatch.context() as absent:
        absent.setitem(sys.modules, ocr.MODULE, None)
        assert "pip install 'amsrag[ocr]'" in skipped(scan, "pdf")
    with monkeypatch.context() as broken:  # installed, but its engine does not load (opencv without libGL)
        broken.setattr(ocr, "_ENGINE", [])
        broken.setitem(sys.modules, "cv2", None)
        for name in [m for m in sys.modules if m.startswith(ocr.MODULE)]:
            broken.delitem(sys.modules, name)
        assert "the OCR engine did not load: ModuleNotFoundError" in skipped(scan, "pdf")
    heard: list[str] = []
    parsed = parse_document(scan, "pdf", notice=heard.append)
    assert heard == ["scan.pdf: no text layer, reading page 1 of 1 by OCR"]  # a long job says where it is
    assert parsed.pages == 1 and {b.page for b in parsed.blocks} == {1}
    import pypdfium2 as pdfium

    original = pdfium.PdfDocument(str(source))
    layer = re.findall(r"[a-z]{4,}", original[0].get_textpage().get_text_range().lower())
    original.close()
    words = re.findall(r"[a-z]{4,}", extracted_text(parsed).lower())
    recall = sum(min(words.count(w), layer.count(w)) for w in set(layer)) / len(layer)
    assert recall >= 0.85, recall  # the words of the page's own text layer read back from its image (0.90)
    got = document_passages(parsed, "docs/scan.pdf", "scan.pdf", "pdf", None, counter)
    shell = containing(got, "Now you are in the shell")
    assert shell.metadata["page"] == 1 and shell.metadata["type"] == "pdf"


@pytest.mark.slow
def test_a_scanned_page_inside_a_text_pdf_is_read_by_ocr(tmp_path: Path) -> None:
    import pypdfium2 as pdfium

    from amsrag.ingest.parsers import ocr

    if not ocr.available():
        pytest.skip("the ocr extra is not installed")  # the test extra installs it: CI runs this test
    source = DOCS / "debian-reference-p30-33.pdf"
    scan = pdfium.PdfDocument(str(scan_of(source, tmp_path / "scan.pdf", pages=2)))
    text = pdfium.PdfDocument(str(source))
    mixed = pdfium.PdfDocument.new()
    mixed.import_pages(text, [0])  # page 1 keeps its text layer, page 2 is the scan of the original page 2
    mixed.import_pages(scan, [1])
    mixed.save(tmp_path / "mixed.pdf")
    for doc in (mixed, scan, text):
        doc.close()
    heard: list[str] = []
    parsed = parse_document(tmp_path / "mixed.pdf", "pdf", notice=heard.append)
    assert heard == ["mixed.pdf: page 2 has no text layer, reading it by OCR (1 of 1)"]
    page_two = " ".join(b.text for b in parsed.blocks if b.page == 2)
    assert "gain the root shell prompt" in page_two and "su -l" in page_two
    assert any(b.page == 1 and "Now you are in the shell" in b.text for b in parsed.blocks)  # the text layer
    unread = parse_document(tmp_path / "mixed.pdf", "pdf", ParseBudget(ocr_pages=0))
    assert {b.page for b in unread.blocks} == {1}  # OCR off: the page stays empty, the file is still read


# ---------------------------------------------------------------- through an index, on both backends


def folder_with_bad_documents(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in ("debian-reference-p30-33.pdf", "slides.pptx", "encrypted.pdf", "image-only.pdf", "trees.epub"):
        shutil.copy(DOCS / name, root / name)
    (root / "manual").mkdir()
    shutil.copy(DOCS / "policy-diversions.html", root / "manual" / "diversions.html")
    (root / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    return root


def build_and_read(folder: Path, target: str) -> tuple[dict, dict[str, Passage]]:
    from amsrag.store.open import open_index
    from test_indexing import invoke

    code, out = invoke("index", "build", str(folder), "--index", target, "--json", "-q")
    assert code == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    with open_index(target) as idx:
        passages = {p.id: p for p in idx.iter_passages()}
    return report, passages


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["embedded", "postgres"])
def test_folder_indexes_around_bad_documents_and_keeps_citations(backend: str, tmp_path: Path,
                                                                request: pytest.FixtureRequest) -> None:
    folder = folder_with_bad_documents(tmp_path / "kb")
    target = request.getfixturevalue("pg_url") if backend == "postgres" else str(tmp_path / "idx")
    report, stored = build_and_read(folder, target)
    assert {(s["file"], s["reason"].split(" (")[0]) for s in report["skipped_files"]} == {
        ("kb/encrypted.pdf", "encrypted"), ("kb/image-only.pdf", "no text layer"), ("kb/broken.docx", "corrupt DOCX")}
    sources = {p.metadata["source"] for p in stored.values()}
    assert sources == {"debian-reference-p30-33.pdf", "slides.pptx", "manual/diversions.html", "trees.epub"}
    rings = next(p for p in stored.values() if "growth rings" in p.text)
    assert (rings.doc_id, rings.metadata["section"], rings.metadata["type"]) == ("kb/trees.epub", "Morphology", "epub")
    root = next(p for p in stored.values() if "also called superuser" in p.text)
    assert root.doc_id == "kb/debian-reference-p30-33.pdf"
    assert {k: root.metadata[k] for k in ("page", "section", "type")} == {
        "page": 1, "section": "GNU/Linux tutorials › Console basics › The root account", "type": "pdf"}
    assert root.metadata["char_end"] - root.metadata["char_start"] == len(root.text)
    # `ask` prints the citation; the API's retrieve and ask carry it as a structured field
    from test_indexing import invoke

    question = "How do I gain the root shell prompt with the root password?"
    code, out = invoke("ask", question, "--index", target, "--no-log")
    assert code == 0, out
    printed = " ".join(out.split())  # the console wraps long lines
    assert re.search(r"\[kb/debian-reference-p30-33\.pdf#\d+\] debian-reference-p30-33\.pdf p\. [1-4] · GNU/Linux "
                     r"tutorials › Console basics › ", printed), printed
    from amsrag.config import ServeConfig
    from amsrag.pipeline import Engine
    from amsrag.serve import Service

    service = Service(Engine.open(target), ServeConfig())
    try:
        retrieved = service.retrieve(question, "full", 3)["passages"]
        asked = service.ask(question, "full")["sources"]
    finally:
        service.close()
    cited = [p["citation"] for p in retrieved + asked]
    assert all(c is not None and c["label"].startswith(c["source"]) for c in cited)
    pdf = [c for c in cited if c["source"] == "debian-reference-p30-33.pdf"]
    assert pdf and all(1 <= c["page"] <= 4 and c["char_end"] > c["char_start"] for c in pdf)
    assert all(c["label"] == f"{c['source']} p. {c['page']} · {c['section']}" for c in pdf if "page_end" not in c)


def test_citation_labels() -> None:
    pdf = {"source": "guides/admin-guide.pdf", "type": "pdf", "page": 14, "section": "Installation › Building"}
    assert citation_label(pdf) == "guides/admin-guide.pdf p. 14 · Installation › Building"
    assert citation_label({**pdf, "page_end": 15}) == "guides/admin-guide.pdf pp. 14-15 · Installation › Building"
    assert citation_label({"source": "install.html", "type": "html", "section": ""}) == "install.html"
    assert citation_of({"source": "hotpotqa"}) is None  # a data set's passages name no file
    got = citation_of({**pdf, "char_start": 0, "char_end": 9, "chunk": 3})
    assert got == {"source": "guides/admin-guide.pdf", "page": 14, "section": "Installation › Building",
                   "char_start": 0, "char_end": 9, "label": citation_label(pdf)}


@pytest.mark.slow
def test_sync_keeps_what_a_now_unreadable_file_had_stored(tmp_path: Path) -> None:
    from test_indexing import invoke

    folder = folder_with_bad_documents(tmp_path / "kb")
    target = str(tmp_path / "idx")
    _, before = build_and_read(folder, target)
    shutil.copy(DOCS / "encrypted.pdf", folder / "debian-reference-p30-33.pdf")  # the file is replaced by a locked one
    (folder / "slides.pptx").unlink()
    code, out = invoke("index", "sync", str(folder), "--index", target)
    assert code == 0, out
    assert "skipped: encrypted (the PDF needs a password): kb/debian-reference-p30-33.pdf" in " ".join(out.split())
    from amsrag.store.open import open_index

    with open_index(target) as idx:
        after = {p.id: p for p in idx.iter_passages()}
    pdf_ids = {pid for pid in before if pid.startswith("kb/debian-reference-p30-33.pdf#")}
    assert pdf_ids and pdf_ids <= set(after)  # nothing stored from it is lost
    assert not any(pid.startswith("kb/slides.pptx#") for pid in after)  # a removed file still leaves the index
