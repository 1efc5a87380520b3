"""Files an index job does not read are named with the reason at the end of `index build`, `add` and `sync`:
in the report, the CLI output and its --json."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from amsrag.cli import app
from amsrag.ingest.formats import PassedOver, directory_files

runner = CliRunner()


def mixed_folder(root: Path) -> Path:
    root.mkdir()
    (root / "guide.txt").write_text("Restart the service after installing the update.\n", encoding="utf-8")
    (root / "notes.xyz").write_text("not a known format", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "more.xyz").write_text("neither", encoding="utf-8")
    (root / "broken.docx").write_bytes(b"this is not a zip package")
    (root / "prices.csv").write_text("Item,Price\nWidget,3\n", encoding="utf-8")  # a table: read, not skipped
    (root / ".hidden.xyz").write_text("hidden files are left out on purpose", encoding="utf-8")
    return root


def test_directory_scan_names_what_it_passes_over(tmp_path) -> None:
    folder = mixed_folder(tmp_path / "kb")
    passed: PassedOver = []
    assert directory_files(folder, "auto", passed_over=passed) == [folder / "broken.docx", folder / "guide.txt"]
    assert [(p.relative_to(folder).as_posix(), why) for p, why in passed] == [
        ("notes.xyz", "unsupported format"), ("sub/more.xyz", "unsupported format")]
    passed = []
    assert directory_files(folder, "text", passed_over=passed) == [folder / "guide.txt"]
    assert ("broken.docx", "not text (--format text)") in [(p.name, why) for p, why in passed]


def _last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def test_build_add_and_sync_say_what_was_not_read(tmp_path) -> None:
    folder = mixed_folder(tmp_path / "kb")
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", str(folder), "--index", str(idx), "-q"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "skipped 3 files: 2 .xyz (unsupported format), 1 .docx (corrupt DOCX" in text, text
    assert "skipped: unsupported format: kb/sub/more.xyz" in text and ".hidden" not in text
    r = runner.invoke(app, ["index", "add", str(folder), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    report = _last_json(r.output)
    assert report["skipped_summary"].startswith("skipped 3 files: 2 .xyz (unsupported format), 1 .docx")
    assert {"suffix": ".xyz", "reason": "unsupported format", "files": 2} in report["skipped_kinds"]
    assert {s["file"] for s in report["skipped_files"]} == {"kb/notes.xyz", "kb/sub/more.xyz", "kb/broken.docx"}
    (folder / "notes.xyz").unlink()
    r = runner.invoke(app, ["index", "sync", str(folder), "--index", str(idx), "--json", "-q"])
    assert r.exit_code == 0, r.output
    assert _last_json(r.output)["skipped_summary"].startswith("skipped 2 files: 1 .xyz (unsupported format), 1 .docx")
    r = runner.invoke(app, ["index", "sync", str(folder), "--index", str(idx), "-q"])
    assert "skipped 2 files: 1 .xyz (unsupported format)" in " ".join(r.output.split())
