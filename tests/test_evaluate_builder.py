"""The eval benchmark builder: corpus and query set from QA files, --corpus matching, caching, options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.evaluate.builder import Benchmark, BenchmarkSpec, build, load_or_build, parse_sizes
from amsrag.evaluate.systems import DEFAULT_SYSTEMS, parse_systems
from amsrag.ingest import load_qa
from amsrag.types import content_hash

FIX = Path(__file__).parent / "fixtures"
HOTPOT, MUSIQUE, SQUAD = FIX / "hotpot_hf_dev_3.jsonl", FIX / "musique_migres_3.jsonl", FIX / "squad_routerlens_5.json"
SLICE = FIX / "retrieval_slice"


def _spec(tmp_path: Path, **kw) -> BenchmarkSpec:
    return BenchmarkSpec(**{"qa": [HOTPOT, MUSIQUE, SQUAD], "noise": 0, "data_dir": tmp_path / "no-data", **kw})


def test_corpus_is_every_paragraph_of_the_files_deduplicated_and_gold_ids_point_into_it(tmp_path):
    bench = build(_spec(tmp_path))
    expected = {p.content_hash for f in (HOTPOT, MUSIQUE, SQUAD) for p in load_qa(f).passages}
    assert {p.content_hash for p in bench.passages} == expected
    assert len(bench.passages) == len(expected)  # deduplicated by content
    ids = {p.id for p in bench.passages}
    n_questions = sum(len(load_qa(f).questions) for f in (HOTPOT, MUSIQUE, SQUAD))
    assert len(bench.queries) == n_questions
    for q in bench.queries:
        assert q.gold and set(q.gold) <= ids and q.answers
        assert q.complexity == ("one_hop" if q.dataset == "squad" else "multi_hop")
        assert q.label_source == "dataset"
    assert bench.info["queries_by_dataset"] == {"hotpotqa": 3, "musique": 3, "squad": 5}


def test_sizes_take_a_seeded_sample_per_dataset(tmp_path):
    a = build(_spec(tmp_path, sizes={"squad": 2, "hotpotqa": 1}))
    b = build(_spec(tmp_path, sizes={"squad": 2, "hotpotqa": 1}))
    assert [q.id for q in a.queries] == [q.id for q in b.queries]
    assert a.info["queries_by_dataset"] == {"hotpotqa": 1, "musique": 3, "squad": 2}
    with pytest.raises(InputError, match="--sizes names"):
        build(_spec(tmp_path, sizes={"triviaqa": 2}))


def test_calibration_questions_are_disjoint_from_the_eval_queries(tmp_path):
    bench, directory = load_or_build(_spec(tmp_path, sizes={"squad": 2, "hotpotqa": 1}), tmp_path / "cache")
    assert {q.dataset for q in bench.calibration} == {"squad", "hotpotqa"}  # musique: all 3 are eval queries
    assert len(bench.calibration) == 3 + 2
    assert not {q.question for q in bench.calibration} & {q.question for q in bench.queries}
    ids = {p.id for p in bench.passages}
    # amsrag QA JSONL with gold passages by corpus id: what `amsrag train route tune --qa` reads
    rows = load_qa(directory / "calibration.jsonl").questions
    assert len(rows) == 5 and all(r.complexity and r.gold_passage_ids and set(r.gold_passage_ids) <= ids for r in rows)
    cached, _ = load_or_build(_spec(tmp_path, sizes={"squad": 2, "hotpotqa": 1}), tmp_path / "cache")
    assert [(q.id, q.gold, q.complexity) for q in cached.calibration] == [
        (q.id, q.gold, q.complexity) for q in bench.calibration]


def test_gold_scope_keeps_only_the_gold_passages(tmp_path):
    bench = build(_spec(tmp_path, scope="gold"))
    assert {p.id for p in bench.passages} == {g for q in bench.queries for g in q.gold}


def test_explicit_corpus_is_used_exactly_and_gold_matched_by_title_and_text(tmp_path):
    passages = load_qa(HOTPOT).passages
    gold_of_first = set(load_qa(HOTPOT).questions[0].gold_passage_ids)
    corpus = tmp_path / "corpus.jsonl"
    with open(corpus, "w") as f:
        for i, p in enumerate(passages):
            if p.id in gold_of_first or i % 2 == 0:  # keep the first question's gold and half the rest
                # own ids and extra white space: matched by normalised title + text, not by id
                f.write(json.dumps({"id": f"doc-{i}", "title": p.title + "  ", "text": "  " + p.text}) + "\n")
    bench = build(_spec(tmp_path, qa=[HOTPOT], corpus=corpus, noise=0))
    assert all(p.id.startswith("doc-") for p in bench.passages)
    first = next(q for q in bench.queries if q.id == load_qa(HOTPOT).questions[0].id)
    assert len(first.gold) == len(gold_of_first) and all(g.startswith("doc-") for g in first.gold)
    by_id = {p.id: p for p in bench.passages}
    assert {content_hash(by_id[g].title, by_id[g].text) for g in first.gold} == {
        p.content_hash for p in passages if p.id in gold_of_first}
    dropped = sum(bench.info["dropped"].values())
    assert len(bench.queries) + dropped == 3


def test_qa_jsonl_with_given_complexity_and_noise(tmp_path, shared_data):
    qa = tmp_path / "qa.jsonl"
    rows = [{"id": "z1", "question": "What is the capital of France?", "answers": ["Paris"], "complexity": "zero_hop"},
            {"id": "o1", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"], "complexity": "one_hop",
             "gold_passages": [{"title": "Hamlet", "text": "Hamlet is a tragedy written by William Shakespeare."}]}]
    qa.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    bench = build(BenchmarkSpec(qa=[qa], noise=7, data_dir=shared_data))
    assert len(bench.passages) == 1 + 7
    by_id = {q.id: q for q in bench.queries}
    assert by_id["z1"].complexity == "zero_hop" and by_id["z1"].gold == [] and by_id["z1"].label_source == "given"
    assert len(by_id["o1"].gold) == 1
    with pytest.raises(InputError, match="only 1000 noise passages"):
        build(BenchmarkSpec(qa=[qa], noise=5000, data_dir=shared_data))


def test_built_once_and_cached_by_content(tmp_path):
    spec = _spec(tmp_path)
    bench, directory = load_or_build(spec, tmp_path / "cache")
    assert (directory / "benchmark.json").is_file()
    again, directory2 = load_or_build(_spec(tmp_path), tmp_path / "cache")
    assert directory2 == directory and again.key == bench.key
    assert [(q.id, q.gold, q.answers) for q in again.queries] == [(q.id, q.gold, q.answers) for q in bench.queries]
    assert [p.id for p in Benchmark.load(directory).passages] == [p.id for p in bench.passages]
    other, directory3 = load_or_build(_spec(tmp_path, seed=99, sizes={"squad": 1}), tmp_path / "cache")
    assert directory3 != directory and other.key != bench.key


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        build(_spec(tmp_path, qa=[tmp_path / "missing.jsonl"]))
    with pytest.raises(InputError, match="noise"):
        build(_spec(tmp_path, noise=-1))
    with pytest.raises(InputError, match="NAME=N"):
        parse_sizes("nq=many")
    assert parse_sizes("nq=3, zero_hop=0") == {"nq": 3, "zero_hop": 0}


def test_system_names_and_threshold_rows():
    rows = parse_systems(None)
    assert [r.name for r in rows] == list(DEFAULT_SYSTEMS)
    assert {r.name for r in rows} >= {"bm25", "dense", "graph", "A0", "A1", "A2", "A3", "A4", "adaptive-rag", "full",
                                      "full@0.85/0.55", "full@0.90/0.60", "full@0.92/0.62", "full@0.95/0.65"}
    row = parse_systems("full@0.92/0.62")[0]
    assert row.system == "full" and row.thresholds == (0.92, 0.62)
    assert [r.name for r in parse_systems("fixed,bm25,bm25")] == ["fixed", "bm25"]
    for bad, msg in (("nope", "unknown system"), ("full@0.5/0.7", "theta_low < theta_high"),
                     ("bm25@0.9/0.6", "adaptive"), ("", "no system")):
        with pytest.raises(InputError, match=msg):
            parse_systems(bad if bad else ",")
