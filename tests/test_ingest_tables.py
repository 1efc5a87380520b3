"""Table file readers: CSV (sniffed, WikiTableQuestions escaping), TSV, xlsx, SQLite, JSONL, and
their errors naming the file, row and column."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.ingest.tables import (
    TABLE_SUFFIXES,
    read_csv,
    read_jsonl_tables,
    read_table_file,
    read_xlsx,
    table_files,
)

WTQ_LINE = '"Name","Note"\n"Tom \\"Big\\" Jones","a, b"\n"back\\\\slash","x"\n'


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_csv_sniffs_the_delimiter_and_names_headers(tmp_path) -> None:
    root = tmp_path / "kb"
    p = write(root / "sub" / "sales_2023.csv", "\ufeffRegion;;Region\n North ; 1.200 ;x\n\nSouth;3\n")
    [t] = read_table_file(p, root)
    assert t.table_id == "kb/sub/sales_2023.csv" and t.source == "kb/sub/sales_2023.csv"
    assert t.header == ("Region", "column 2", "Region 2")
    assert t.rows == (("North", "1.200", "x"), ("South", "3", ""))  # stripped, blank line skipped, short row padded
    assert t.title == "sales 2023"
    assert read_table_file(p)[0].table_id == "sales_2023.csv"
    comma = write(tmp_path / "c.csv", "a,b\n1,2\n")
    assert read_csv(comma).rows == (("1", "2"),)
    one_col = write(tmp_path / "one.csv", "name\nOslo\nBergen\n")  # nothing to sniff: falls back to ','
    assert read_csv(one_col).rows == (("Oslo",), ("Bergen",))


def test_csv_trailing_empty_cells_are_dropped_but_extra_values_are_an_error(tmp_path) -> None:
    p = write(tmp_path / "t.csv", "a,b\n1,2,,\n3,4\n")
    assert read_csv(p).rows == (("1", "2"), ("3", "4"))
    bad = write(tmp_path / "bad.csv", "a,b\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"bad.csv: line 3 has 3 cells but the header has 2 columns.*column 3"):
        read_csv(bad)


def test_wtq_escaping_is_detected(tmp_path) -> None:
    p = write(tmp_path / "590.csv", WTQ_LINE)
    t = read_csv(p)
    assert t.rows == (('Tom "Big" Jones', "a, b"), ("back\\slash", "x"))
    assert read_csv(p, wtq=True).rows == t.rows
    plain = write(tmp_path / "plain.csv", 'a,b\n"say ""hi""",2\n')
    assert read_csv(plain).rows == (('say "hi"', "2"),)


def test_tsv(tmp_path) -> None:
    p = write(tmp_path / "t.tsv", "City\tPopulation, 2020\nOslo\t709,037\n")
    [t] = read_table_file(p, tmp_path)
    assert t.header == ("City", "Population, 2020") and t.rows == (("Oslo", "709,037"),)
    assert t.table_id == f"{tmp_path.name}/t.tsv"


def test_csv_errors_name_file_and_place(tmp_path) -> None:
    bad = write(tmp_path / "latin1.csv", "a,b\ncaf\xe9,1\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1.csv: not UTF-8 text: invalid byte 0xe9 at byte offset 7 \(line 2\)"):
        read_csv(bad)
    long = write(tmp_path / "long.csv", "a,b\nx," + "y" * 10_001 + "\n")
    with pytest.raises(InputError, match=r"long.csv: line 2, column 2 \('b'\): a cell of 10,001 characters"):
        read_csv(long)
    wide = write(tmp_path / "wide.csv", ",".join(f"c{i}" for i in range(201)) + "\n")
    with pytest.raises(InputError, match=r"wide.csv: 201 columns"):
        read_csv(wide)
    empty = write(tmp_path / "empty.csv", "\n\n")
    with pytest.raises(InputError, match=r"empty.csv: no header row"):
        read_csv(empty)
    with pytest.raises(InputError, match="not a table file"):
        read_table_file(write(tmp_path / "x.txt", "a"))
    with pytest.raises(InputError, match="no such file"):
        read_table_file(tmp_path / "missing.csv")


@pytest.mark.slow
def test_row_limit(tmp_path, monkeypatch) -> None:
    import amsrag.ingest.tables as tables

    monkeypatch.setattr(tables, "MAX_ROWS", 1000)  # a module constant, not our code's behaviour
    p = write(tmp_path / "many.csv", "a\n" + "x\n" * 1001)
    with pytest.raises(InputError, match=r"many.csv: more than 1,000 rows"):
        read_csv(p)


