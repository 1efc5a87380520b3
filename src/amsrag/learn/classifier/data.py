"""Labelled questions for the complexity classifier: merging, dedup, capping, stratified splits.

Three label sources, in order of precedence for a question met in several:
- ``silver3``: Adaptive-RAG's FLAN-T5-XL silver labels A/B/C (-> zero_hop / one_hop / multi_hop);
- ``silver2``: the binary single-vs-multi silver labels B/C;
- ``dataset``: the hop count of the source data set (HotpotQA/MuSiQue/2Wiki multi_hop, SQuAD/NQ/
  TriviaQA/PopQA one_hop), read with `amsrag.ingest.load_qa`.
The silver files are read by `amsrag.ingest.datasets` (`load_silver3`, `load_silver2`), which also names them.

Every question carries a *hop* label (one_hop / multi_hop: the hop head's target) and, for silver3
rows only, a three-way label (the knowledge head's target and the silver evaluation).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from amsrag.errors import InputError
from amsrag.ingest.datasets import (
    DATASET_DIRS,
    SILVER2_FILE,
    SILVER3_FILE,
    LabelledQuestion,
    Split,
    hop_of_dataset,
    load_silver2,
    load_silver3,
    normalise_question,
)
from amsrag.learn.common import seeded_rank
from amsrag.types import Complexity

# ---------------------------------------------------------------- dataset-derived labels


def dataset_files(data_dir: Path) -> list[Path]:
    files = []
    for sub in DATASET_DIRS:
        folder = data_dir / sub
        if folder.is_dir():
            files += [p for p in sorted(folder.iterdir()) if p.is_file() and "corpus" not in p.name]
    return files


def load_dataset_rows(data_dir: Path) -> list[LabelledQuestion]:
    """Dataset-derived hop labels of every QA file under the data folders (first occurrence of a question wins)."""
    from amsrag.ingest import load_qa

    rows: list[LabelledQuestion] = []
    for path in dataset_files(data_dir):
        for q in load_qa(path).questions:
            hop = hop_of_dataset(q.dataset)
            if hop is not None and q.question.strip():
                rows.append(LabelledQuestion(normalise_question(q.question), q.question.strip(), q.dataset,
                                             "dataset", hop))
    return rows


# ---------------------------------------------------------------- merging, capping, splitting


def merge(rows: Iterable[LabelledQuestion]) -> list[LabelledQuestion]:
    """One row per normalised question. silver3 beats silver2 beats dataset; within a source the first wins.

    A silver2 row's hop label also overrides a silver3 A row's dataset-derived hop label.
    """
    order = {"silver3": 0, "silver2": 1, "dataset": 2}
    best: dict[str, LabelledQuestion] = {}
    silver2_hop: dict[str, Complexity] = {}
    for row in rows:
        if not row.key:
            continue
        if row.source == "silver2":
            silver2_hop.setdefault(row.key, row.hop)
        seen = best.get(row.key)
        if seen is None or order[row.source] < order[seen.source]:
            # keep the data set of the first source that named one
            dataset = row.dataset or (seen.dataset if seen else "")
            best[row.key] = replace(row, dataset=dataset)
        elif not seen.dataset and row.dataset:
            best[row.key] = replace(seen, dataset=row.dataset)
    out = []
    for key, row in best.items():
        if row.source == "silver3" and row.three == "zero_hop" and key in silver2_hop:
            row = replace(row, hop=silver2_hop[key])
        out.append(row)
    return out


def cap_dataset_rows(rows: Sequence[LabelledQuestion], cap: int | None, seed: int) -> list[LabelledQuestion]:
    """At most `cap` dataset-derived rows per data set (a seeded hash order picks them); silver rows all stay."""
    if cap is None:
        return list(rows)
    by_dataset: dict[str, list[LabelledQuestion]] = defaultdict(list)
    kept: list[LabelledQuestion] = []
    for row in rows:
        (by_dataset[row.dataset] if row.source == "dataset" else kept).append(row)
    for dataset in sorted(by_dataset):
        group = sorted(by_dataset[dataset], key=lambda r: seeded_rank(seed, r.key))
        kept += group[:cap]
    return kept


def stratified_split(
    rows: Sequence[LabelledQuestion], seed: int, fractions: tuple[float, float] = (0.1, 0.1)
) -> list[LabelledQuestion]:
    """80/10/10 (by default) within each stratum (source, data set, hop, three-way label); rows sorted by key."""
    strata: dict[tuple[str, str, str, str], list[LabelledQuestion]] = defaultdict(list)
    for row in rows:
        strata[(row.source, row.dataset, row.hop, row.three or "")].append(row)
    out: list[LabelledQuestion] = []
    for stratum in sorted(strata):
        group = sorted(strata[stratum], key=lambda r: seeded_rank(seed, r.key))
        n = len(group)
        n_cal, n_test = round(n * fractions[0]), round(n * fractions[1])
        for i, row in enumerate(group):
            split: Split = "cal" if i < n_cal else "test" if i < n_cal + n_test else "train"
            out.append(replace(row, split=split))
    return sorted(out, key=lambda r: r.key)


@dataclass(frozen=True, slots=True)
class LabelledData:
    rows: list[LabelledQuestion]
    sha256: str
    data_dir: str

    def split(self, name: Split) -> list[LabelledQuestion]:
        return [r for r in self.rows if r.split == name]

    def counts(self) -> dict[str, dict[str, int]]:
        """Class counts per split and label kind, and per split and source data set."""
        out: dict[str, Counter[str]] = {}
        for row in self.rows:
            hop_key = f"{row.split}/hop"
            out.setdefault(hop_key, Counter())[row.hop] += 1
            if row.three:
                out.setdefault(f"{row.split}/silver3", Counter())[row.three] += 1
            out.setdefault(f"{row.split}/dataset", Counter())[f"{row.dataset}:{row.source}"] += 1
        return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def data_hash(rows: Sequence[LabelledQuestion], cap: int | None, seed: int) -> str:
    h = hashlib.sha256(f"cap={cap}\x1fseed={seed}\n".encode())
    for r in rows:
        h.update("\x1f".join([r.key, r.question, r.dataset, r.source, r.hop, r.three or "", r.split]).encode())
        h.update(b"\n")
    return h.hexdigest()


def build_labelled_data(data_dir: Path, cap: int | None = 5000, seed: int = 13,
                        silver: Sequence[Path] | None = None) -> LabelledData:
    """Everything above, end to end: the labelled, deduplicated, capped and split rows, and their hash.

    `silver`: three-way silver files of another generator (`amsrag classifier label`) replacing the
    shipped FLAN-T5-XL ones — the knowledge head is generator-specific."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: data folder not found (pass --data or set AMSRAG_DATA)")
    silver3 = ([row for path in silver for row in load_silver3(Path(path))] if silver
               else load_silver3(data_dir / SILVER3_FILE))
    silver2 = load_silver2(data_dir / SILVER2_FILE)
    merged = merge([*silver3, *silver2, *load_dataset_rows(data_dir)])
    rows = stratified_split(cap_dataset_rows(merged, cap, seed), seed)
    return LabelledData(rows=rows, sha256=data_hash(rows, cap, seed), data_dir=str(data_dir))
