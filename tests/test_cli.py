"""The `amsrag` command line end to end, through the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SLICE

AMSRAG = [sys.executable, "-m", "amsrag.cli"]


def run(*args: str | Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([*AMSRAG, *map(str, args)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"amsrag {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "index"
    [summary] = json_lines(run("index", "build", SLICE / "passages.jsonl", "--index", path, "--json").stdout)
    assert summary["added"] == 90 and summary["passages"] == 90
    return path


def test_stats_and_search_json(cli_index) -> None:
    [stats] = json_lines(run("index", "stats", "--index", cli_index, "--json").stdout)
    assert stats["passages"] == 90 and stats["embedding_model"].startswith("all-MiniLM-L6-v2-int8")
    for retriever in ("bm25", "dense", "graph"):
        [res] = json_lines(run("search", "--index", cli_index, "--retriever", retriever, "-k", "3", "--json",
                               "Tinted Windows band first performance").stdout)
        assert set(res) == {"query", "retriever", "hits", "ms"} and res["retriever"] == retriever
        assert len(res["hits"]) == 3 and [h["rank"] for h in res["hits"]] == [1, 2, 3]
        assert set(res["hits"][0]) == {"id", "title", "score", "rank"}
    human = run("search", "--index", cli_index, "--retriever", "bm25", "Tinted Windows").stdout
    assert "Tinted Windows" in human


def test_add_and_delete(cli_index, tmp_path) -> None:
    extra = tmp_path / "notes.md"
    extra.write_text("# Field notes\n\nThe quokka is a small marsupial found on Rottnest Island.\n", "utf-8")
    [rep] = json_lines(run("index", "add", extra, "--index", cli_index, "--json").stdout)
    assert rep["added"] == 1 and rep["passages"] == 91
    [res] = json_lines(run("search", "--index", cli_index, "--json", "quokka marsupial").stdout)
    assert res["hits"][0]["title"].startswith("Field notes")
    [rep] = json_lines(run("index", "delete", "--index", cli_index, "--json", res["hits"][0]["id"]).stdout)
    assert rep["deleted"] == 1 and rep["passages"] == 90


def test_bad_input_is_reported_and_loses_nothing(cli_index, tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "broken"\n', "utf-8")
    proc = run("index", "add", bad, "--index", cli_index, check=False)
    assert proc.returncode == 2 and "bad.jsonl" in proc.stderr and "bad.jsonl:2:" in proc.stderr
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    proc = run("index", "add", latin, "--index", cli_index, check=False)
    assert proc.returncode == 2 and "latin.txt" in proc.stderr and "UTF-8" in proc.stderr
    [stats] = json_lines(run("index", "stats", "--index", cli_index, "--json").stdout)
    assert stats["passages"] == 90

    empty = tmp_path / "empty.jsonl"
    empty.write_text("", "utf-8")
    proc = run("index", "build", empty, "--index", tmp_path / "new", check=False)
    assert proc.returncode == 2 and "empty corpus" in proc.stderr
    assert not (tmp_path / "new").exists()

    proc = run("search", "--index", tmp_path / "missing", "anything", check=False)
    assert proc.returncode == 2 and "no index directory" in proc.stderr
    proc = run("search", "--index", cli_index, "   ", check=False)
    assert proc.returncode == 2 and "query is empty" in proc.stderr
    proc = run("index", "build", SLICE / "passages.jsonl", "--index", cli_index, check=False)
    assert proc.returncode == 2 and "already exists" in proc.stderr
    proc = run("index", "build", SLICE / "passages.jsonl", "--index", tmp_path / "g", "--graph", "spacy", check=False)
    assert proc.returncode == 2 and "--graph must be 'ner' or 'title'" in proc.stderr
    assert not (tmp_path / "g").exists()


def test_build_with_a_title_only_graph(tmp_path) -> None:
    run("index", "build", SLICE / "passages.jsonl", "--index", tmp_path / "t", "--graph", "title", "-q")
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert manifest["components"]["graph"]["params"]["ner"] is False
    [stats] = json_lines(run("index", "stats", "--index", tmp_path / "t", "--json").stdout)
    assert stats["graph"]["entities"] > 0 and stats["bm25"]["segments"] >= 1


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path) -> None:
    home = tmp_path / "home"
    proc = run("demo", env={"AMSRAG_HOME": str(home)})
    assert "Recall@5" in proc.stdout and "graph" in proc.stdout
    assert "answer:" in proc.stdout and "cited a gold passage" in proc.stdout  # answers beside the routes
    assert (home / "demo-index" / "manifest.json").is_file()
    again = run("demo", env={"AMSRAG_HOME": str(home)})  # reuses the index
    assert "building the demo index" not in again.stderr
    shutil.rmtree(home)


def test_retrieve_json_traces_the_learned_fuser_and_the_expert_weights(cli_index) -> None:
    question = "The band who released the debut album Tinted Windows had their first performance in what city?"
    [res] = json_lines(run("retrieve", question, "--index", cli_index, "--json").stdout)
    fusion = res["trace"]["fusion"]
    assert res["trace"]["system"] == "full" and fusion["method"] == "learned" and fusion["base"] == "ca_rrf"
    assert len(fusion["explain"]) == 3 and fusion["explain"][0]["id"] == res["passages"][0]["id"]
    assert all(len(e["top_features"]) == 5 for e in fusion["explain"])
    [experts] = json_lines(run("retrieve", question, "--index", cli_index, "--system", "experts", "--json").stdout)
    weights = experts["trace"]["fusion"]["expert_weights"]
    assert weights and abs(sum(weights.values()) - 1) < 1e-3
    human = run("retrieve", question, "--index", cli_index, "--explain", "1").stdout
    assert "learned fuser on" in human


def test_route_learn_and_library(cli_index, tmp_path) -> None:
    labels = tmp_path / "labels.jsonl"
    rows = [{"question": "Where is Tulsa?", "hop": "one_hop"},
            {"question": "In which city did the band behind Tinted Windows first perform?", "complexity": "multi_hop"},
            {"question": "Who founded anthroposophy?", "label": "one_hop"}]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    [rep] = json_lines(run("train", "route", "learn", labels, "--index", cli_index, "--json").stdout)
    assert (rep["received"], rep["added"], rep["relabelled"], rep["unchanged"], rep["size"]) == (3, 3, 0, 0, 3)
    assert rep["source"] == "labels.jsonl" and rep["counts"] == {"one_hop": 2, "multi_hop": 1,
                                                                 "source:labels.jsonl": 3}
    # a QA file: the hop comes from hop_of_question (hotpotqa multi_hop, nq one_hop); "where is tulsa" relabelled
    qa = tmp_path / "qa.jsonl"
    qa.write_text((SLICE / "questions.jsonl").read_text("utf-8") + json.dumps(
        {"id": "t", "question": "where is TULSA", "answers": ["Oklahoma"], "dataset": "hotpotqa"}) + "\n", "utf-8")
    [rep] = json_lines(run("train", "route", "learn", qa, "--index", cli_index, "--source", "slice", "--json").stdout)
    assert (rep["added"], rep["relabelled"], rep["unchanged"], rep["size"]) == (16, 1, 0, 19)
    assert rep["counts"] == {"one_hop": 11, "multi_hop": 8, "source:labels.jsonl": 2, "source:slice": 17}

    for text, where in [('{"question": "Fine?", "hop": "one_hop"}\n{"question": "Bad?", "hop": "zero_hop"}\n',
                         "bad.jsonl:2: unknown hop label 'zero_hop' for 'Bad?'"),
                        ('{"question": "Fine?", "hop": "one_hop"}\n\n{"question": "No label?", "answer": "x"}\n',
                         "bad.jsonl:3: no hop label for 'No label?'"),
                        ('{"question": "Fine?", "hop": "one_hop"}\n{"question": "", "hop": "one_hop"}\n',
                         "bad.jsonl:2: `question` must be a non-empty question"),
                        ('{"question": "Fine?", "hop": "one_hop"}\n{"question": "Broken", \n',
                         "bad.jsonl:2: malformed")]:
        (tmp_path / "bad.jsonl").write_text(text, "utf-8")
        proc = run("train", "route", "learn", tmp_path / "bad.jsonl", "--index", cli_index, check=False)
        assert proc.returncode == 2 and where in " ".join(proc.stderr.split()), proc.stderr

    [lib] = json_lines(run("train", "route", "library", "--index", cli_index, "--json").stdout)
    assert lib == {"index": str(cli_index), "size": 19, "counts": rep["counts"]}  # the bad files added nothing
    human = run("train", "route", "library", "--index", cli_index).stdout
    assert "multi_hop" in human and "source:slice" in human and "19" in human

    # the library votes in routing: a stored question is its own closest neighbour, and the trace says so
    question = "In which city did the band behind Tinted Windows first perform?"
    [res] = json_lines(run("retrieve", question, "--index", cli_index, "--json").stdout)
    cx = res["trace"]["complexity"]
    assert cx["library"]["neighbours"][0]["question"] == question and cx["library"]["n_close"] >= 1
    assert cx["library"]["neighbours"][0]["hop"] == "multi_hop" and cx["decided_by"] in ("classifier", "library")
    assert "query library:" in run("retrieve", question, "--index", cli_index).stdout


def test_classifier_calibrate_stores_the_temperature_in_the_index(tmp_path, shared_data) -> None:
    index = tmp_path / "index"
    run("index", "build", SLICE / "passages.jsonl", "--index", index, "--json")
    rows = []
    for name, hop in (("honesty_hq_dev.jsonl", "multi_hop"), ("honesty_nq_test.jsonl", "one_hop")):
        lines = (shared_data / "question_lists" / name).read_text("utf-8").splitlines()[:40]
        rows += [{"question": json.loads(line)["question"], "hop": hop} for line in lines]
    labels = tmp_path / "mine.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    [res] = json_lines(run("train", "classifier", "calibrate", "--qa", labels, "--index", index, "--json").stdout)
    assert res["questions"] == 80 and res["hop_temperature"] > 0
    assert f"hop_temperature = {res['hop_temperature']}" in (index / "config.toml").read_text("utf-8")
    # too few questions, or one label only: refused, nothing stored changes
    (tmp_path / "few.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:10]), "utf-8")
    proc = run("train", "classifier", "calibrate", "--qa", tmp_path / "few.jsonl", "--index", index, check=False)
    assert proc.returncode == 2 and "at least 50" in proc.stderr
    assert f"hop_temperature = {res['hop_temperature']}" in (index / "config.toml").read_text("utf-8")
