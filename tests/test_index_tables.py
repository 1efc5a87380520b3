"""Tables among an index job's inputs: build, add, sync and delete through the CLI, bad files refused
before anything is written, and the themes kept in step with the passages."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from amsrag.cli import app
from amsrag.store import EmbeddedIndex

runner = CliRunner()


def _folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Install\n\nRun the installer and restart the service.\n", encoding="utf-8")
    (docs / "prices.csv").write_text("Product,Price ($),Region\nWidget,12.50,East\nGadget,7,West\nGizmo,30,East\n",
                                     encoding="utf-8")
    (docs / "more.jsonl").write_text(
        json.dumps({"id": "p1", "title": "Note", "text": "Widgets ship from the East warehouse."}) + "\n"
        + json.dumps({"table": {"id": "staff", "title": "Staff", "columns": ["Name", "Team"],
                                "rows": [["Ann", "Ops"], ["Bo", "Sales"]]}}) + "\n", encoding="utf-8")
    return docs


def test_build_stores_tables_beside_passages_and_lists_them(tmp_path):
    docs = _folder(tmp_path)
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output.strip().splitlines()[-1])
    assert report["tables_added"] == 2 and report["passages"] == 2
    with EmbeddedIndex.open(idx) as index:
        ids = sorted(index.tables().table_ids())
        assert ids == ["docs/prices.csv", "staff"]
        price = next(p for p in index.tables().profiles() if p.table_id == "docs/prices.csv")
        assert price.column("Price ($)").type == "number" and price.column("Price ($)").unit == "$"
    r = runner.invoke(app, ["index", "tables", "list", "--index", str(idx), "--json"])
    assert r.exit_code == 0 and len(json.loads(r.output)["tables"]) == 2


def test_a_bad_table_is_refused_with_file_and_row_and_nothing_is_written(tmp_path):
    docs = _folder(tmp_path)
    idx = tmp_path / "idx"
    assert runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "-q"]).exit_code == 0
    (docs / "broken.csv").write_text("A,B\n1,2\n3,4,5\n", encoding="utf-8")
    r = runner.invoke(app, ["index", "add", str(docs), "--index", str(idx), "-q"])
    assert r.exit_code == 2 and "broken.csv" in r.output and "line 3" in r.output and "column 3" in r.output
    with EmbeddedIndex.open(idx) as index:
        assert sorted(index.tables().table_ids()) == ["docs/prices.csv", "staff"] and len(index) == 2


def test_sync_replaces_changed_tables_and_deletes_removed_ones(tmp_path):
    docs = _folder(tmp_path)
    idx = tmp_path / "idx"
    assert runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "-q"]).exit_code == 0
    (docs / "prices.csv").write_text("Product,Price ($),Region\nWidget,13,East\n", encoding="utf-8")
    (docs / "stock.tsv").write_text("Item\tCount\nWidget\t4\n", encoding="utf-8")
    r = runner.invoke(app, ["index", "sync", str(docs), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output.strip().splitlines()[-1])
    assert rep["tables_replaced"] == 1 and rep["tables_added"] == 1
    (docs / "stock.tsv").unlink()
    r = runner.invoke(app, ["index", "sync", str(docs), "--index", str(idx), "--json", "-q"])
    assert json.loads(r.output.strip().splitlines()[-1])["tables_deleted"] == 1
    with EmbeddedIndex.open(idx) as index:
        assert index.tables().profile("docs/prices.csv").n_rows == 1


def test_tables_query_runs_guarded_sql_and_refuses_writes(tmp_path):
    docs = _folder(tmp_path)
    idx = tmp_path / "idx"
    assert runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "-q"]).exit_code == 0
    with EmbeddedIndex.open(idx) as index:
        name = index.tables().profile("docs/prices.csv").sql_name
    r = runner.invoke(app, ["index", "tables", "query", f"SELECT c0 FROM {name} WHERE c1_num > 10 ORDER BY c1_num",
                            "--index", str(idx), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["rows"] == [["Widget"], ["Gizmo"]]
    for hostile in (f"DELETE FROM {name}", f"SELECT 1; DROP TABLE {name}", "SELECT * FROM sqlite_master"):
        r = runner.invoke(app, ["index", "tables", "query", hostile, "--index", str(idx)])
        assert r.exit_code == 2, hostile
    r = runner.invoke(app, ["index", "delete", "--table", "nope", "--index", str(idx)])
    assert r.exit_code == 2 and "no such table" in r.output


@pytest.mark.slow
def test_themes_follow_adds_and_deletes(tmp_path, slice_passages):
    from amsrag.indexing.themes import refresh_themes

    index = EmbeddedIndex.create(tmp_path / "idx")
    index.add(slice_passages[:-20])
    first = refresh_themes(index)
    assert first.action == "built" and first.themes > 1
    index.add(slice_passages[-20:])
    second = refresh_themes(index)
    assert second.action in ("updated", "built") and second.passages == len(slice_passages)
    index.delete([slice_passages[0].id])
    third = refresh_themes(index)
    assert third.removed == 1 or third.action == "built"
    assert index.themes().n_passages == len(slice_passages) - 1
    assert refresh_themes(index).action == "unchanged"
    index.close()


def test_padded_short_rows_are_counted_in_the_report(tmp_path):
    docs = _folder(tmp_path)
    (docs / "short.csv").write_text("A,B,C\n1,2,3\n4\n5,6\n", encoding="utf-8")
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", str(docs), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["table_rows_padded"] == 2
    (docs / "short.csv").write_text("A,B,C\n1,2,3\n4\n5,6\n7\n", encoding="utf-8")
    r = runner.invoke(app, ["index", "sync", str(docs), "--index", str(idx), "-q"])
    assert r.exit_code == 0 and "3 table row(s) had fewer cells than the header" in " ".join(r.output.split())


def test_table_only_input_reports_tables_and_rows_not_zero_passages(tmp_path):
    only = tmp_path / "sheets"
    only.mkdir()
    (only / "a.csv").write_text("A,B\n1,2\n3,4\n", encoding="utf-8")
    (only / "b.csv").write_text("C\nx\ny\nz\n", encoding="utf-8")
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", str(only), "--index", str(idx), "-q"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0 and "added 2 tables (5 rows)" in text and "0 passages added" not in text, r.output
    r = runner.invoke(app, ["index", "add", str(only / "a.csv"), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    tables = json.loads(r.output.strip().splitlines()[-1])["tables"]
    assert tables == {"added": 1, "replaced": 0, "unchanged": 0, "deleted": 0, "rows": 2, "rows_padded": 0}  # id a.csv
