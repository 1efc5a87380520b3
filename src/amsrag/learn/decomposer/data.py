"""Training rows for the decomposer, from the public decompositions in ../shared/data.

Every row is a real question with its plan type and, where the source's decomposition gives them, the
character spans of the compared entities and of the inner (bridge) description, and the sub-question
templates a comparison asks per entity. Spans are found by aligning the source's sub-questions with the
question, never written by hand:
- 2WikiMultihopQA (train, with `qa_pairs` and evidence triples): comparison / bridge_comparison ->
  comparison (entities = the triples' subjects, templates = the sub-questions with the entity as `{E}`),
  compositional / inference -> bridge (inner span = the first sub-question aligned with the question);
- MuSiQue (`question_decomposition`): bridge, inner span from the first step;
- Break QDMR high-level on HotpotQA: comparison (a `comparison` step, or three `boolean` steps: "both"),
  intersection (an `intersection` step), bridge (two or more other steps), single (one `select`);
  comparison entities are what the first two steps' texts do not share;
- StrategyQA: implicit;
- single-hop question lists (SQuAD, NQ, PopQA, TriviaQA): single.
Questions of the evaluated benchmarks and the demo are left out (`excluded`).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from amsrag.decompose.plan import PlanKind
from amsrag.text.normalise import normalise_question

TWOWIKI_FILE = "2wikimultihopqa/migres_2wiki_train_500_decomp.json"
MUSIQUE_DECOMP_FILES = ("musique/migres_musique_200.jsonl", "musique/hipporag_musique_train_100.json")
BREAK_FILE = "break/break_qdmr_high_level_dev.csv"
STRATEGYQA_FILE = "strategyqa/aos_strategyqa_train.json"
SINGLE_FILES = {"squad": "question_lists/honesty_squad_dev.jsonl", "nq": "question_lists/honesty_nq_test.jsonl",
                "popqa": "question_lists/honesty_popqa_test.jsonl",
                "triviaqa": "triviaqa/flashrag_triviaqa_test_sub1000.jsonl"}
SINGLE_PER_FILE = 450
_STOP_WORDS = """a an the of in on at to for by with from and or is are was were be been do does did what which who
whom whose where when why how that this these those it its as into than then there their his her he she they return
if #1 #2 #3 >> s"""
STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[\w']+|#\d")


@dataclass(slots=True)
class Example:
    question: str
    kind: PlanKind
    dataset: str
    entities: list[tuple[int, int]] = field(default_factory=list)  # char spans of compared entities
    inner: tuple[int, int] | None = None  # char span of the bridge's inner description
    templates: tuple[str, ...] = ()  # comparison: per-entity sub-question templates with {E}, in order

    @property
    def masked(self) -> str:
        """The question with its entities replaced by X, Y, ... (what template look-up compares)."""
        out, last = [], 0
        for i, (a, b) in enumerate(sorted(self.entities)):
            out += [self.question[last:a], "XYZW"[i % 4]]
            last = b
        return "".join([*out, self.question[last:]])


def words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]


def align_span(question: str, sub: str) -> tuple[int, int] | None:
    """The shortest span of `question` covering the most content words of `sub` (at least two, or one of a
    one-word sub-question), widened left over a relative pronoun and the noun phrase it hangs on."""
    qw = words(question)
    content = {w for w, _, _ in words(sub) if w not in STOP}
    if not content or not qw:
        return None
    hits = [i for i, (w, _, _) in enumerate(qw) if w in content]
    if not hits or (len(hits) < 2 and len(content) > 1):
        return None
    best: tuple[int, int, int] | None = None  # (-covered, length, start)
    for i in hits:
        seen: set[str] = set()
        for j in hits:
            if j < i:
                continue
            seen.add(qw[j][0])
            cand = (-len(seen), j - i, i)
            if best is None or cand < best:
                best = cand
    if best is None or -best[0] < max(1, min(2, len(content)) if len(content) > 1 else 1):
        return None
    start, end = best[2], best[2] + best[1]
    back = start
    for k in range(start - 1, max(-1, start - 6), -1):  # "the actress who" / "the" before the window
        w = qw[k][0]
        if w in ("the", "a", "an"):
            back = k
            break
        if w in ("of", "in", "on", "at", "by", "for", "is", "was", "are", "were", "did", "does", "do", ","):
            break
    return qw[back][1], qw[end][2]


def find_entity(question: str, name: str, widen: bool = False) -> tuple[int, int] | None:
    """Where `name` (or its form without a parenthesised qualifier) is written in the question; `widen`:
    extended over the capitalised words around it ("Northwestern" -> "Northwestern University")."""
    low = question.lower()
    for cand in (name, re.sub(r"\s*\(.*?\)\s*", " ", name).strip()):
        cand = cand.strip().lower()
        if len(cand) >= 2:
            at = low.find(cand)
            if at >= 0:
                return widen_capitalised(question, at, at + len(cand)) if widen else (at, at + len(cand))
    return None


