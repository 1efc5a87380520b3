"""Labelled questions for the complexity classifier: hop labels from structure, dedup, held-out exclusion, splits.

- The hop label (one_hop / multi_hop: the hop head's target) is the question's structure: the hop count of
  its data set (HotpotQA/MuSiQue/2Wiki multi_hop, SQuAD/NQ/TriviaQA/PopQA one_hop), read with
  `amsrag.ingest.load_qa` from every QA file of the data folders. Silver labels never override it: they say
  what one generator happened to answer with one retrieval, not how many passages the question needs.
- The three-way label (zero_hop / one_hop / multi_hop: the knowledge head's target) exists only where a
  generator labelled the question (`amsrag train classifier label` -> `train classifier train --silver FILE`): zero_hop
  belongs to the generator that answers closed-book, so without silver files there is no knowledge head.
- Implicit multi-step questions (StrategyQA: "Could a llama give birth twice during the Vietnam War?") are
  multi_hop rows when `implicit` is on (`load_implicit_rows`): no QA data set above phrases a question that
  way, and without them the head sent a third of such questions down the one-hop path with alpha >= 0.9.
  Only the StrategyQA questions the decomposer trains on are read, so the router benchmark's StrategyQA list and
  its threshold sweep (`benchmarks/router_plan.py`: the decomposer's test split and calibration rows) stay
  unseen by both models.
- Questions no trained model may see are left out: every evaluated benchmark question, the demo's, and the
  source questions of the stress set (`stress.SOURCE_FILES`; it is templated from their decompositions).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from amsrag.errors import InputError
from amsrag.ingest.datasets import DATASET_DIRS, LabelledQuestion, Split, hop_of_dataset, load_silver3
from amsrag.learn.common import seeded_rank
from amsrag.text.normalise import normalise_question

# ---------------------------------------------------------------- dataset-derived labels


def dataset_files(data_dir: Path) -> list[Path]:
    files = []
    for sub in DATASET_DIRS:
        folder = data_dir / sub
        if folder.is_dir():
            files += [p for p in sorted(folder.iterdir()) if p.is_file() and "corpus" not in p.name]
    return files


def load_dataset_rows(data_dir: Path, files: Sequence[Path] | None = None) -> list[LabelledQuestion]:
    """Dataset-derived hop labels of every QA file under the data folders (or of `files`)."""
    from amsrag.ingest import load_qa

    rows: list[LabelledQuestion] = []
    for path in dataset_files(data_dir) if files is None else files:
        for q in load_qa(path).questions:
            hop = hop_of_dataset(q.dataset)
            if hop is not None and q.question.strip():
                rows.append(LabelledQuestion(normalise_question(q.question), q.question.strip(), q.dataset,
                                             "dataset", hop))
    return rows


IMPLICIT_DATASET = "strategyqa"


def load_implicit_rows(data_dir: Path) -> list[LabelledQuestion]:
    """multi_hop rows of StrategyQA's questions that the decomposer trains on (its train split less its
    calibration rows, on which the router's thresholds are swept); none when the file is absent."""
    from amsrag.learn.decomposer.data import STRATEGYQA_FILE, load_strategyqa, split_of

    path = data_dir / STRATEGYQA_FILE
    if not path.is_file():
        return []
    return [LabelledQuestion(normalise_question(ex.question), ex.question.strip(), IMPLICIT_DATASET, "dataset",
                             "multi_hop")
            for ex in load_strategyqa(path) if ex.question.strip() and split_of(ex.question) == "train"
            and split_of("cal:" + ex.question, 0.15) == "train"]


def held_out_keys(data_dir: Path) -> set[str]:
    """Normalised questions the classifier must not train on: evaluated benchmarks, the demo, stress sources."""
    from amsrag.evaluate.builder import evaluated_questions, held_out_questions
    from amsrag.learn.classifier.stress import SOURCE_FILES

    keys = evaluated_questions(data_dir) | {normalise_question(q) for q in held_out_questions(data_dir)}
    sources = [data_dir / f for f in SOURCE_FILES if (data_dir / f).is_file()]
    keys |= {r.key for r in load_dataset_rows(data_dir, sources)}
    return keys


# ---------------------------------------------------------------- merging, capping, splitting


