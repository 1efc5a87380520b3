"""Training data of the retrieval evaluator: (question, paragraph, relevant?) from ../shared/data.

Each question comes with its own candidate pool, as a retriever would return it:
- HotpotQA (distractor setting): the 2 supporting paragraphs and up to `distractors` of the 8
  distractors (hard negatives picked by bigram TF-IDF when the data set was made);
- MuSiQue: the supporting paragraphs and up to `distractors` of the other 16-18 (hard negatives too);
- NQ-open oracle: the annotated gold paragraph, and as negatives the other NQ gold paragraphs that
  BM25 ranks highest for the question (hard) plus one random Wikipedia passage (easy), none of
  which contains an answer string.
Questions are deduplicated by their normalised text and split by a seeded hash of that text into
train / cal / test, so `split_of` tells any other tool which questions the evaluator trained on.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amsrag.errors import InputError
from amsrag.ingest.dataset_facts import HOTPOT_FILES, MUSIQUE_FILES, NQ_FILE, WIKI_FILE
from amsrag.ingest.readers import iter_records, split_flashrag_contents
from amsrag.ingest.silver_labels import Split
from amsrag.learn.common import seeded_rank
from amsrag.text.normalise import normalise_question
from amsrag.types import content_hash


@dataclass(frozen=True, slots=True)
class Paragraph:
    title: str
    text: str
    gold: bool

    @property
    def key(self) -> str:
        return content_hash(self.title, self.text)


@dataclass(slots=True)
class PoolQuestion:
    """A question with its candidate pool (gold first, then negatives)."""

    key: str  # normalised question
    question: str
    dataset: str
    answers: list[str]
    paragraphs: list[Paragraph] = field(default_factory=list)
    split: Split = "train"
    multi_hop: bool = False


@dataclass(frozen=True, slots=True)
class DataConfig:
    seed: int = 13
    per_dataset: int = 700  # questions per data set (MuSiQue has fewer)
    distractors: int = 6  # negatives kept per HotpotQA / MuSiQue question
    nq_negatives: int = 4  # hard BM25 negatives per NQ question (+ 1 random Wikipedia passage)
    cal_fraction: float = 0.15
    test_fraction: float = 0.15


def split_of(question: str, seed: int = 13, cal_fraction: float = 0.15, test_fraction: float = 0.15) -> Split:
    """The evaluator split of a question (a seeded hash of its normalised text: stable across runs)."""
    u = int(seeded_rank(seed, "split\x1f" + normalise_question(question))[:12], 16) / float(16**12)
    return "cal" if u < cal_fraction else "test" if u < cal_fraction + test_fraction else "train"


def _clean(value: Any) -> str:
    return " ".join(str(value or "").split()).strip() if value is not None else ""


def _para(title: Any, text: Any, gold: bool) -> Paragraph | None:
    # Same stripping as the ingest loaders, so content hashes match the benchmark corpus cache.
    t, x = str(title or "").strip(), str(text or "").strip()
    return Paragraph(t, x, bool(gold)) if x else None


def _answers(*values: Any) -> list[str]:
    out: list[str] = []
    for v in values:
        if isinstance(v, str) and v.strip():
            out.append(v.strip())
        elif isinstance(v, list):
            out += [a.strip() for a in v if isinstance(a, str) and a.strip()]
    return list(dict.fromkeys(out))


def _hotpot(path: Path) -> Iterator[PoolQuestion]:
    for place, rec in iter_records(path):
        if not isinstance(rec, dict):
            raise InputError(f"{place}: expected a JSON object")
        paras: list[Paragraph | None] = []
        if "contexts" in rec:  # IRCoT layout
            question = rec.get("question_text", "")
            answers = _answers(*[o.get("spans", []) for o in rec.get("answers_objects", []) if isinstance(o, dict)])
            paras = [_para(c.get("title"), c.get("paragraph_text"), c.get("is_supporting")) for c in rec["contexts"]]
        else:  # Hugging Face layout
            question, answers = rec.get("question", ""), _answers(rec.get("answer"))
            support = set(rec["supporting_facts"]["title"])
            ctx = rec["context"]
            paras = [_para(t, "".join(s), t in support) for t, s in zip(ctx["title"], ctx["sentences"], strict=True)]
        yield PoolQuestion(normalise_question(question), str(question).strip(), "hotpotqa", answers,
                           [p for p in paras if p], multi_hop=True)


def _musique(path: Path) -> Iterator[PoolQuestion]:
    for place, rec in iter_records(path):
        if not isinstance(rec, dict) or "paragraphs" not in rec:
            raise InputError(f"{place}: expected a MuSiQue record with `paragraphs`")
        paras = [_para(p.get("title"), p.get("paragraph_text"), p.get("is_supporting")) for p in rec["paragraphs"]]
        question = str(rec.get("question", "")).strip()
        yield PoolQuestion(normalise_question(question), question, "musique",
                           _answers(rec.get("answer"), rec.get("answer_aliases")), [p for p in paras if p],
                           multi_hop=True)


def _nq(path: Path) -> Iterator[PoolQuestion]:
    for place, rec in iter_records(path):
        if not isinstance(rec, dict) or not isinstance(rec.get("ctxs"), list):
            raise InputError(f"{place}: expected an NQ oracle record with `ctxs`")
        gold = [_para(c.get("title"), c.get("text"), True) for c in rec["ctxs"] if c.get("isgold", True)]
        question = str(rec.get("question", "")).strip()
        yield PoolQuestion(normalise_question(question), question, "nq", _answers(rec.get("answers")),
                           [p for p in gold if p])


def _contains_answer(text: str, answers: list[str]) -> bool:
    low = text.lower()
    return any(len(a) > 1 and a.lower() in low for a in answers)


def _subsample(q: PoolQuestion, n_neg: int, seed: int) -> PoolQuestion:
    gold = [p for p in q.paragraphs if p.gold]
    neg = sorted((p for p in q.paragraphs if not p.gold), key=lambda p: seeded_rank(seed, q.key + p.key))
    q.paragraphs = gold + neg[:n_neg]
    return q


def _nq_negatives(questions: list[PoolQuestion], pool: list[Paragraph], wiki: list[Paragraph], config: DataConfig,
                  ) -> None:
    """Hard negatives for NQ: other questions' gold paragraphs ranked by BM25, answer-free."""
    import bm25s

    from amsrag.config import BM25Config
    from amsrag.indexes.bm25 import BM25Tokenizer

    tok = BM25Tokenizer(BM25Config.model_validate({}))
    vocab: dict[str, int] = {}

    def ids(text: str) -> list[int]:
        return [vocab.setdefault(t, len(vocab)) for t in tok(text)]

    docs = [ids(f"{p.title}\n{p.text}") for p in pool]
    bm = bm25s.BM25()
    bm.index((docs, {i: i for i in range(len(vocab))}), show_progress=False)
    rng = random.Random(config.seed)
    for q in questions:
        qids = [vocab[t] for t in tok(q.question) if t in vocab]
        gold_keys = {p.key for p in q.paragraphs}
        negs: list[Paragraph] = []
        if qids:
            scores = bm.get_scores_from_ids(qids)
            for i in scores.argsort()[::-1][: 10 * config.nq_negatives]:
                p = pool[int(i)]
                if p.key in gold_keys or _contains_answer(p.text, q.answers):
                    continue
                negs.append(Paragraph(p.title, p.text, False))
                if len(negs) == config.nq_negatives:
                    break
        easy = wiki[rng.randrange(len(wiki))] if wiki else None
        if easy is not None and not _contains_answer(easy.text, q.answers):
            negs.append(easy)
        q.paragraphs = [p for p in q.paragraphs if p.gold] + negs


