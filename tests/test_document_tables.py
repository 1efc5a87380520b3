"""Real tables found in HTML, DOCX, PPTX and PDF go to the table store (the structured route answers over them) as
well as to the passage index as text; layout tables and tables without a header are text only; a document's tables
are replaced and deleted with it. Fixtures: tests/fixtures/documents (observatories.html, fleet.docx, ferries.pptx,
accruals.pdf, warn-summary.pdf; SOURCES.md)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amsrag.cli import app
from amsrag.indexing.tables import document_table_ids
from amsrag.ingest.document_tables import document_tables
from amsrag.ingest.parsers import parse_document
from amsrag.ingest.parsers.grids import real_grid
from amsrag.ingest.parsers.html_tables import expand_spans
from amsrag.store import EmbeddedIndex

DOCS = Path(__file__).parent / "fixtures" / "documents"
runner = CliRunner()


# ---------------------------------------------------------------- the rule


def test_real_grid_needs_a_header_two_columns_two_data_rows_and_rectangular_rows() -> None:
    header, rows = ["Name", "Score"], [["a", "1"], ["b", "2"]]
    grid = real_grid(header, rows, "Scores")
    assert grid is not None and grid.header == ("Name", "Score") and grid.rows == (("a", "1"), ("b", "2"))
    assert real_grid(["Name"], [["a"], ["b"]]) is None  # one column
    assert real_grid(header, [["a", "1"]]) is None  # one data row
    assert real_grid(header, [["a", "1"], ["", ""]]) is None  # a row without text does not count
    assert real_grid(header, [["a", "1"], ["b"]]) is None  # ragged
    assert real_grid(["", ""], rows) is None  # an empty header
    assert real_grid(header, [["a", "x" * 20_000], ["b", "2"]]) is None  # past the store's cell limit


def test_spans_repeat_a_cell_into_the_cells_it_covers() -> None:
    rows = [[("H1", 1, 1), ("H2", 2, 1)], [("a", 1, 2), ("b", 1, 1), ("c", 1, 1)], [("d", 1, 1), ("e", 1, 1)]]
    assert expand_spans(rows) == [["H1", "H2", "H2"], ["a", "b", "c"], ["a", "d", "e"]]
    assert expand_spans([[("x", 1, 3)], [], [("y", 1, 1)]]) == [["x"], ["x"], ["x", "y"]]


# ---------------------------------------------------------------- parsers


def test_html_real_table_has_its_grid_layout_and_headerless_tables_do_not() -> None:
    doc = parse_document(DOCS / "observatories.html", "html")
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert len(tables) == 2  # the layout table's content is read as blocks, not as a table
    real, contacts = tables
    assert real.grid is not None and real.grid.caption == "Main telescopes"
    assert real.grid.header == ("Observatory", "Aperture (cm)", "Founded", "Region")
    assert real.grid.rows[1] == ("Brackenfell", "85", "1958", "North")  # rowspan repeated
    assert "Hillcrest | 120 | 1931 | North" in real.text  # the text block stays as written
    assert contacts.grid is None and contacts.text == "Post | Harbour Road 4\nRadio | Channel 14"
    headings = [b.text for b in doc.blocks if b.kind == "heading"]
    assert "Summer" in headings and "Winter" in headings  # the layout table's own headings
    assert any(b.kind == "list" and "Closed for the whole of January" in b.text for b in doc.blocks)


def test_html_layout_table_rules(tmp_path: Path) -> None:
    def grids(body: str) -> list[object]:
        page = tmp_path / "t.html"
        page.write_text(f"<html><body><main><h1>T</h1>{body}</main></body></html>", encoding="utf-8")
        return [b.grid for b in parse_document(page, "html").blocks if b.kind == "table"]

    data = "<tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr>"
    assert grids(f"<table>{data}</table>")[0] is not None  # a first row of th cells is the header
    assert grids(f"<table role='presentation'>{data}</table>") == []  # a layout table: read as blocks
    nested = "<tr><th>A</th><th>B</th></tr><tr><td><table><tr><td>x</td></tr></table></td><td>2</td></tr>"
    assert all(g is None for g in grids(f"<table>{nested}</table>"))
    assert grids("<table><tr><td>only</td></tr><tr><td>one column</td></tr></table>") == []
    two_heads = "<thead><tr><th>A</th><th>B</th></tr><tr><th>a</th><th>b</th></tr></thead>"
    assert grids(f"<table>{two_heads}<tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></table>") == [None]
    ragged = "<tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr><tr><td>3</td></tr>"
    assert grids(f"<table>{ragged}</table>") == [None]


def test_docx_real_table_has_its_grid_layout_and_headerless_tables_do_not() -> None:
    doc = parse_document(DOCS / "fleet.docx", "docx")
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert [t.grid is not None for t in tables] == [True, False]  # the register; the contacts (no header row)
    grid = tables[0].grid
    assert grid is not None and grid.header == ("Vessel", "Length (m)", "Built", "Crew", "Berth")
    assert grid.rows[1] == ("Grey Heron", "31", "1975", "9", "North quay")  # a merged cell repeated
    headings = [b.text for b in doc.blocks if b.kind == "heading"]
    assert "Spring duties" in headings and "Autumn duties" in headings  # the layout table's content


def test_pptx_real_table_has_its_grid_and_a_table_without_header_row_does_not() -> None:
    pytest.importorskip("pptx")
    deck = parse_document(DOCS / "ferries.pptx", "pptx")
    tables = [b for b in deck.blocks if b.kind == "table"]
    assert [(t.page, t.grid is not None) for t in tables] == [(1, True), (2, False)]  # the ticket office: no header
    grid = tables[0].grid
    assert grid is not None and grid.header == ("Route", "Departs", "Pier")
    assert grid.rows[1] == ("Harbour to Headland", "16:15", "Pier 2")  # the merged cell repeated
    (table,) = document_tables(deck, "kb/ferries.pptx", "ferries.pptx", "pptx")
    assert table.table_id == "kb/ferries.pptx#table-1" and table.metadata["type"] == "pptx"
    slides = parse_document(DOCS / "slides.pptx", "pptx")  # one data row: not a real table
    assert [b.grid for b in slides.blocks if b.kind == "table"] == [None]


def _pdf_blocks(name: str, extra: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int | None]]:
    with monkeypatch.context() as patch:
        if not extra:
            patch.setitem(sys.modules, "pdfplumber", None)  # how an install without `pdf-tables` looks
        doc = parse_document(DOCS / name, "pdf")
    return [(b.kind, b.text, b.page) for b in doc.blocks]


def test_pdf_ruled_real_table_is_a_table_block_and_its_text_is_not_left_on_the_page(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdfplumber")
    doc = parse_document(DOCS / "accruals.pdf", "pdf")
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert len(tables) == 1 and tables[0].page == 1  # four ruled header-only tables ("No results") stay text
    grid = tables[0].grid
    assert grid is not None and grid.header[:5] == ("Line no", "UPC code", "Location", "Item Description",
                                                    "Item Quantity")
    assert len(grid.rows) == 4 and grid.rows[1][3:7] == ("LILYS DRK CHC CRMLZD SLTD", "688", "$ 0.61", "$ 419.68")
    assert "LILYS DRK CHC CRMLZD SLTD | 688" in tables[0].text
    texts = "\n".join(b.text for b in doc.blocks if b.kind != "table")
    assert "LILYS" not in texts and "Item Quantity" not in texts  # no passage holds the table twice
    assert "Associated claims\nClaim ID Claim type" in texts  # the rest of the page reads as before
    (table,) = document_tables(doc, "kb/accruals.pdf", "accruals.pdf", "pdf")
    assert table.table_id == "kb/accruals.pdf#table-1" and table.metadata["page"] == "1"

    plain = _pdf_blocks("accruals.pdf", False, monkeypatch)  # without the extra: the table is text, as before
    assert [kind for kind, _, _ in plain] == ["text"] and "LILYS DRK CHC CRMLZD SLTD 688 $ 0.61" in plain[0][1]


def test_pdf_table_without_outer_borders_keeps_all_its_columns() -> None:
    pytest.importorskip("pdfplumber")
    doc = parse_document(DOCS / "debian-reference-p30-33.pdf", "pdf")  # DocBook: rules across, none at the sides
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert [(t.page, t.grid is not None) for t in tables] == [(3, True), (4, True)]
    first = tables[0].grid
    assert first is not None and first.header == ("package", "popcon", "size", "description")
    assert first.rows[0] == ("mc", "V:54, I:226", "1482", "A text-mode full-screen file manager")
    assert len(first.rows) == 7 and first.rows[-1][0] == "gpm"
    texts = [b.text for b in doc.blocks if b.kind != "table"]
    assert not any("full-screen file manager" in t for t in texts)
    assert any("Table 1.1: List of interesting text-mode program packages" in t for t in texts)
    second = tables[1].grid
    assert second is not None and second.header == ("package", "popcon", "size", "description")


def test_pdf_table_over_two_pages_is_one_table_and_a_headerless_tail_stays_text() -> None:
    pytest.importorskip("pdfplumber")
    doc = parse_document(DOCS / "warn-summary.pdf", "pdf")
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert [(t.page, t.grid is not None) for t in tables] == [(1, True), (2, False)]
    grid = tables[0].grid
    assert grid is not None and grid.header[:3] == ("Summary by Month", "Notices", "Employees Affected")
    assert len(grid.rows) == 10 and grid.rows[0][0] == "July 2015" and grid.rows[-1][:3] == ("Total", "632", "53,454")
    assert grid.rows[3][:3] == ("October 2015", "71", "6,102")  # a row printed on page 2
    assert tables[1].text.startswith("September 2015 | 76 | 4,864 |")  # page 2's part: a passage of its page
    texts = "\n".join(b.text for b in doc.blocks if b.kind != "table")
    assert "October 2015" not in texts and "Summary by Month" not in texts
    # the last rows of the report's main table open page 1 without their header: they stay text
    assert "Rockwell Collins, Inc." in texts
    (table,) = document_tables(doc, "kb/warn-summary.pdf", "warn-summary.pdf", "pdf")
    assert table.metadata["page"] == "1"


def test_pdf_first_row_of_values_is_no_header() -> None:
    from amsrag.ingest.parsers.pdf_tables import is_header

    assert is_header(["Notice Date", "Effective", "Received", "Company", "City", "No. Of", "Layoff/Closure"])
    assert not is_header(["07/17/2015", "09/18/2015", "07/21/2015", "Boeing Company", "Huntington Beach", "65",
                          "Layoff Unknown at this time"])
    assert not is_header(["0.47", "0.40", "0.03", "0.31"]) and not is_header(["", ""])
    assert is_header(["Line no", "UPC code", "Item Quantity", "Bill Amount ($)"])
    assert is_header(["Region", "2019", "2020", "2021"])  # columns named by their year


def test_pdf_band_of_rows_without_rules_between_is_split_but_a_wrapped_cell_is_not() -> None:
    from amsrag.ingest.parsers.pdf_tables import split_bands

    band = ["Alabama\r\nAlaska", "18,870\r\n209", "23,022\r\n3,062", ""]
    assert split_bands([band]) == [["Alabama", "18,870", "23,022", ""], ["Alaska", "209", "3,062", ""]]
    wrapped = ["vim", "V:97", "3570", "Unix text editor Vi IMproved, a programmers text editor (standard\nversion)"]
    assert split_bands([wrapped])[0][3] == "Unix text editor Vi IMproved, a programmers text editor (standard version)"
    two = ["Name\nwrapped", "Note\nwrapped"]  # two cells: too few to tell a band from wrapping
    assert split_bands([two]) == [["Name wrapped", "Note wrapped"]]


def test_pdf_table_finder_runs_only_on_ruled_pages_within_the_page_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdfplumber")
    import pypdfium2 as pdfium

    from amsrag.ingest.parsers import pdf_tables

    def searched(name: str) -> list[bool]:
        doc = pdfium.PdfDocument(str(DOCS / name))
        try:
            out = []
            for index in range(len(doc)):
                page = doc[index]
                textpage = page.get_textpage()
                out.append(pdf_tables.worth_searching(page, textpage.count_chars()))
                textpage.close()
                page.close()
            return out
        finally:
            doc.close()

    assert searched("accruals.pdf") == [True]
    assert searched("debian-reference-p30-33.pdf") == [False, False, True, True]  # a code box's frame is no grid
    assert not any(searched("cite.pdf"))
    monkeypatch.setattr(pdf_tables, "MAX_PAGE_CHARS", 100)  # a page past the limit is read as text only
    assert searched("accruals.pdf") == [False]
    assert [b.kind for b in parse_document(DOCS / "accruals.pdf", "pdf").blocks] == ["text"]


def test_pdf_text_only_files_give_the_same_blocks_with_and_without_the_table_finder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pdfplumber")
    for name in ("cite.pdf", "heads-only.pdf"):
        assert _pdf_blocks(name, True, monkeypatch) == _pdf_blocks(name, False, monkeypatch)


def test_document_tables_ids_titles_and_provenance() -> None:
    doc = parse_document(DOCS / "observatories.html", "html")
    (table,) = document_tables(doc, "kb/observatories.html", "observatories.html", "html")
    assert table.table_id == "kb/observatories.html#table-1" and table.source == table.table_id
    assert table.title == "Observatories of the north coast › Telescopes › Main telescopes"
    assert table.metadata == {"document": "kb/observatories.html", "source": "observatories.html", "type": "html",
                              "table": "1", "section": "Telescopes", "anchor": "telescopes"}
    assert document_table_ids(["kb/a.html#table-1", "kb/a.html#table-x", "kb/b.xlsx#table-1", "kb/a.html"],
                              ["kb/a.html"]) == {"kb/a.html#table-1"}


# ---------------------------------------------------------------- end to end


def _ask(idx: Path, question: str) -> dict:
    r = runner.invoke(app, ["ask", question, "--index", str(idx), "--json", "--no-log"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def _sync(docs: Path, idx: Path) -> dict:
    r = runner.invoke(app, ["index", "sync", str(docs), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def _built(tmp_path: Path, names: tuple[str, ...]) -> tuple[Path, Path, dict]:
    """The fixtures `names` copied into a folder and indexed by `amsrag index build`: (folder, index, report)."""
    docs = tmp_path / "kb"
    docs.mkdir()
    for name in names:
        shutil.copy(DOCS / name, docs / name)
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    return docs, idx, json.loads(r.stdout.strip().splitlines()[-1])


def _table_ids(idx: Path) -> list[str]:
    with EmbeddedIndex.open(idx) as index:
        tables = index.tables()
        return sorted(tables.table_ids()) if tables is not None else []


@pytest.mark.slow
def test_build_answers_over_document_tables_and_sync_replaces_them_with_their_document(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    docs, idx, report = _built(tmp_path, ("observatories.html", "fleet.docx", "ferries.pptx"))
    assert report["tables"]["added"] == 3
    # one table each: the layout tables and the tables without a header row give none
    assert _table_ids(idx) == ["kb/ferries.pptx#table-1", "kb/fleet.docx#table-1", "kb/observatories.html#table-1"]
    (docs / "ferries.pptx").unlink()
    assert _sync(docs, idx)["tables"]["deleted"] == 1

    widest = _ask(idx, "Which observatory has the largest aperture?")
    assert widest["trace"]["strategy"] == "table" and widest["answer"] == "Saltmarsh Point"
    assert widest["citations"] == ["kb/observatories.html#table-1#row=2"]
    crew = _ask(idx, "Which vessel has the highest crew?")
    assert crew["trace"]["strategy"] == "table" and crew["answer"] == "Grey Heron"

    r = runner.invoke(app, ["search", "Saltmarsh Point aperture", "--index", str(idx), "--json", "-k", "1"])
    assert r.exit_code == 0, r.output
    hit = json.loads(r.stdout.strip().splitlines()[-1])["hits"][0]["id"]
    with EmbeddedIndex.open(idx) as index:
        found = index.get(hit)
        assert found is not None and "Saltmarsh Point | 210" in found.text  # the table's text is a passage too

    page = docs / "observatories.html"
    page.write_text(page.read_text(encoding="utf-8").replace(
        "<td>Gull Rock</td><td>60</td>", "<td>Gull Rock</td><td>260</td>"), encoding="utf-8")
    rep = _sync(docs, idx)  # the changed page's table replaced; the unchanged DOCX's kept
    assert rep["tables"]["replaced"] == 1 and rep["tables"]["deleted"] == 0
    assert _table_ids(idx) == ["kb/fleet.docx#table-1", "kb/observatories.html#table-1"]
    assert _ask(idx, "Which observatory has the largest aperture?")["answer"] == "Gull Rock"

    start = page.read_text(encoding="utf-8")
    page.write_text(start[: start.index("<table>\n<caption>")] + start[start.index("</table>") + 8 :],
                    encoding="utf-8")
    assert _sync(docs, idx)["tables"]["deleted"] == 1  # the page no longer holds the table
    (docs / "fleet.docx").unlink()
    assert _sync(docs, idx)["tables"]["deleted"] == 1  # the file is gone: its table goes with it
    assert _table_ids(idx) == []


@pytest.mark.slow
def test_a_pdf_table_reaches_the_table_store_and_a_structured_question_answers_over_it(tmp_path: Path) -> None:
    pytest.importorskip("pdfplumber")
    docs, idx, _ = _built(tmp_path, ("accruals.pdf", "cite.pdf", "warn-summary.pdf"))
    assert _table_ids(idx) == ["kb/accruals.pdf#table-1", "kb/warn-summary.pdf#table-1"]  # cite.pdf: none
    most = _ask(idx, "Which item description has the highest item quantity?")
    assert most["trace"]["strategy"] == "table" and most["answer"] == "LILYS DRK CHC CRMLZD SLTD"
    assert most["citations"][0].startswith("kb/accruals.pdf#table-1#row=")
    october = _ask(idx, "How many notices were there in October 2015?")  # a row printed on the table's 2nd page
    assert october["trace"]["strategy"] == "table" and october["answer"] == "71"
    assert october["citations"][0].startswith("kb/warn-summary.pdf#table-1#row=")
    (docs / "accruals.pdf").unlink()
    assert _sync(docs, idx)["tables"]["deleted"] == 1 and _table_ids(idx) == ["kb/warn-summary.pdf#table-1"]


@pytest.mark.slow
def test_add_replace_and_delete_doc_take_the_documents_tables_along(tmp_path: Path) -> None:
    docs = tmp_path / "kb"
    docs.mkdir()
    page = docs / "observatories.html"
    text = (DOCS / "observatories.html").read_text(encoding="utf-8")
    page.write_text(text.replace("</table>", "</table>" + text[text.index("<table>\n<caption>"):
                                                              text.index("</table>") + 8], 1), encoding="utf-8")
    (docs / "notes.md").write_text("# Notes\n\nThe observatories open in May.\n", encoding="utf-8")
    idx = tmp_path / "idx"
    assert runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "-q"]).exit_code == 0
    assert _table_ids(idx) == ["kb/observatories.html#table-1", "kb/observatories.html#table-2"]
    page.write_text(text, encoding="utf-8")  # one table fewer
    r = runner.invoke(app, ["index", "add", "--replace", f"kb={docs}", "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["tables"]["deleted"] == 1
    assert _table_ids(idx) == ["kb/observatories.html#table-1"]
    r = runner.invoke(app, ["index", "delete", "--doc", "kb/observatories.html", "--index", str(idx), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["tables_deleted"] == 1 and _table_ids(idx) == []
