"""Silver labelling the Adaptive-RAG way with the configured generator, and `amsrag train classifier label`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from amsrag.config import GeneratorConfig
from amsrag.generate import Generation
from amsrag.generate.heuristic import HeuristicGenerator
from amsrag.ingest.datasets import load_silver3
from amsrag.learn.label import LabelSettings, label_question, write_labels
from amsrag.pipeline import Engine


class _Oracle:
    """A scripted stand-in (outside the product): right closed book for one question, right with passages
    only when a gold passage was retrieved."""

    name = "scripted"
    knows = True
    logprobs = False
    streaming = False

    def __init__(self, known: str, gold: dict[str, tuple[list[str], str]]) -> None:
        self.known, self.gold = known, gold

    def closed_book(self, question: str) -> Generation:
        return Generation(self.gold[question][1] if question == self.known else "no idea")

    def generate(self, question, passages) -> Generation:
        ids, answer = self.gold[question]
        hit = [p.id for p in passages if p.id in ids]
        return Generation(answer if len(hit) == len(ids) else "wrong", tuple(hit))


def test_cheapest_correct_strategy_is_the_label(built_index, slice_questions) -> None:
    engine = Engine(built_index)
    gold = {q.question: (q.gold_passage_ids, q.answers[0]) for q in slice_questions}
    known = slice_questions[6].question
    oracle = _Oracle(known, gold)

    def retrieve(question, system, k):
        return engine.retrieve(question, system=system, k=k).passages

    labels = [label_question(q, oracle, retrieve, LabelSettings()) for q in slice_questions]
    by_q = {lab.question.question: lab for lab in labels}
    assert by_q[known].label == "zero_hop" and by_q[known].correct["zero_hop"]
    for lab in labels:
        q = lab.question
        if lab.label == "one_hop" and not lab.by_dataset:
            assert lab.correct["one_hop"] and not lab.correct["zero_hop"]
        if lab.by_dataset:  # nothing answered right: the data set's hop count decides
            assert not any(lab.correct.values())
            assert lab.label == ("multi_hop" if q.dataset == "hotpotqa" else "one_hop")
    assert any(lab.correct["one_hop"] for lab in labels)


def test_labels_file_is_read_by_the_classifier_loader(tmp_path, built_index, slice_questions) -> None:
    engine = Engine(built_index)
    gen = HeuristicGenerator(built_index.encoder, GeneratorConfig(abstain_threshold=0.0))
    labels = [label_question(q, gen, lambda q, s, k: engine.retrieve(q, system=s, k=k).passages, LabelSettings())
              for q in slice_questions[:4] + slice_questions[6:8]]
    assert all(not lab.correct["zero_hop"] for lab in labels)  # an extractive reader knows nothing closed book
    out = tmp_path / "silver.jsonl"
    assert write_labels(labels, out, gen.name) == 6
    rows = load_silver3(out)
    assert [r.three for r in rows] == [lab.label for lab in labels]
    assert {r.dataset for r in rows} == {"hotpotqa", "nq"}


@pytest.mark.slow
def test_cli_classifier_label(tmp_path, slice_questions, slice_passages) -> None:
    by_id = {p.id: p for p in slice_passages}
    qa = tmp_path / "qa.jsonl"
    with qa.open("w", encoding="utf-8") as f:
        for q in [slice_questions[0], *slice_questions[6:9]]:
            f.write(json.dumps({"id": q.id, "question": q.question, "answers": q.answers, "dataset": q.dataset,
                                "gold_passages": [{"title": by_id[i].title, "text": by_id[i].text}
                                                  for i in q.gold_passage_ids],
                                "paragraphs": [{"title": p.title, "text": p.text} for p in slice_passages[:12]]})
                    + "\n")
    out = tmp_path / "labels.jsonl"
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "classifier", "label", str(qa), "--out",
                           str(out), "--generator", "extractive", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["questions"] == 4 and sum(summary["labels"].values()) == 4
    assert "labelling with extractive" in proc.stderr  # the progress bar
    assert len(load_silver3(out)) == 4
    bad = subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "classifier", "label",
                          str(tmp_path / "none.jsonl"), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and len(load_silver3(out)) == 4  # the good file is untouched


def test_silver_rows_of_other_data_sets_need_their_hop(tmp_path) -> None:
    from amsrag.errors import InputError

    good = tmp_path / "mine.jsonl"
    good.write_text(json.dumps({"question": "Who wrote our onboarding guide?", "answer": "A",
                                "dataset_name": "company-wiki", "hop": "one_hop"}) + "\n", encoding="utf-8")
    (row,) = load_silver3(good)
    assert (row.dataset, row.hop, row.three) == ("company-wiki", "one_hop", "zero_hop")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "Q?", "answer": "B", "dataset_name": "company-wiki"}) + "\n",
                   encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:1: .*no `hop`"):
        load_silver3(bad)


def test_train_reads_a_generators_own_silver_labels(tmp_path, shared_data) -> None:
    from amsrag.learn.classifier.data import build_labelled_data

    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps({"question": f"Which team won the {y} company cup?", "answer": "AB"[y % 2],
                                        "dataset_name": "company-wiki", "hop": "one_hop"}) + "\n"
                            for y in range(2000, 2040)), encoding="utf-8")
    data = build_labelled_data(shared_data, cap=50, seed=13, silver=[mine])
    silver = [r for r in data.rows if r.source == "silver3"]
    assert len(silver) == 40 and {r.dataset for r in silver} == {"company-wiki"}  # replaces FLAN-T5-XL's
