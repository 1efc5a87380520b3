"""Labelled questions for the complexity classifier: loading, merging, dedup, stratified splits.

Three label sources, in order of precedence for a question met in several:
- ``silver3``: Adaptive-RAG's FLAN-T5-XL silver labels A/B/C (-> zero_hop / one_hop / multi_hop);
- ``silver2``: the binary single-vs-multi silver labels B/C;
- ``dataset``: the hop count of the source data set (HotpotQA/MuSiQue/2Wiki multi_hop, SQuAD/NQ/
  TriviaQA/PopQA one_hop), read with `amsrag.ingest.load_qa`.

Every question carries a *hop* label (one_hop / multi_hop: the hop head's target) and, for silver3
rows only, a three-way label (the knowledge head's target and the silver evaluation).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from amsrag.errors import InputError
from amsrag.types import Complexity

Split = Literal["train", "cal", "test"]
LabelSource = Literal["silver3", "silver2", "dataset"]
SPLITS: tuple[Split, ...] = ("train", "cal", "test")

SILVER3_FILE = "complexity_labels/adaptiverag_flan_t5_xl_silver_train_reconstructed.jsonl"
SILVER2_FILE = "complexity_labels/adaptiverag_flan_t5_xl_binary_silver_single_vs_multi_3268.csv"
# Dataset-derived labels: every QA file of these folders (corpora excluded). RetrievalQA is left out:
# its questions come from mixed sources whose hop count is unknown.
DATASET_DIRS: tuple[str, ...] = (
    "hotpotqa", "musique", "2wikimultihopqa", "nq", "squad", "triviaqa", "popqa", "question_lists",
)
MULTI_HOP = ("hotpotqa", "musique", "2wikimultihopqa")
ONE_HOP = ("nq", "squad", "triviaqa", "popqa")
SILVER_LETTERS: dict[str, Complexity] = {"A": "zero_hop", "B": "one_hop", "C": "multi_hop"}
_SILVER_DATASETS = {"trivia": "triviaqa", "triviaqa": "triviaqa", "nq": "nq", "squad": "squad",
                    "hotpotqa": "hotpotqa", "musique": "musique", "2wikimultihopqa": "2wikimultihopqa"}
_PUNCT = re.compile(r"[^\w\s]")
_HOP_ID = re.compile(r"^\d+hop")
_HEX = re.compile(r"^[0-9a-f]+$")


def default_data_dir() -> Path:
    """`$AMSRAG_DATA`, else ``../shared/data`` relative to the working directory."""
    env = os.environ.get("AMSRAG_DATA")
    return Path(env) if env else Path("..") / "shared" / "data"


def normalise_question(text: str) -> str:
    """The dedup key: NFKC, lower case, punctuation dropped, white space collapsed."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(_PUNCT.sub(" ", text).split())


def hop_of_dataset(dataset: str) -> Complexity | None:
    if dataset in MULTI_HOP:
        return "multi_hop"
    if dataset in ONE_HOP:
        return "one_hop"
    return None


@dataclass(frozen=True, slots=True)
class LabelledQuestion:
    key: str  # normalised question
    question: str
    dataset: str
    source: LabelSource
    hop: Complexity  # one_hop | multi_hop
    three: Complexity | None = None  # silver3 rows only
    split: Split = "train"

    @property
    def dataset_hop(self) -> Complexity | None:
        return hop_of_dataset(self.dataset)


# ---------------------------------------------------------------- label files


def _bad(path: Path, line: int, message: str) -> InputError:
    return InputError(f"{path}:{line}: {message}")


def _read(path: Path) -> str:
    if not path.is_file():
        raise InputError(f"{path}: label file not found")
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc})") from None


def load_silver3(path: Path) -> list[LabelledQuestion]:
    """The A/B/C silver JSONL: ``{question, answer: A|B|C, dataset_name, ...}`` per line."""
    rows: list[LabelledQuestion] = []
    for n, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(path, n, f"not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise _bad(path, n, f"expected a JSON object, got {type(rec).__name__}")
        question, letter = rec.get("question"), rec.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise _bad(path, n, "`question` must be a non-empty string")
        if letter not in SILVER_LETTERS:
            raise _bad(path, n, f"`answer` must be one of A, B, C, got {letter!r}")
        name = str(rec.get("dataset_name", "")).strip()
        dataset = _SILVER_DATASETS.get(name.lower())
        given_hop = rec.get("hop")  # `amsrag classifier label` writes it: other data sets need it
        if given_hop is not None and given_hop not in ("one_hop", "multi_hop"):
            raise _bad(path, n, f"`hop` must be one_hop or multi_hop, got {given_hop!r}")
        if dataset is None:
            if given_hop is None or not name:
                raise _bad(path, n, f"unknown `dataset_name` {rec.get('dataset_name')!r} and no `hop` "
                                    "(one_hop|multi_hop) to take the hop structure from")
            dataset = name.lower()
        three = SILVER_LETTERS[letter]
        hop = three if three != "zero_hop" else (given_hop or hop_of_dataset(dataset))
        assert hop is not None
        rows.append(LabelledQuestion(normalise_question(question), question.strip(), dataset, "silver3", hop, three))
    return rows


def _binary_dataset(row_id: str) -> str:
    if row_id.startswith("single_"):
        return _SILVER_DATASETS.get(row_id.split("_")[1], "")
    if _HOP_ID.match(row_id):
        return "musique"
    if _HEX.match(row_id):
        return "hotpotqa" if len(row_id) == 24 else "2wikimultihopqa"
    return ""


def load_silver2(path: Path) -> list[LabelledQuestion]:
    """The binary B/C silver CSV: columns include ``label`` and ``question`` (``id`` names the source)."""
    text = _read(path)
    reader = csv.DictReader(io.StringIO(text))
    fields = set(reader.fieldnames or [])
    if not {"label", "question"} <= fields:
        raise _bad(path, 1, f"header must name `label` and `question` columns, got {sorted(fields)}")
    rows: list[LabelledQuestion] = []
    try:
        for rec in reader:
            n = reader.line_num
            if None in rec or any(v is None for v in rec.values()):
                raise _bad(path, n, f"expected {len(fields)} columns")
            question, letter = rec["question"].strip(), rec["label"].strip()
            if not question:
                raise _bad(path, n, "empty `question`")
            if letter not in ("B", "C"):
                raise _bad(path, n, f"`label` must be B or C, got {letter!r}")
            dataset = _binary_dataset(rec.get("id", "") or "")
            hop = SILVER_LETTERS[letter]
            rows.append(LabelledQuestion(normalise_question(question), question, dataset, "silver2", hop))
    except csv.Error as exc:
        raise _bad(path, reader.line_num, f"malformed CSV ({exc})") from None
    return rows


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


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{key}".encode()).hexdigest()


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
    kept = []
    for row in rows:
        (by_dataset[row.dataset] if row.source == "dataset" else kept).append(row)
    for dataset in sorted(by_dataset):
        group = sorted(by_dataset[dataset], key=lambda r: _rank(seed, r.key))
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
        group = sorted(strata[stratum], key=lambda r: _rank(seed, r.key))
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
        out: dict[str, dict[str, int]] = {}
        for row in self.rows:
            hop_key = f"{row.split}/hop"
            out.setdefault(hop_key, Counter())[row.hop] += 1  # type: ignore[index]
            if row.three:
                out.setdefault(f"{row.split}/silver3", Counter())[row.three] += 1  # type: ignore[index]
            out.setdefault(f"{row.split}/dataset", Counter())[f"{row.dataset}:{row.source}"] += 1  # type: ignore[index]
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
