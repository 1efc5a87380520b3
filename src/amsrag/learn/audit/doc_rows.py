"""Documentation rows of the citation-support audit (issue 37): (question, answer, cited passages,
supported?) from the structure of public documentation sets, in the shape of the QA rows (`learn.audit.data`).

The question / answer items come from `learn.reader.doc_data.doc_items` (defaults, environment variables,
definition items, abbreviations, each with its gold passage and distractor passages of the same set). Per item:
- supported: the gold answer cited to the gold passage (`doc-gold`);
- unsupported: the gold answer cited to one distractor passage (`doc-distractor`); the reader's best span of
  the gold passage that is not the answer (`doc-wrong`); a documentation-shaped near miss cited to the gold
  passage (`doc-near`: another value of the setting's "Possible values" list, its "Type:" line, or another
  item's answer of the same kind that the gold passage states); and the answer of the neighbouring item of
  the same kind in the same file, cited to its own passage (`doc-neighbour`: the reader read the right kind
  of statement under the wrong heading).
Splits are by documentation set (`DocSet.split`), never by row: the sets evaluated by
benchmarks/doc_answers.py (MkDocs, Cargo, Poetry) are in none of them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.audit.features import audit_features
from amsrag.generate.metrics import exact_match, f1_score, normalize_answer
from amsrag.generate.reader_model import SpanReader
from amsrag.learn.reader.data import Item
from amsrag.types import Passage

DOC_KINDS = ("doc-gold", "doc-distractor", "doc-wrong", "doc-near", "doc-neighbour")


@dataclass(frozen=True, slots=True)
class DocSet:
    """One documentation set: its folder under the corpora directory (benchmarks/docs_qa/README.md says how
    to fetch it), the audit split it belongs to, and where it came from."""

    name: str
    folder: str
    split: str  # train | cal
    repo: str
    commit: str
    licence: str


DOC_SETS: tuple[DocSet, ...] = (
    DocSet("rustfmt", "rustfmt", "train", "rust-lang/rustfmt", "1191d91d83f5582766404b4e912d19cd89866d56",
           "MIT or Apache-2.0"),
    DocSet("vitest", "vitest/docs/config", "train", "vitest-dev/vitest", "c3ba16b35847d27fb9f01f38cdcb047c77e121f8",
           "MIT"),
    DocSet("clippy", "clippy/book/src", "train", "rust-lang/rust-clippy", "e57f468d8f079a7b50627a95121fd16fff8e5bfa",
           "MIT or Apache-2.0"),
    DocSet("ruff", "ruff/docs", "train", "astral-sh/ruff", "fca5c7cf2cd2f8338f18b9485f936b8e9f07bd0b", "MIT"),
    DocSet("black", "black/docs", "train", "psf/black", "8947c48ef2077c3a301b03c1e814dc2e3f78436e", "MIT"),
    DocSet("vite", "vite/docs/config", "cal", "vitejs/vite", "a98c8d95d552c6fa98ab66fb810f5b39ad5abf49", "MIT"),
    DocSet("uv", "uv/docs", "cal", "astral-sh/uv", "26a9dd4b2125bc271b47855e1fa0c49af3365db5", "MIT or Apache-2.0"),
)
DOC_SET_NAMES = tuple(s.name for s in DOC_SETS)

_POSSIBLE = re.compile(r"(?im)^[ \t]*(?:[-*+][ \t]+)?possible values?:[ \t]*(?P<v>[^\n]+)")
_TYPE_LINE = re.compile(r"(?m)^[ \t]*(?:[-*+][ \t]+)?Type:[ \t]*(?P<v>[^\n|]+)")
_LIST_SEP = re.compile(r"\s*(?:,|\|| or )\s*")


@dataclass(frozen=True, slots=True)
class DocRow:
    """One row of one item: the answer audited, the passage it is cited to, and its features."""

    kind: str
    label: int
    answer: str
    cited: Passage
    features: Any  # AuditFeatures


@dataclass(slots=True)
class DocRows:
    x: np.ndarray
    y: np.ndarray
    question: np.ndarray  # index into `questions`
    split: np.ndarray
    dataset: np.ndarray
    kind: np.ndarray
    source: np.ndarray
    questions: list[str]
    sets: dict[str, dict[str, Any]]  # per documentation set: provenance, sha256, items, rows


def doc_set(name: str) -> DocSet:
    for s in DOC_SETS:
        if s.name == name:
            return s
    raise ValueError(f"unknown documentation set {name!r}; known: {', '.join(DOC_SET_NAMES)}")


def folder_sha256(folder: Path) -> str:
    """sha256 over every Markdown file under `folder` (its relative path and its own sha256), sorted."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.md")):
        h.update(f"{path.relative_to(folder)}\x1f{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()


def _passage(title: str, text: str, n: int) -> Passage:
    return Passage(f"d{n}", text, title)


def _is_wrong(text: str, answers: Sequence[str], wrong_f1: float) -> bool:
    norm = normalize_answer(text)
    return bool(norm) and norm not in ("yes", "no") and not exact_match(text, list(answers)) \
        and f1_score(text, list(answers)) < wrong_f1


def near_misses(item: Item, same_kind: Sequence[Item], wrong_f1: float) -> list[str]:
    """Documentation-shaped wrong answers the gold passage states: for a default, the other values of its
    "Possible values" line and its "Type:" value; for every kind, the answers of other items of the same kind
    that occur in the gold passage."""
    gold = item.paras[item.answer_para]
    low = f"{gold.title}\n{gold.text}".lower()
    found: list[str] = []
    if item.qtype == "default":
        for m in _POSSIBLE.finditer(gold.text):
            found += [v.strip(" .`") for v in _LIST_SEP.split(m.group("v"))]
        for m in _TYPE_LINE.finditer(gold.text):
            found.append(m.group("v").strip(" .`"))
    for other in same_kind:
        if other.id != item.id and other.answers[0].lower() in low:
            found.append(other.answers[0])
    return list(dict.fromkeys(v for v in found if 0 < len(v.split()) <= 8 and _is_wrong(v, item.answers, wrong_f1)))


def neighbour(item: Item, same_kind_in_file: Sequence[Item], wrong_f1: float) -> Item | None:
    """The nearest other item of the same kind in the same file whose answer is not this item's answer and
    whose gold passage is another one."""
    at = next(i for i, it in enumerate(same_kind_in_file) if it.id == item.id)
    gold_text = item.paras[item.answer_para].text
    order = sorted(range(len(same_kind_in_file)), key=lambda i: (abs(i - at), i))
    for i in order:
        other = same_kind_in_file[i]
        if other.id != item.id and other.paras[other.answer_para].text != gold_text \
                and _is_wrong(other.answers[0], item.answers, wrong_f1):
            return other
    return None


def item_rows(item: Item, items: Sequence[Item], reader: SpanReader, seed: int, candidates: int,
              wrong_f1: float) -> list[DocRow]:
    """The rows of one documentation item (see the module docstring)."""
    from amsrag.learn.common import seeded_rank

    answer = item.answers[0]
    gold = item.paras[item.answer_para]
    cited = [_passage(gold.title, gold.text, 0)]
    q = item.question
    r = reader.answer_support(q, cited, [answer], candidates=candidates)
    out = [DocRow("doc-gold", 1, answer, cited[0], audit_features(q, answer, cited, False, r.answers[0],
                                                                 r.top_prob))]
    wrong = next((c for c in r.candidates if _is_wrong(c.answer, item.answers, wrong_f1)), None)
    if wrong is not None:
        out.append(DocRow("doc-wrong", 0, wrong.answer, cited[0], audit_features(q, wrong.answer, cited, False,
                                                                                 wrong, r.top_prob)))
    distractors = [p for p in item.paras if not p.gold]
    if distractors:
        dis = [_passage(distractors[0].title, distractors[0].text, 1)]
        rd = reader.answer_support(q, dis, [answer])
        out.append(DocRow("doc-distractor", 0, answer, dis[0], audit_features(q, answer, dis, False, rd.answers[0],
                                                                              rd.top_prob)))
    same_kind = [it for it in items if it.qtype == item.qtype]
    near = near_misses(item, [it for it in same_kind if it.group == item.group], wrong_f1)
    if near:
        pick = min(near, key=lambda v: seeded_rank(seed, item.id + "\x1f" + v))
        rn = reader.answer_support(q, cited, [pick])
        out.append(DocRow("doc-near", 0, pick, cited[0], audit_features(q, pick, cited, False, rn.answers[0],
                                                                        rn.top_prob)))
    other = neighbour(item, [it for it in same_kind if it.group == item.group], wrong_f1)
    if other is not None:
        op = other.paras[other.answer_para]
        theirs = [_passage(op.title, op.text, 2)]
        ro = reader.answer_support(q, theirs, [other.answers[0]])
        out.append(DocRow("doc-neighbour", 0, other.answers[0], theirs[0],
                          audit_features(q, other.answers[0], theirs, False, ro.answers[0], ro.top_prob)))
    return out


def build_doc_rows(docs_dir: Path, sets: Sequence[DocSet], reader: SpanReader, seed: int = 13, candidates: int = 5,
                   wrong_f1: float = 0.3, progress: Callable[[int, int], None] | None = None) -> DocRows:
    """The rows of the documentation `sets` (folders under `docs_dir`), with their provenance."""
    from amsrag.learn.reader.doc_data import doc_items, doc_passages

    xs, ys, qi, splits, dsets, kinds, sources = [], [], [], [], [], [], []
    questions: list[str] = []
    provenance: dict[str, dict[str, Any]] = {}
    for ds in sets:
        name = ds.name
        folder = Path(docs_dir) / ds.folder
        if not folder.is_dir():
            raise FileNotFoundError(f"documentation set {name!r} not found at {folder} "
                                    "(benchmarks/docs_qa/README.md says how to fetch it)")
        items = doc_items(doc_passages(folder, name), name, seed)
        n_rows = 0
        for n, item in enumerate(items):
            for row in item_rows(item, items, reader, seed, candidates, wrong_f1):
                xs.append(row.features.values)
                ys.append(row.label)
                qi.append(len(questions))
                splits.append(ds.split)
                dsets.append(f"docs:{name}")
                kinds.append(row.kind)
                sources.append(row.features.source)
                n_rows += 1
            questions.append(item.question)
            if progress is not None:
                progress(n + 1, len(items))
        provenance[name] = {"repo": ds.repo, "commit": ds.commit, "licence": ds.licence, "folder": ds.folder,
                      "split": ds.split, "sha256": folder_sha256(folder), "items": len(items), "rows": n_rows}
    width = len(xs[0]) if xs else 0
    return DocRows(np.vstack(xs) if xs else np.zeros((0, width)), np.array(ys, dtype=np.int64),
                   np.array(qi, dtype=np.int64), np.array(splits), np.array(dsets), np.array(kinds),
                   np.array(sources), questions, provenance)