def test_xlsx(tmp_path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Results"
    ws.append(["Team", "Points", "Date", None, "Ratio"])
    ws.append(["Oslo", 12.0, dt.datetime(2024, 5, 1), None, 0.25])
    ws.append(["Lyon", 7, dt.date(2023, 1, 2), None, None])
    ws.append([None, None, None])
    ws.append(["Lima", 3.5, dt.datetime(2024, 5, 1, 13, 30), None, 1e-7])
    wb.create_sheet("Empty")
    other = wb.create_sheet("Notes")
    other.append([None, None])
    other.append(["Key", "Value"])
    other.append(["a", True])
    p = tmp_path / "kb" / "book.xlsx"
    p.parent.mkdir()
    wb.save(p)
    tables = read_table_file(p, tmp_path / "kb")
    assert [t.table_id for t in tables] == ["kb/book.xlsx#Results", "kb/book.xlsx#Notes"]
    res, notes = tables
    assert res.header == ("Team", "Points", "Date", "column 4", "Ratio")
    assert res.rows == (("Oslo", "12", "2024-05-01", "", "0.25"), ("Lyon", "7", "2023-01-02", "", ""),
                        ("Lima", "3.5", "2024-05-01 13:30:00", "", "1e-07"))
    assert res.metadata == {"sheet": "Results"} and res.title == "book Results"
    assert notes.rows == (("a", "TRUE"),)
    bad = wb.create_sheet("Bad")
    bad.append(["a", "b"])
    bad.append(["x", "y" * 10_001])
    wb.save(p)
    with pytest.raises(InputError, match=r"book.xlsx#Bad: row 2, column 2 \('b'\): a cell of 10,001 characters"):
        read_xlsx(p)
    broken = write(tmp_path / "broken.xlsx", b"PK\x03\x04 not really a zip")
    with pytest.raises(InputError, match=r"broken.xlsx: not a readable .xlsx workbook"):
        read_xlsx(broken)


def test_sqlite(tmp_path) -> None:
    p = tmp_path / "data.db"
    with sqlite3.connect(p) as conn:
        conn.execute('CREATE TABLE "city list" (name TEXT, "pop ""2020""" INTEGER, area REAL, note TEXT)')
        conn.executemany('INSERT INTO "city list" VALUES (?, ?, ?, ?)',
                         [("Oslo", 709037, 454.0, None), ("Lyon", 522250, 47.87, " big ")])
        conn.execute("CREATE TABLE empty_one (a TEXT)")
        conn.execute("CREATE TABLE blobs (a BLOB)")
        conn.execute("INSERT INTO blobs VALUES (x'00ff')")
    with pytest.raises(InputError, match=r"data.db#blobs: row 1, column 'a': a BLOB value"):
        read_table_file(p)
    with sqlite3.connect(p) as conn:
        conn.execute("DROP TABLE blobs")
    tables = read_table_file(p, tmp_path, root_name="kb")
    assert [t.table_id for t in tables] == ["kb/data.db#city list", "kb/data.db#empty_one"]
    city = tables[0]
    assert city.header == ("name", 'pop "2020"', "area", "note")
    assert city.rows == (("Oslo", "709037", "454", ""), ("Lyon", "522250", "47.87", "big"))
    assert tables[1].rows == () and tables[1].header == ("a",)
    junk = write(tmp_path / "junk.sqlite", b"not a database at all" * 50)
    with pytest.raises(InputError, match=r"junk.sqlite: not an SQLite database"):
        read_table_file(junk)


def test_jsonl(tmp_path) -> None:
    lines = [
        {"id": "p1", "text": "a passage: not mine"},
        {"table": {"id": "wiki/medals", "title": "Medal table", "columns": ["Nation", "Gold", ""],
                   "rows": [["Norway", 16, None], ["France", 5.0]], "metadata": {"year": 2022}}},
        {"table": {"id": "wiki/empty", "columns": ["a"]}},
    ]
    p = write(tmp_path / "t.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    medals, empty = read_jsonl_tables(p)
    assert (medals.table_id, medals.title, medals.metadata) == ("wiki/medals", "Medal table", {"year": "2022"})
    assert medals.header == ("Nation", "Gold", "column 3")
    assert medals.rows == (("Norway", "16", ""), ("France", "5", ""))
    assert empty.rows == ()
    cases = [
        ('{"table": {"id": "x", "columns": ["a"], "rows": [["1", "2"]]}}', r"jsonl:1: table 'x': row 1 has 2 cells"),
        ('{"table": {"id": "x", "columns": ["a"], "rows": [[{"k": 1}]]}}',
         r"jsonl:1: table 'x': row 1, column 'a': a dict"),
        ('{"table": {"columns": ["a"]}}', r"jsonl:1: the table needs a non-empty string \"id\""),
        ('{"table": {"id": "x", "columns": []}}', r"jsonl:1: table 'x': \"columns\" must be a non-empty list"),
        ('{"table": {"id": "x", "columns": ["a"], "rows": ["abc"]}}', r"jsonl:1: table 'x': row 1 is not a list"),
        ('{"table": ', r"jsonl:1: malformed JSON"),
        ('{"table": {"id": "x", "columns": ["a"]}}\n{"table": {"id": "x", "columns": ["b"]}}',
         r"jsonl:2: table id 'x' was already used on line 1"),
    ]
    for text, match in cases:
        bad = write(tmp_path / "bad.jsonl", text + "\n")
        with pytest.raises(InputError, match=match):
            read_jsonl_tables(bad)


def test_table_files_and_suffixes(tmp_path) -> None:
    assert TABLE_SUFFIXES == (".csv", ".tsv", ".xlsx", ".sqlite", ".db")
    write(tmp_path / "a.csv", "a\n1\n")
    write(tmp_path / "sub" / "b.TSV", "a\n1\n")
    write(tmp_path / ".hidden" / "c.csv", "a\n1\n")
    write(tmp_path / "notes.md", "# hi")
    assert [p.relative_to(tmp_path).as_posix() for p in table_files(tmp_path)] == ["a.csv", "sub/b.TSV"]


def test_read_tables_into_the_store(tmp_path) -> None:
    from amsrag.store.embedded.tables import TableStore

    p = write(tmp_path / "kb" / "590.csv", WTQ_LINE)
    with TableStore.open(tmp_path / "tables.sqlite", create=True) as store:
        store.add(read_table_file(p, tmp_path / "kb"))
        [hit] = store.search("who is tom jones", 1)
        assert hit.table_id == "kb/590.csv"
        rows = store.runner().run(f"SELECT c1 FROM {hit.profile.sql_name} WHERE lower(c0) LIKE '%big%'")
        assert rows.rows == (("a, b",),)


def test_csv_crlf_and_quoted_newlines(tmp_path) -> None:
    p = write(tmp_path / "t.csv", b'Name,Note\r\n"Oslo","two\r\nlines"\r\nLyon,"x, y"\r\n')
    assert read_csv(p).rows == (("Oslo", "two\r\nlines"), ("Lyon", "x, y"))


@pytest.mark.parametrize("tail", ["", "\n"])
def test_csv_unterminated_quote_is_an_error_naming_the_line_it_opened(tmp_path, tail) -> None:
    p = write(tmp_path / "open.csv", 'a,b\n1,2\n3,"never closed\n4,5\n6,7' + tail)
    with pytest.raises(InputError, match=r"open.csv: line 3: a quote .* never closed"):
        read_csv(p)
    one = write(tmp_path / "one.csv", 'a,b\n1,"x' + tail)
    with pytest.raises(InputError, match=r"one.csv: line 2: a quote"):
        read_csv(one)
    wtq = write(tmp_path / "wtq.csv", '"a","b"\n"\\"x\\"","y\n1,2' + tail)
    with pytest.raises(InputError, match=r"wtq.csv: line 2: a quote"):
        read_csv(wtq)


def test_csv_closed_quotes_over_lines_and_at_the_end_still_read(tmp_path) -> None:
    p = write(tmp_path / "ok.csv", 'a,b\n1,"two\nlines"\n3,"end"')
    assert read_csv(p).rows == (("1", "two\nlines"), ("3", "end"))


def test_short_rows_are_padded_and_counted(tmp_path) -> None:
    p = write(tmp_path / "short.csv", "a,b,c\n1,2,3\n4\n5,6\n")
    t = read_csv(p)
    assert t.rows == (("1", "2", "3"), ("4", "", ""), ("5", "6", "")) and t.padded_rows == 2
