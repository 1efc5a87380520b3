"""The command line over PostgreSQL: export an embedded index, then every --index command on the URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

AMSRAG = [sys.executable, "-m", "amsrag.cli"]


def run(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*AMSRAG, *map(str, args)], capture_output=True, text=True, timeout=600,
                          env={**os.environ})
    if check and proc.returncode != 0:
        raise AssertionError(f"amsrag {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def one_json(text: str) -> dict:
    [line] = [json.loads(x) for x in text.splitlines() if x.strip()]
    return line


@pytest.mark.slow
def test_export_then_every_index_command_on_the_url(built_index, pg_url, tmp_path) -> None:
    summary = one_json(run("index", "export", "--index", built_index.path, "--to", pg_url, "--json").stdout)
    assert summary["passages"] == len(built_index)
    stats = one_json(run("index", "stats", "--index", pg_url, "--json").stdout)
    assert stats["backend"] == "postgres" and stats["passages"] == len(built_index)
    for retriever in ("bm25", "dense", "graph"):
        query = "Which band released the album Tinted Windows?"
        got = one_json(run("search", query, "--index", pg_url, "--retriever", retriever, "-k", "5", "--json").stdout)
        want = one_json(run("search", query, "--index", built_index.path, "--retriever", retriever, "-k", "5",
                            "--json").stdout)
        assert [h["id"] for h in got["hits"]] == [h["id"] for h in want["hits"]] and got["hits"]
    retrieved = one_json(run("retrieve", "Who directed Ed Wood?", "--index", pg_url, "--json").stdout)
    assert retrieved["passages"]

    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "pg-new", "title": "Zyxwv Quartet",
                                 "text": "The Zyxwv Quartet is a string quartet founded in Oslo."}) + "\n")
    added = one_json(run("index", "add", extra, "--index", pg_url, "--json").stdout)
    assert added["added"] == 1 and added["passages"] == len(built_index) + 1
    hits = one_json(run("search", "Zyxwv quartet", "--index", pg_url, "--json").stdout)["hits"]
    assert hits[0]["id"] == "pg-new"
    deleted = one_json(run("index", "delete", "pg-new", "--index", pg_url, "--json").stdout)
    assert deleted["deleted"] == 1 and deleted["passages"] == len(built_index)

    again = run("index", "export", "--index", built_index.path, "--to", pg_url, check=False)
    assert again.returncode == 2 and "already exists" in again.stderr
    down = run("index", "stats", "--index", "postgresql://postgres:pw@127.0.0.1:1/none", check=False)
    assert down.returncode == 2 and "cannot connect to PostgreSQL" in down.stderr and "pw@" not in down.stderr


def test_the_query_library_on_the_url(slice_passages, slice_vectors, pg_url, tmp_path) -> None:
    from amsrag.store import EmbeddedIndex
    from amsrag.store.query_library import QueryLibrary

    with EmbeddedIndex.create(tmp_path / "small") as small:
        small.add(slice_passages[:8], vectors=slice_vectors[:8])
        library = QueryLibrary.empty()
        library.add(["Where is Tulsa?", "Which band behind Tinted Windows played first in Tulsa?"],
                    ["one_hop", "multi_hop"], slice_vectors[8:10], "embedded")
        small.save_query_library(library)
    run("index", "export", "--index", tmp_path / "small", "--to", pg_url, "--json")  # the library goes along
    assert one_json(run("train", "route", "library", "--index", pg_url, "--json").stdout)["counts"] == {
        "one_hop": 1, "multi_hop": 1, "source:embedded": 2}
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "where is tulsa", "hop": "multi_hop"}\n{"question": "Who?", "hop": "one_hop"}\n')
    learned = one_json(run("train", "route", "learn", labels, "--index", pg_url, "--source", "cli", "--json").stdout)
    assert (learned["added"], learned["relabelled"], learned["size"]) == (1, 1, 3)
    assert learned["counts"] == {"one_hop": 1, "multi_hop": 2, "source:cli": 2, "source:embedded": 1}


@pytest.mark.slow
def test_sync_replace_delete_check_and_repair_on_the_url(pg_url, tmp_path) -> None:
    import psycopg

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha notes describe zebras grazing near Oslo in the spring.\n")
    (docs / "b.md").write_text("# Beta\n\nThe beta notes describe volcanoes erupting on Iceland every decade.\n")
    built = one_json(run("index", "build", docs, "--index", pg_url, "--json", "-q").stdout)
    assert (built["added"], built["passages"]) == (2, 2)
    assert one_json(run("index", "check", "--index", pg_url, "--json").stdout)["ok"]
    again = one_json(run("index", "sync", docs, "--index", pg_url, "--json", "-q").stdout)
    assert (again["added"], again["embedded"], again["documents_unchanged"]) == (0, 0, 2)

    (docs / "a.md").write_text("# Alpha\n\nThe alpha notes now describe giraffes sleeping near Bergen.\n")
    (docs / "b.md").unlink()
    (docs / "c.md").write_text("# Gamma\n\nThe gamma notes describe glaciers retreating in Norway.\n")
    synced = one_json(run("index", "sync", docs, "--index", pg_url, "--json", "-q").stdout)
    assert (synced["documents_created"], synced["documents_replaced"], synced["documents_deleted"]) == (1, 1, 1)
    assert (synced["added"], synced["removed"], synced["embedded"], synced["passages"]) == (2, 2, 2, 2)
    hits = one_json(run("search", "giraffes Bergen", "--index", pg_url, "--json").stdout)["hits"]
    assert hits[0]["id"] == "docs/a.md#0"
    assert one_json(run("search", "volcanoes Iceland", "--index", pg_url, "--json").stdout)["hits"] == []
    assert one_json(run("index", "check", "--index", pg_url, "--json").stdout)["ok"]

    note = tmp_path / "note.md"
    note.write_text("# Note\n\nA note about lighthouses on the coast.\n")
    assert one_json(run("index", "add", note, "--index", pg_url, "--json", "-q").stdout)["added"] == 1
    note.write_text("# Note\n\nA note about windmills on the coast.\n")
    replaced = one_json(run("index", "add", note, "--replace", "--index", pg_url, "--json", "-q").stdout)
    assert (replaced["added"], replaced["removed"], replaced["passages"]) == (1, 1, 3)
    deleted = one_json(run("index", "delete", "--doc", "docs/c.md", "--index", pg_url, "--json").stdout)
    assert (deleted["deleted"], deleted["documents"], deleted["passages"]) == (1, 1, 2)
    missing = run("index", "delete", "--doc", "docs/nope.md", "--index", pg_url, check=False)
    assert missing.returncode == 2 and "docs/nope.md" in missing.stderr

    with psycopg.connect(pg_url, autocommit=True) as conn:  # damage: the HNSW index and one passage's postings
        conn.execute("DROP INDEX amsrag.passages_embedding_hnsw")
        conn.execute("DELETE FROM amsrag.bm25_postings WHERE prow = (SELECT min(prow) FROM amsrag.passages)")
    damaged = run("index", "check", "--index", pg_url, check=False)
    assert damaged.returncode == 1 and "HNSW index" in damaged.stderr and "index repair" in damaged.stderr
    repaired = one_json(run("index", "repair", "--index", pg_url, "--json", "-q").stdout)
    assert (repaired["rebuilt"], repaired["reembedded"], repaired["ok"]) == (["bm25", "dense"], 0, True)
    assert one_json(run("search", "windmills", "--index", pg_url, "--json").stdout)["hits"][0]["id"] == "note.md#0"