def merge(rows: Iterable[LabelledQuestion]) -> list[LabelledQuestion]:
    """One row per normalised question; the first data set to name it keeps it. A silver row adds its
    three-way label to the question's dataset row (whose hop stays), or stands alone where no data set has
    the question (its hop then from the silver file's `hop`, else its data set)."""
    dataset_rows: dict[str, LabelledQuestion] = {}
    silver_rows: dict[str, LabelledQuestion] = {}
    for row in rows:
        if not row.key:
            continue
        target = silver_rows if row.source == "silver3" else dataset_rows
        target.setdefault(row.key, row)
    out = dict(dataset_rows)
    for key, row in silver_rows.items():
        seen = out.get(key)
        out[key] = row if seen is None else replace(seen, three=row.three, source="silver3")
    return [out[k] for k in sorted(out)]


def cap_rows(rows: Sequence[LabelledQuestion], cap: int | None, seed: int) -> list[LabelledQuestion]:
    """At most `cap` rows per data set without a three-way label (a seeded hash order picks them)."""
    if cap is None:
        return list(rows)
    by_dataset: dict[str, list[LabelledQuestion]] = defaultdict(list)
    kept: list[LabelledQuestion] = []
    for row in rows:
        (by_dataset[row.dataset] if row.three is None else kept).append(row)
    for dataset in sorted(by_dataset):
        group = sorted(by_dataset[dataset], key=lambda r: seeded_rank(seed, r.key))
        kept += group[:cap]
    return kept


def stratified_split(
    rows: Sequence[LabelledQuestion], seed: int, fractions: tuple[float, float] = (0.1, 0.1)
) -> list[LabelledQuestion]:
    """80/10/10 (by default) within each stratum (data set, hop, three-way label); rows sorted by key."""
    strata: dict[tuple[str, str, str], list[LabelledQuestion]] = defaultdict(list)
    for row in rows:
        strata[(row.dataset, row.hop, row.three or "")].append(row)
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
    held_out: int = 0  # questions left out as evaluated / demo / stress-source questions
    silver_files: tuple[str, ...] = ()

    def split(self, name: Split) -> list[LabelledQuestion]:
        return [r for r in self.rows if r.split == name]

    @property
    def datasets(self) -> list[str]:
        return sorted({r.dataset for r in self.rows})

    def counts(self) -> dict[str, dict[str, int]]:
        """Class counts per split and label kind, and per split and source data set."""
        out: dict[str, Counter[str]] = {}
        for row in self.rows:
            out.setdefault(f"{row.split}/hop", Counter())[row.hop] += 1
            if row.three:
                out.setdefault(f"{row.split}/silver3", Counter())[row.three] += 1
            out.setdefault(f"{row.split}/dataset", Counter())[row.dataset] += 1
        return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def data_hash(rows: Sequence[LabelledQuestion], cap: int | None, seed: int) -> str:
    h = hashlib.sha256(f"cap={cap}\x1fseed={seed}\n".encode())
    for r in rows:
        h.update("\x1f".join([r.key, r.question, r.dataset, r.source, r.hop, r.three or "", r.split]).encode())
        h.update(b"\n")
    return h.hexdigest()


def build_labelled_data(data_dir: Path, cap: int | None = None, seed: int = 13,
                        silver: Sequence[Path] | None = None, implicit: bool = False) -> LabelledData:
    """Everything above, end to end: the labelled, deduplicated, held-out-free, split rows, and their hash.

    `silver`: three-way labels made with the configured generator (`amsrag train classifier label`): the knowledge
    head is trained from them, and only from them. `implicit`: StrategyQA's rows too (`load_implicit_rows`)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: data folder not found (pass --data or set AMSRAG_DATA)")
    silver_rows = [row for path in silver or () for row in load_silver3(Path(path))]
    implicit_rows = load_implicit_rows(data_dir) if implicit else []
    merged = merge([*load_dataset_rows(data_dir), *implicit_rows, *silver_rows])
    held_out = held_out_keys(data_dir)
    kept = [r for r in merged if r.key not in held_out]
    rows = stratified_split(cap_rows(kept, cap, seed), seed)
    return LabelledData(rows=rows, sha256=data_hash(rows, cap, seed), data_dir=str(data_dir),
                        held_out=len(merged) - len(kept), silver_files=tuple(str(p) for p in silver or ()))
