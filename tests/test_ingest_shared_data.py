"""Every QA file of ../shared/data loads through `load_qa` with auto-detection (slow: reads ~40 MB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.ingest import detect_format, load_qa

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# file -> (format, minimum questions, minimum passages, every question has gold passages)
QA_FILES: dict[str, tuple[str, int, int, bool]] = {
    "2wikimultihopqa/migres_2wiki_train_500_decomp.json": ("hotpotqa", 450, 3000, True),
    "hotpotqa/hipporag_hotpotqa_train_100.json": ("hotpotqa", 100, 900, True),
    "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl": ("hotpotqa", 450, 4000, True),
    "hotpotqa/migres_hotpot_200.jsonl": ("hotpotqa", 190, 1800, True),
    "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl": ("hotpotqa", 290, 2800, True),
    "hotpotqa/rpt_hotpot_distractor_validation_train.jsonl": ("hotpotqa", 290, 2800, True),
    "musique/hipporag_musique_train_100.json": ("musique", 100, 1800, True),
    "musique/migres_musique_200.jsonl": ("musique", 190, 3000, True),
    "nq/lostinthemiddle_nq-open-oracle.jsonl.gz": ("nq", 1900, 1900, True),
    "nq/flashrag_nq_test_sub1000.jsonl": ("nq", 700, 0, False),
    "nq/migres_odqa_nq200_trivia200.jsonl": ("nq", 350, 80, False),
    "triviaqa/flashrag_triviaqa_test_sub1000.jsonl": ("nq", 950, 0, False),
    "popqa/flashrag_popqa_test_sub1000.jsonl": ("nq", 950, 0, False),
    "squad/squad_v1.1_subset_20articles.json": ("squad", 4500, 900, True),
    "squad/routerlens_squad_dev_4330.json": ("squad", 4300, 3800, True),
    # CMRC 2018 (Chinese) is in the SQuAD v1.1 layout; it loads as `squad` until Chinese support names it
    "cmrc2018/cmrc2018_train.json": ("squad", 10000, 2400, True),
    "cmrc2018/cmrc2018_dev_even.json": ("squad", 1600, 420, True),
    "retrievalqa/retrievalqa_gpt4_250.jsonl": ("retrievalqa", 250, 3000, False),
    "question_lists/honesty_hq_dev.jsonl": ("questions", 6900, 0, False),
    "question_lists/honesty_2wikimultihopqa_dev.jsonl": ("questions", 12000, 0, False),
    "question_lists/honesty_musique_dev.jsonl": ("questions", 2300, 0, False),
    "question_lists/honesty_squad_dev.jsonl": ("questions", 10000, 0, False),
    "question_lists/honesty_nq_test.jsonl": ("questions", 2900, 0, False),
    "question_lists/honesty_popqa_test.jsonl": ("questions", 14000, 0, False),
}
CORPUS_FILES = {
    "flashrag/wiki_sample_corpus_1000.jsonl": ("flashrag", 1000),
    "hotpotqa/hipporag_hotpotqa_train_100_corpus.json": ("corpus", 990),
    "musique/hipporag_musique_train_100_corpus.json": ("corpus", 1890),
}
LABEL_DIR = "complexity_labels"
# Files no loader reads yet, and why.
NOT_READ = {
    "wikitablequestions/training.tsv": "table QA: questions over CSV tables (no table source yet)",
    "wikitablequestions/tables.tar.gz": "the tables of wikitablequestions/training.tsv",
    # read by the decomposer's training (learn/decomposer/data.py) and benchmarks/router_plan.py, not by ingest
    "break/break_qdmr_high_level_dev.csv": "QDMR decompositions (decomposer training)",
    "strategyqa/aos_strategyqa_train.json": "implicit questions with decompositions (decomposer training)",
    "morehopqa/alabnii_morehopqa_final_150samples.json": "multi-hop questions (benchmarks/router_plan.py)",
}


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}; these tests read the shared QA data")
    return SHARED_DATA


@pytest.mark.slow
def test_every_data_file_is_covered(data_dir: Path) -> None:
    files = {
        p.relative_to(data_dir).as_posix()
        for p in data_dir.rglob("*")
        if p.is_file() and p.suffix != ".md" and not p.relative_to(data_dir).as_posix().startswith(LABEL_DIR)
    }
    assert files == set(QA_FILES) | set(CORPUS_FILES) | set(NOT_READ)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(QA_FILES))
def test_every_qa_file_loads(data_dir: Path, name: str) -> None:
    fmt, min_questions, min_passages, all_gold = QA_FILES[name]
    path = data_dir / name
    assert detect_format(path) == fmt
    qa = load_qa(path)
    assert len(qa.questions) >= min_questions
    assert len(qa.passages) >= min_passages
    ids = {p.id for p in qa.passages}
    assert len(ids) == len(qa.passages)
    assert len({q.id for q in qa.questions}) == len(qa.questions)
    assert all(set(q.gold_passage_ids) <= ids for q in qa.questions)
    if all_gold:
        assert all(q.gold_passage_ids for q in qa.questions)
    assert sum(bool(q.answers) for q in qa.questions) >= 0.99 * len(qa.questions)
    assert all(q.dataset and q.complexity in ("one_hop", "multi_hop") for q in qa.questions)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_corpora_load_as_passages(data_dir: Path, name: str) -> None:
    fmt, min_passages = CORPUS_FILES[name]
    assert detect_format(data_dir / name) == fmt
    qa = load_qa(data_dir / name)
    assert len(qa.passages) >= min_passages and not qa.questions


@pytest.mark.slow
@pytest.mark.parametrize(
    ("questions", "corpus"),
    [
        ("hotpotqa/hipporag_hotpotqa_train_100.json", "hotpotqa/hipporag_hotpotqa_train_100_corpus.json"),
        ("musique/hipporag_musique_train_100.json", "musique/hipporag_musique_train_100_corpus.json"),
    ],
)
def test_hipporag_corpus_holds_the_gold_passages(data_dir: Path, questions: str, corpus: str) -> None:
    """Content ids line up across files: a corpus indexed alone answers the gold ids of its QA file."""
    ids = {p.id for p in load_qa(data_dir / corpus).passages}
    assert all(set(q.gold_passage_ids) <= ids for q in load_qa(data_dir / questions).questions)


@pytest.mark.slow
def test_complexity_label_files_are_refused(data_dir: Path) -> None:
    files = sorted((data_dir / LABEL_DIR).iterdir())
    assert files
    for path in files:
        with pytest.raises(InputError, match="complexity-label file"):
            load_qa(path)
