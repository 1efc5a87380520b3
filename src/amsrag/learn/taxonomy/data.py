"""Labelled questions for the task head (text / aggregation / structured), with their table context.

- structured: WikiTableQuestions questions; the table split of `amsrag.learn.tables.data` (by table path)
  decides train / calibration / test, so the head never sees a test table's questions;
- text: the complexity classifier's labelled questions (`learn.classifier.data`: held-out benchmark, demo
  and stress-source questions excluded), its train / cal splits;
- aggregation: the templated prompts of `aggregation.py`, train family for train / cal, test family for test.

The table features need tables to match against: the training rows are matched against the training
tables, the calibration rows against the calibration tables, and a share of the text and aggregation rows
against no tables at all (an index without tables), so the head learns what a missing table means.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from amsrag.learn.common import seeded_rank
from amsrag.learn.taxonomy.aggregation import aggregation_questions
from amsrag.types import TaskKind

RowSplit = Literal["train", "cal", "test"]
NO_TABLE_SHARE = 0.3  # text / aggregation rows whose features see an index without tables
MISSING_TABLE_SHARE = 0.2  # table questions asked of an index that lacks their table: labelled text


@dataclass(frozen=True, slots=True)
class TaskRow:
    question: str
    kind: TaskKind
    split: RowSplit
    source: str  # data set, "wtq" or "templates"
    with_tables: bool  # whether the row's features are computed against tables
    other_tables: bool = False  # against the other split's tables: a table question whose table is not there


def _no_tables(seed: int, question: str) -> bool:
    return _share(seed, "no-table", question) < NO_TABLE_SHARE


def text_rows(data_dir: Path, n_train: int, n_cal: int, seed: int) -> list[TaskRow]:
    from amsrag.learn.classifier.data import build_labelled_data

    data = build_labelled_data(data_dir, seed=seed)
    out: list[TaskRow] = []
    for split, n in (("train", n_train), ("cal", n_cal)):
        rows = sorted(data.split(split), key=lambda r: seeded_rank(seed, r.key))[:n]  # type: ignore[arg-type]
        out += [TaskRow(r.question, "text", split, r.dataset, not _no_tables(seed, r.question))  # type: ignore[arg-type]
                for r in rows]
    return out


def structured_rows(data_dir: Path, n_train: int, n_cal: int, n_test: int, seed: int) -> list[TaskRow]:
    from amsrag.learn.tables.data import load_questions, split_of

    by_split: dict[str, list[str]] = {"train": [], "calibration": [], "test": []}
    for q in load_questions(data_dir):
        by_split[split_of(q.table)].append(f"{q.table}\x1f{q.utterance}")
    out: list[TaskRow] = []
    for split, name, n in (("train", "train", n_train), ("cal", "calibration", n_cal), ("test", "test", n_test)):
        picked = sorted(by_split[name], key=lambda k: seeded_rank(seed, k))[:n]
        for k in picked:
            table, question = k.split("\x1f", 1)
            missing = split != "test" and _share(seed, "missing", k) < MISSING_TABLE_SHARE
            # "structured" means: a table of this index answers it. Asked of an index without its table, the
            # same question must go down the text path, so the head has to look at the table match.
            out.append(TaskRow(question, "text" if missing else "structured", split, "wtq:" + table,  # type: ignore[arg-type]
                               True, other_tables=missing))
    return out


def _share(seed: int, salt: str, key: str) -> float:
    return int(seeded_rank(seed, f"{salt}\x1f{key}")[:8], 16) / 2**32


def aggregation_rows(n_train: int, n_cal: int, n_test: int, seed: int) -> list[TaskRow]:
    train = aggregation_questions("train", n_train + n_cal, seed)
    out = [TaskRow(q, "aggregation", "train" if i < n_train else "cal", "templates", not _no_tables(seed, q))
           for i, q in enumerate(train)]
    out += [TaskRow(q, "aggregation", "test", "templates", True) for q in aggregation_questions("test", n_test, seed)]
    return out


def rows_hash(rows: Sequence[TaskRow]) -> str:
    h = hashlib.sha256()
    for r in rows:
        h.update("\x1f".join([r.question, r.kind, r.split, r.source, str(r.with_tables), str(r.other_tables)]
                              ).encode() + b"\n")
    return h.hexdigest()
