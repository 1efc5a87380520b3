"""Candidates with labels for every WTQ question: each question's programs are executed on its table (in-memory
SQLite) and a candidate is positive when its answer matches the target under `denotation_match`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from amsrag.embed.encoder import Encoder
from amsrag.learn.common import embed_questions
from amsrag.learn.tables.data import Question, Split, SqliteRunner, split_of
from amsrag.structured.denotation import denotation_match
from amsrag.structured.parser import build_candidates, column_texts
from amsrag.tables.table import Table, TableProfile, memory_table


@dataclass(frozen=True, slots=True)
class Group:
    """One question's executed candidates."""

    question: int  # index into the questions
    split: Split
    x: np.ndarray
    labels: np.ndarray
    kinds: tuple[str, ...]
    enumerated: int


def embed_tables(questions: Sequence[Question], profiles: dict[str, TableProfile], encoder: Encoder,
                 cache_dir: Path | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Question vectors (row-aligned) and each table's column-name vectors, through the embedding cache."""
    names = sorted(profiles)
    texts = [t for n in names for t in column_texts(profiles[n])]
    vectors = embed_questions([q.utterance for q in questions] + texts, encoder, cache_dir)
    qv = vectors[: len(questions)]
    cols: dict[str, np.ndarray] = {}
    at = len(questions)
    for n in names:
        width = len(profiles[n].columns)
        cols[n] = vectors[at: at + width]
        at += width
    return qv, cols


def collect(questions: Sequence[Question], tables: dict[str, Table], encoder: Encoder, cache_dir: Path | None = None,
            progress: Callable[[int], None] | None = None) -> list[Group]:
    databases = {path: memory_table(table) for path, table in tables.items()}
    profiles = {path: db[1] for path, db in databases.items()}
    qv, cols = embed_tables(questions, profiles, encoder, cache_dir)
    groups = []
    for qi, q in enumerate(questions):
        conn, profile = databases[q.table]
        cands = build_candidates(q.utterance, profile, SqliteRunner(conn), qv[qi], cols[q.table])
        labels = np.asarray([float(denotation_match(e.answer, q.targets)) for e in cands.executed])
        groups.append(Group(qi, split_of(q.table), cands.x, labels, tuple(e.program.kind for e in cands.executed),
                            cands.enumerated))
        if progress is not None and qi % 500 == 0:
            progress(qi)
    for conn, _ in databases.values():
        conn.close()
    return groups


def save_groups(path: Path, groups: Sequence[Group]) -> None:
    """The collected candidates as one .npz (features stacked; kinds and splits as strings)."""
    sizes = np.asarray([len(g.labels) for g in groups], dtype=np.int64)
    np.savez_compressed(
        path, x=np.concatenate([g.x for g in groups]) if groups else np.zeros((0, 0)),
        labels=np.concatenate([g.labels for g in groups]) if groups else np.zeros(0), sizes=sizes,
        questions=np.asarray([g.question for g in groups]), splits=np.asarray([g.split for g in groups]),
        kinds=np.asarray([k for g in groups for k in g.kinds]), enumerated=np.asarray([g.enumerated for g in groups]))


def load_groups(path: Path) -> list[Group]:
    with np.load(path, allow_pickle=False) as npz:
        x, labels, sizes, kinds = npz["x"], npz["labels"], npz["sizes"], npz["kinds"]
        questions, splits, enumerated = npz["questions"], npz["splits"], npz["enumerated"]
    out, at = [], 0
    for i, n in enumerate(sizes):
        n = int(n)
        out.append(Group(int(questions[i]), str(splits[i]), x[at:at + n], labels[at:at + n],  # type: ignore[arg-type]
                         tuple(str(k) for k in kinds[at:at + n]), int(enumerated[i])))
        at += n
    return out
