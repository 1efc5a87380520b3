"""Index maintenance over files: folder sync, document replacement, batched ingest that resumes, input
hygiene, check and repair (embedded store; the store-level semantics are in the conformance suite)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amsrag.cli.main import app
from amsrag.config import AmsragConfig
from amsrag.errors import AmsragError, IndexCorruptError, InputError
from amsrag.indexing import ingest_inputs, sync_folders
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex

runner = CliRunner()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_docs(root: Path) -> Path:
    write(root / "intro.md", "# Intro\n\nThe project began in Lisbon in 2019.\n\n## Goals\n\nFast answers offline.\n")
    write(root / "guide" / "install.md", "# Install\n\nRun the installer with --prefix to pick a folder.\n")
    write(root / "guide" / "faq.txt", "The default port is 8000. It can be changed with --port.\n")
    return root


def invoke(*args: str) -> tuple[int, str]:
    """(exit status, output) as `amsrag` gives them: an AmsragError is status 2 with its message."""
    r = runner.invoke(app, list(args))
    if isinstance(r.exception, AmsragError):
        return 2, r.output + str(r.exception)
    return r.exit_code, r.output


def test_sync_adds_replaces_and_deletes_documents(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "kb")
    idx_dir = tmp_path / "idx"
    code, out = invoke("index", "build", str(docs), "--index", str(idx_dir), "--json", "-q")
    assert code == 0, out
    built = json.loads(out.strip().splitlines()[-1])
    assert built["added"] == 4 and built["files"] == 3
    with EmbeddedIndex.open(idx_dir) as idx:
        assert sorted(idx.documents()) == ["kb/guide/faq.txt", "kb/guide/install.md", "kb/intro.md"]
        assert all(d.content_hash for d in idx.documents().values())  # build records every file's fingerprint
        gen = idx.manifest["generation"]

    code, out = invoke("index", "sync", str(docs), "--index", str(idx_dir), "--json", "-q")
    assert code == 0, out
    nothing = json.loads(out.strip().splitlines()[-1])
    assert (nothing["batches"], nothing["documents_unchanged"], nothing["embedded"]) == (0, 3, 0)

    # edit one section, delete a file, add a file
    write(docs / "intro.md", "# Intro\n\nThe project began in Lisbon in 2019.\n\n## Goals\n\nCited answers, offline.\n")
    (docs / "guide" / "faq.txt").unlink()
    write(docs / "guide" / "upgrade.md", "# Upgrade\n\nUpgrades keep the index; run sync afterwards.\n")
    code, out = invoke("index", "sync", str(docs), "--index", str(idx_dir), "--json", "-q")
    assert code == 0, out
    r = json.loads(out.strip().splitlines()[-1])
    assert (r["documents_created"], r["documents_replaced"], r["documents_deleted"]) == (1, 1, 1)
    assert (r["added"], r["removed"], r["kept"], r["embedded"], r["batches"]) == (2, 2, 1, 2, 1)
    with EmbeddedIndex.open(idx_dir) as idx:
        assert idx.manifest["generation"] > gen
        assert sorted(idx.documents()) == ["kb/guide/install.md", "kb/guide/upgrade.md", "kb/intro.md"]
        assert idx.get("kb/guide/faq.txt#0") is None
        assert "Cited answers" in idx.get("kb/intro.md#1").text
        hits = retriever_for(idx, "bm25").search("default port 8000", k=5)
        assert all(not h.id.startswith("kb/guide/faq") for h in hits)
        assert idx.check().ok


def test_sync_keep_deleted_and_named_roots(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "kb")
    other = write(tmp_path / "x" / "kb" / "intro.md", "# Other intro\n\nA different folder of the same name.\n")
    idx_dir = tmp_path / "idx"
    code, out = invoke("index", "build", str(docs), "--index", str(idx_dir), "-q")
    assert code == 0, out
    code, out = invoke("index", "sync", str(docs), str(other.parent), "--index", str(idx_dir))
    assert code == 2 and "both named 'kb'" in out
    code, out = invoke("index", "sync", f"extra={other.parent}", "--index", str(idx_dir), "--json", "-q")
    assert code == 0, out
    (docs / "intro.md").unlink()
    code, out = invoke("index", "sync", str(docs), "--index", str(idx_dir), "--keep-deleted", "--json", "-q")
    assert json.loads(out.strip().splitlines()[-1])["documents_deleted"] == 0
    with EmbeddedIndex.open(idx_dir) as idx:
        assert {"kb/intro.md", "extra/intro.md"} <= set(idx.documents())
    code, out = invoke("index", "sync", str(docs / "guide" / "install.md"), "--index", str(idx_dir))
    assert code == 2 and "index add --replace" in out


def test_add_replace_and_delete_by_document(tmp_path: Path) -> None:
    note = write(tmp_path / "note.md", "# Note\n\nThe meeting is on Monday.\n")
    idx_dir = tmp_path / "idx"
    assert invoke("index", "build", str(note), "--index", str(idx_dir), "-q")[0] == 0
    write(note, "# Note\n\nThe meeting moved to Tuesday.\n")
    code, out = invoke("index", "add", str(note), "--index", str(idx_dir))
    assert code == 2 and "--replace" in out and "different content" in out
    code, out = invoke("index", "add", str(note), "--index", str(idx_dir), "--replace", "--json", "-q")
    assert code == 0, out
    r = json.loads(out.strip().splitlines()[-1])
    assert (r["added"], r["removed"], r["documents_replaced"]) == (1, 1, 1)
    with EmbeddedIndex.open(idx_dir) as idx:
        assert "Tuesday" in idx.get("note.md#0").text
    code, out = invoke("index", "delete", "--doc", "nope.md", "--index", str(idx_dir))
    assert code == 2 and "nope.md" in out
    code, out = invoke("index", "delete", "--doc", "note.md", "--index", str(idx_dir), "--json")
    assert code == 0 and json.loads(out)["passages"] == 0


def test_ingest_commits_in_batches_and_resumes_staged_vectors(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "many"
    for i in range(12):
        write(folder / f"f{i:02d}.txt", f"File {i} says that item {i} costs {i * 3} euros in the shop.\n")
    config = AmsragConfig()
    config.ingest.batch_passages = 5
    config.ingest.stage_every = 2
    idx = EmbeddedIndex.create(tmp_path / "idx", config)
    real = idx.encoder.encode
    calls = {"n": 0}

    def dies_in_the_second_batch(texts, progress=None):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt  # as a kill would stop it: between two staged commits
        return real(texts, progress)

    monkeypatch.setattr(idx.encoder, "encode", dies_in_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        ingest_inputs(idx, [folder])
    assert len(idx) == 5  # batch 1 committed (its vectors staged 2 + 2 + 1) ...
    assert idx.count_staged([p.content_hash for p in _passages(folder)]) == 2  # ... and batch 2's first pair
    idx.close()

    idx = EmbeddedIndex.open(tmp_path / "idx")
    notices: list[str] = []
    report = ingest_inputs(idx, [folder], notice=notices.append)
    assert any(n.startswith("resuming: 2 of 7 passages already embedded") for n in notices), notices
    assert (report.resumed, report.embedded, report.added, report.skipped_existing) == (2, 5, 7, 5)
    assert len(idx) == 12 and idx.count_staged([p.content_hash for p in _passages(folder)]) == 0
    assert idx.check().ok
    idx.close()


def _passages(folder: Path):
    from amsrag.ingest import iter_passages

    return list(iter_passages([folder]))


def test_bad_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "kb")
    idx_dir = tmp_path / "idx"
    assert invoke("index", "build", str(docs), "--index", str(idx_dir), "-q")[0] == 0
    (docs / "zz-nul.txt").write_bytes(b"\x00\x00\x01\x02\n\x00")
    write(docs / "aa-new.md", "# New\n\nA new file that must not be added alone.\n")
    code, out = invoke("index", "sync", str(docs), "--index", str(idx_dir))
    assert code == 2 and "zz-nul.txt: this file has no text" in out
    with EmbeddedIndex.open(idx_dir) as idx:
        assert len(idx) == 4 and idx.get("kb/aa-new.md#0") is None
    # a build refused for bad input leaves no index behind
    code, out = invoke("index", "build", str(docs), "--index", str(tmp_path / "fresh"))
    assert code == 2 and "zz-nul.txt" in out and not (tmp_path / "fresh").exists()


def test_file_size_limit(tmp_path: Path) -> None:
    config = AmsragConfig()
    config.ingest.max_file_mb = 0.001
    with EmbeddedIndex.create(tmp_path / "idx", config) as idx:
        big = write(tmp_path / "big.txt", "Words and more words. " * 100)
        with pytest.raises(InputError, match=r"big\.txt: 0\.0 MiB is larger than the input limit of 0\.001 MiB "
                                             r"\(ingest\.max_file_mb"):
            ingest_inputs(idx, [big])
        assert len(idx) == 0


def test_missing_derived_folder_names_repair_and_repair_restores(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "kb")
    idx_dir = tmp_path / "idx"
    assert invoke("index", "build", str(docs), "--index", str(idx_dir), "-q")[0] == 0
    with EmbeddedIndex.open(idx_dir) as idx:
        before = retriever_for(idx, "dense").search("where did the project begin", k=3)
    shutil.rmtree(next(idx_dir.glob("dense.g*")))
    with pytest.raises(IndexCorruptError, match=r"missing: dense .*amsrag index repair --index"):
        EmbeddedIndex.open(idx_dir)
    for command in (["index", "stats"], ["search", "lisbon"]):
        proc = subprocess.run([sys.executable, "-m", "amsrag.cli", *command, "--index", str(idx_dir)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and "index repair" in proc.stderr and "Traceback" not in proc.stderr
    code, out = invoke("index", "check", "--index", str(idx_dir), "--json")
    assert code == 1 and json.loads(out)["repairable"] == ["dense"]
    code, out = invoke("index", "repair", "--index", str(idx_dir), "--json", "-q")
    assert code == 0, out
    repaired = json.loads(out)
    assert (repaired["rebuilt"], repaired["reembedded"], repaired["ok"]) == (["dense"], 0, True)
    with EmbeddedIndex.open(idx_dir) as idx:
        assert retriever_for(idx, "dense").search("where did the project begin", k=3) == before
    # a damaged file is found by its checksum and rebuilt
    tokens = next(next(idx_dir.glob("bm25.g*")).iterdir())
    tokens.write_bytes(tokens.read_bytes()[:-7] + b"garbage")
    code, out = invoke("index", "check", "--index", str(idx_dir))
    assert code == 1 and "does not match its recorded checksum" in out
    assert invoke("index", "repair", "--index", str(idx_dir))[0] == 0
    assert invoke("index", "check", "--index", str(idx_dir))[0] == 0


def test_sync_moves_content_between_files_without_re_embedding(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "kb")
    with EmbeddedIndex.create(tmp_path / "idx") as idx:
        ingest_inputs(idx, [docs])
        (docs / "guide" / "install.md").rename(docs / "guide" / "setup.md")
        r = sync_folders(idx, [docs])
        assert (r.documents_created, r.documents_deleted, r.embedded, r.added, r.removed) == (1, 1, 0, 1, 1)
        assert idx.get("kb/guide/setup.md#0") is not None and idx.get("kb/guide/install.md#0") is None


def test_a_reader_that_loses_a_race_with_a_writer_loads_the_newer_generation(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "kb")
    with EmbeddedIndex.create(tmp_path / "idx") as idx:
        ingest_inputs(idx, [docs])
    reader = EmbeddedIndex.open(tmp_path / "idx")  # manifest read, derived indexes not loaded yet
    with EmbeddedIndex.open(tmp_path / "idx") as writer:
        write(docs / "more.md", "# More\n\nThe harbour of Lisbon opens at dawn.\n")
        sync_folders(writer, [docs])  # publishes a newer generation and removes the folders reader was to load
    hits = retriever_for(reader, "bm25").search("harbour of Lisbon at dawn", k=3)
    assert hits and hits[0].id == "kb/more.md#0" and len(reader) == 5
    reader.close()


def test_a_delete_committed_before_the_manifest_is_completed_at_open(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    docs = make_docs(tmp_path / "kb")
    with EmbeddedIndex.create(tmp_path / "idx") as idx:
        ingest_inputs(idx, [docs])

        def power_cut(*args, **kwargs):
            raise KeyboardInterrupt  # after the SQLite commit, before the manifest is replaced

        monkeypatch.setattr(EmbeddedIndex, "_publish", power_cut)
        with pytest.raises(KeyboardInterrupt):
            idx.delete_documents(["kb/intro.md"])
        monkeypatch.undo()
    with EmbeddedIndex.open(tmp_path / "idx") as idx:
        assert len(idx) == 2 and idx.get("kb/intro.md#0") is None and idx.check().ok
        assert all(not h.id.startswith("kb/intro") for h in retriever_for(idx, "bm25").search("Lisbon 2019", k=5))


def test_a_full_disk_is_a_clear_error_and_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    import numpy as np

    from amsrag.errors import StorageError

    docs = make_docs(tmp_path / "kb")
    with EmbeddedIndex.create(tmp_path / "idx") as idx:
        ingest_inputs(idx, [docs])
        write(docs / "more.md", "# More\n\nAnother page about the harbour.\n")

        def full(file, *args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device", str(file))

        monkeypatch.setattr(np, "save", full)
        with pytest.raises(StorageError, match=r"the disk is full\. The index keeps its last committed state"):
            sync_folders(idx, [docs])
        monkeypatch.undo()
        assert len(idx) == 4 and not [p for p in (tmp_path / "idx").iterdir() if p.name.endswith(".tmp")]
        assert idx.check().ok
        assert sync_folders(idx, [docs]).added == 1 and len(idx) == 5


def test_refresh_never_mixes_a_published_generation_with_a_newer_commit(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import amsrag.store.embedded.publish as embedded

    docs = make_docs(tmp_path / "kb")
    with EmbeddedIndex.create(tmp_path / "idx") as idx:
        ingest_inputs(idx, [docs])
    reader = EmbeddedIndex.open(tmp_path / "idx")
    assert retriever_for(reader, "bm25").search("Lisbon 2019", k=3)
    with EmbeddedIndex.open(tmp_path / "idx") as writer:
        write(docs / "more.md", "# More\n\nThe harbour opens at dawn.\n")
        sync_folders(writer, [docs])  # published
    with EmbeddedIndex.open(tmp_path / "idx") as crasher:

        def power_cut(*args, **kwargs):
            raise KeyboardInterrupt  # the delete is committed; its manifest never written

        monkeypatch.setattr(embedded, "write_json_atomic", power_cut)
        with pytest.raises(KeyboardInterrupt):
            crasher.delete_documents(["kb/intro.md"])
        monkeypatch.undo()
    assert reader.stale() and reader.refresh()
    hits = retriever_for(reader, "bm25").search("project began in Lisbon in 2019", k=5)
    assert all(not h.id.startswith("kb/intro.md") for h in hits)
    assert len(reader) == 3 and not reader.stale() and reader.check().ok
    reader.close()