def widen_capitalised(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]` extended to whole words and over adjacent capitalised words."""
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "'-"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] in "'-"):
        end += 1
    while True:
        m = re.search(r"([A-Z][\w'-]*)\s+$", text[:start])
        if m is None or m.group(1).lower() in STOP:
            break
        start = m.start(1)
    while True:
        m = re.match(r"\s+([A-Z0-9][\w'-]*)", text[end:])
        if m is None or m.group(1).lower() in STOP:
            break
        end += m.end(1)
    return start, end


def _template(sub: str, entity: str) -> str | None:
    span = find_entity(sub, entity)
    if span is None:
        return None
    return f"{sub[:span[0]]}{{E}}{sub[span[1]:]}".strip()


def load_2wiki(path: Path) -> list[Example]:
    out = []
    for row in json.loads(path.read_text(encoding="utf-8")):
        q, kind, ev, pairs = row["question"], row["type"], row["evidences"], row.get("qa_pairs") or []
        subs = [p["question"] for p in pairs]
        if kind in ("comparison", "bridge_comparison"):
            names = [e[0] for e in ev[:2]]
            spans = [find_entity(q, n) for n in names]
            templates: tuple[str, ...] = ()
            if kind == "comparison" and subs:
                t = _template(subs[0], names[0])
                templates = (t,) if t else ()
            elif len(subs) >= 3 and len(ev) >= 3:
                t1, t2 = _template(subs[0], names[0]), _template(subs[2], ev[2][0])
                templates = (t1, t2) if t1 and t2 else ()
            out.append(Example(q, "comparison", "2wikimultihopqa", [s for s in spans if s is not None],
                               templates=templates))
        else:
            inner = align_span(q, subs[0]) if subs else None
            out.append(Example(q, "bridge", "2wikimultihopqa", inner=inner))
    return out


def load_musique(paths: Iterable[Path]) -> list[Example]:
    out = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        rows = json.loads(text) if path.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x]
        for row in rows:
            steps = row.get("question_decomposition") or []
            first = steps[0]["question"].replace(">>", " ") if steps else ""
            out.append(Example(row["question"], "bridge", "musique", inner=align_span(row["question"], first)))
    return out


def _break_steps(decomposition: str) -> list[str]:
    return [re.sub(r"^\s*return\s+", "", s).strip() for s in decomposition.split(";") if s.strip()]


def load_break_hotpot(path: Path) -> list[Example]:
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if not row["question_id"].startswith("HOTPOT"):
                continue
            q = row["question_text"].strip()
            ops = json.loads(row["operators"].replace("'", '"'))
            steps = _break_steps(row["decomposition"])
            if "comparison" in ops or ops == ["boolean", "boolean", "boolean"]:
                ents = _break_entities(q, steps[0], steps[1]) if len(steps) >= 2 else []
                out.append(Example(q, "comparison", "hotpotqa", ents))
            elif "intersection" in ops:
                out.append(Example(q, "intersection", "hotpotqa"))
            elif len(steps) >= 2:
                out.append(Example(q, "bridge", "hotpotqa", inner=align_span(q, steps[0])))
            else:
                out.append(Example(q, "single", "hotpotqa"))
    return out


def _break_entities(question: str, first: str, second: str) -> list[tuple[int, int]]:
    """The compared entities: the runs of words where the first two comparison steps differ."""
    a, b = words(first), words(second)
    bw = {w for w, _, _ in b}
    aw = {w for w, _, _ in a}
    spans = []
    for seq, other, text in ((a, bw, first), (b, aw, second)):
        run = [t for t in seq if t[0] not in other]
        if not run:
            continue
        name = text[run[0][1]:run[-1][2]]
        span = find_entity(question, name, widen=True)
        if span is not None:
            spans.append(span)
    return spans


def load_strategyqa(path: Path) -> list[Example]:
    return [Example(row["question"], "implicit", "strategyqa") for row in json.loads(path.read_text(encoding="utf-8"))]


def load_single(data_dir: Path, seed: int = 13) -> list[Example]:
    out = []
    for name, rel in SINGLE_FILES.items():
        path = data_dir / rel
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rng = random.Random(f"{seed}:{name}")
        rng.shuffle(rows)
        out += [Example(str(r["question"]), "single", name) for r in rows[:SINGLE_PER_FILE]]
    return out


def split_of(question: str, test_share: float = 0.3) -> str:
    """A stable split by the question's hash: `train` or `test`."""
    h = int(hashlib.sha256(normalise_question(question).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if h < test_share else "train"


def load_all(data_dir: Path, excluded: set[str]) -> list[Example]:
    """Every source's rows, first copy of a question kept, `excluded` (normalised questions) left out."""
    rows = [*load_2wiki(data_dir / TWOWIKI_FILE), *load_musique(data_dir / f for f in MUSIQUE_DECOMP_FILES),
            *load_break_hotpot(data_dir / BREAK_FILE), *load_strategyqa(data_dir / STRATEGYQA_FILE),
            *load_single(data_dir)]
    seen: set[str] = set()
    out = []
    for ex in rows:
        key = normalise_question(ex.question)
        if not key or key in seen or key in excluded:
            continue
        seen.add(key)
        out.append(ex)
    return out
