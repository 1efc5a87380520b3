"""What library code knows about the public QA data sets of the shared data folder (../shared/data): where the
folder is (`default_data_dir`), which data sets are multi-hop / one-hop (`MULTI_HOP_DATASETS`, `hop_of_dataset`),
the data set a file name points at, and the files the trainers and the evaluation read (`SILVER3_FILE`, ...)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from amsrag.types import Complexity

MULTI_HOP_DATASETS = ("hotpotqa", "musique", "2wikimultihopqa")
ONE_HOP_DATASETS = ("nq", "squad", "triviaqa", "popqa")
DATASET_COMPLEXITY: dict[str, Complexity] = {
    **{d: "multi_hop" for d in MULTI_HOP_DATASETS},
    **{d: "one_hop" for d in ONE_HOP_DATASETS},
}


def dataset_from_name(path: Path) -> str:
    """The data set a file name points at ("" when it names none)."""
    name = path.name.lower()
    tokens = set(re.split(r"[^a-z0-9]+", name))
    hints = (
        ("2wikimultihopqa", "2wiki" in name),
        ("musique", "musique" in name),
        ("hotpotqa", "hotpot" in name or "hq" in tokens),
        ("squad", "squad" in name),
        ("triviaqa", "trivia" in name),
        ("popqa", "popqa" in name),
        ("nq", "nq" in tokens or "natural_questions" in name or "nq-open" in name),
        ("wiki", "wiki" in tokens),
    )
    return next((dataset for dataset, hit in hints if hit), "")


def hop_of_dataset(dataset: str) -> Complexity | None:
    """multi_hop / one_hop for a data set of known hop count, else None."""
    return DATASET_COMPLEXITY.get(dataset)


# ---------------------------------------------------------------- the shared data folder


def default_data_dir() -> Path:
    """`$AMSRAG_DATA`, else ``../shared/data`` relative to the working directory."""
    env = os.environ.get("AMSRAG_DATA")
    return Path(env) if env else Path("..") / "shared" / "data"


# Files of the data folder that library code reads (paths relative to it).
# Adaptive-RAG's FLAN-T5-XL silver complexity labels, three-way A/B/C (the evaluation's zero-hop group).
SILVER3_FILE = "complexity_labels/adaptiverag_flan_t5_xl_silver_train_reconstructed.jsonl"
# Dataset-derived hop labels of the classifier: every QA file of these folders (corpora excluded). RetrievalQA
# is left out: its questions come from mixed sources whose hop count is unknown.
DATASET_DIRS: tuple[str, ...] = (
    "hotpotqa", "musique", "2wikimultihopqa", "nq", "squad", "triviaqa", "popqa", "question_lists",
)
# The retrieval evaluator's candidate pools: HotpotQA distractor setting, MuSiQue, the NQ-open oracle, and
# Wikipedia passages (the NQ pools' easy negatives).
HOTPOT_FILES = ("hotpotqa/rpt_hotpot_distractor_validation_train.jsonl",
                "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl",
                "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl")
MUSIQUE_FILES = ("musique/migres_musique_200.jsonl", "musique/hipporag_musique_train_100.json")
NQ_FILE = "nq/lostinthemiddle_nq-open-oracle.jsonl.gz"
WIKI_FILE = "flashrag/wiki_sample_corpus_1000.jsonl"
# The evaluation benchmark's default mix: per group, its source files.
EVAL_FILES: dict[str, tuple[str, ...]] = {
    "nq": (NQ_FILE,),
    "squad": ("squad/squad_v1.1_subset_20articles.json", "squad/routerlens_squad_dev_4330.json"),
    "hotpotqa": ("hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl",
                 "hotpotqa/rpt_hotpot_distractor_validation_train.jsonl",
                 "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl", "hotpotqa/migres_hotpot_200.jsonl",
                 "hotpotqa/hipporag_hotpotqa_train_100.json"),
    "musique": MUSIQUE_FILES,
}
# The span reader's training data (learn/reader), in the order it reads them: the first copy of a question wins.
READER_FILES: dict[str, tuple[str, ...]] = {
    "squad": EVAL_FILES["squad"],
    "nq": (NQ_FILE,),
    "hotpotqa": (*HOTPOT_FILES, "hotpotqa/migres_hotpot_200.jsonl", "hotpotqa/hipporag_hotpotqa_train_100.json"),
    "musique": MUSIQUE_FILES,
}
# Where zero-hop (silver A) questions find their answers.
ANSWER_FILES = ("question_lists/honesty_hq_dev.jsonl", "question_lists/honesty_2wikimultihopqa_dev.jsonl",
                "question_lists/honesty_musique_dev.jsonl", "question_lists/honesty_squad_dev.jsonl",
                "question_lists/honesty_nq_test.jsonl", "nq/flashrag_nq_test_sub1000.jsonl",
                "triviaqa/flashrag_triviaqa_test_sub1000.jsonl", "nq/migres_odqa_nq200_trivia200.jsonl")