def _capped(questions: list[PoolQuestion], n: int, seed: int) -> list[PoolQuestion]:
    ranked = sorted(questions, key=lambda q: seeded_rank(seed, q.key))
    return ranked[:n]


def load_pools(data_dir: Path, config: DataConfig | None = None) -> list[PoolQuestion]:
    """Every question with its candidate pool, deduplicated, capped per data set and split; sorted by key."""
    config = config or DataConfig()
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: data folder not found (pass --data or set AMSRAG_DATA)")
    seen: set[str] = set()
    by_dataset: dict[str, list[PoolQuestion]] = {"hotpotqa": [], "musique": [], "nq": []}
    sources = [(f, _hotpot) for f in HOTPOT_FILES] + [(f, _musique) for f in MUSIQUE_FILES] + [(NQ_FILE, _nq)]
    for rel, reader in sources:
        path = data_dir / rel
        if not path.is_file():
            raise InputError(f"{path}: missing from the data folder (needed to train the evaluator)")
        for q in reader(path):
            if not q.key or q.key in seen or not any(p.gold for p in q.paragraphs):
                continue
            seen.add(q.key)
            by_dataset[q.dataset].append(q)
    nq_all = by_dataset["nq"]
    out: list[PoolQuestion] = []
    for name in ("hotpotqa", "musique"):
        out += [_subsample(q, config.distractors, config.seed) for q in _capped(by_dataset[name], config.per_dataset,
                                                                                  config.seed)]
    nq = _capped(nq_all, config.per_dataset, config.seed)
    pool = list({p.key: p for q in nq_all for p in q.paragraphs}.values())
    wiki_path = data_dir / WIKI_FILE
    wiki: list[Paragraph] = []
    if wiki_path.is_file():
        for _, rec in iter_records(wiki_path):
            title, text = split_flashrag_contents(str(rec.get("contents", "")))
            if text:
                wiki.append(Paragraph(title, text, False))
    _nq_negatives(nq, pool, wiki, config)
    out += nq
    for q in out:
        q.split = split_of(q.question, config.seed, config.cal_fraction, config.test_fraction)
    return sorted(out, key=lambda q: q.key)


def pools_sha256(pools: list[PoolQuestion], config: DataConfig) -> str:
    h = hashlib.sha256(repr(sorted(vars(config).items()) if hasattr(config, "__dict__") else config).encode())
    for q in pools:
        h.update(f"{q.key}\x1f{q.split}\x1f{q.dataset}".encode())
        for p in q.paragraphs:
            h.update(f"\x1e{p.key}\x1f{int(p.gold)}".encode())
        h.update(b"\n")
    return h.hexdigest()
