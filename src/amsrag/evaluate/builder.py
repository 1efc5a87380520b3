"""The evaluation benchmark: one corpus and one query set, built once and cached so every system sees
identical inputs (DESIGN §7).

- Questions come from QA files of any `../shared/data` format (auto-detected) or amsrag's QA JSONL;
  without `--qa`, a default mix resembling the paper's: single-hop NQ / SQuAD, multi-hop HotpotQA /
  MuSiQue, and zero-hop questions from the Adaptive-RAG silver labels (their answers looked up in the
  question lists).
- The corpus is every paragraph of the QA files the questions are drawn from (the selected questions'
  own paragraphs plus those of the other questions, which act as in-domain distractors), plus `noise`
  Wikipedia passages, deduplicated by content; or, with `corpus`, exactly the passages of that file, each
  question's gold passages matched to it by title + text.
- Complexity: given in the QA JSONL, else the silver three-way label when the question has one, else the
  data set's hop count.
- Calibration questions: up to `CALIBRATION_PER_GROUP` more per group, disjoint from the eval queries,
  written as `calibration.jsonl` (amsrag QA JSONL) for `train route tune` / `amsrag eval --tune`.
- Cached under a content key (the options and the bytes of every input file) in the eval cache folder:
  `benchmark.json`, `passages.jsonl`, `queries.jsonl`, `calibration.jsonl` and, once built, `index/`.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amsrag.config import cache_root
from amsrag.errors import InputError
from amsrag.ingest.dataset_facts import (
    ANSWER_FILES,
    EVAL_FILES,
    SILVER3_FILE,
    WIKI_FILE,
    default_data_dir,
    hop_of_dataset,
)
from amsrag.ingest.silver_labels import load_silver3
from amsrag.text.normalise import normalise_question
from amsrag.types import Passage, QAExample

BENCH_FORMAT = 1
DEFAULT_SIZES: dict[str, int] = {"nq": 250, "squad": 150, "hotpotqa": 250, "musique": 200, "zero_hop": 150}
CALIBRATION_PER_GROUP = 100  # questions per group kept apart (disjoint from the eval queries) for `train route tune`


def default_cache_dir() -> Path:
    """`eval` under `amsrag.config.cache_root()`."""
    return cache_root() / "eval"


def parse_sizes(text: str) -> dict[str, int]:
    """`"nq=250,hotpotqa=200,zero_hop=100"` -> sizes; InputError on anything else."""
    sizes: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.partition("=")
        try:
            n = int(value)
        except ValueError:
            n = -1
        if not name.strip() or n < 0:
            raise InputError(f"--sizes: expected NAME=N with N >= 0 (e.g. nq=250,zero_hop=100), got {part!r}")
        sizes[name.strip()] = n
    return sizes


@dataclass(slots=True)
class EvalQuery:
    id: str
    question: str
    answers: list[str]
    gold: list[str]  # passage ids in the benchmark corpus (empty: no retrieval metrics)
    dataset: str
    complexity: str | None  # zero_hop | one_hop | multi_hop | None (unknown)
    label_source: str = ""  # given | silver | dataset | ""

    @property
    def multi_gold(self) -> bool:
        return len(self.gold) >= 2


@dataclass(slots=True)
class BenchmarkSpec:
    qa: list[Path] = field(default_factory=list)  # empty: the default mix
    fmt: str = "auto"
    corpus: Path | None = None
    noise: int = 1000
    seed: int = 13
    sizes: dict[str, int] | None = None  # per data set (and zero_hop); None: defaults / all of --qa
    scope: str = "files"  # corpus: "files" = every paragraph of the QA files; "gold" = the selected gold only
    corpus_passages: list[Passage] | None = field(default=None, repr=False)  # a prebuilt index's passages
    data_dir: Path = field(default_factory=default_data_dir)

    def key(self) -> str:
        """Content key: the spec and the bytes of every input file."""
        h = hashlib.sha256(f"v{BENCH_FORMAT}|{self.fmt}|{self.noise}|{self.seed}|"
                           f"{json.dumps(self.sizes, sort_keys=True)}|{bool(self.qa)}|{self.scope}".encode())
        for path in self.input_files():
            h.update(path.name.encode())
            h.update(_file_sha(path).encode())
        h.update(f"corpus={self.corpus is not None}".encode())
        if self.corpus_passages is not None:
            h.update(b"index:")
            for p in self.corpus_passages:
                h.update(f"{p.id}\x1f{p.content_hash}\n".encode())
        return h.hexdigest()

    def input_files(self) -> list[Path]:
        """Every file the benchmark reads (optional label and answer files only when present)."""
        files = list(self.qa) if self.qa else [self.data_dir / f for fs in EVAL_FILES.values() for f in fs]
        optional = [self.data_dir / SILVER3_FILE] + ([] if self.qa else [self.data_dir / f for f in ANSWER_FILES])
        files += [f for f in optional if f.is_file()]
        if self.noise and self.corpus is None and self.corpus_passages is None:
            files.append(self.data_dir / WIKI_FILE)
        if self.corpus is not None:
            files.append(self.corpus)
        return files


@dataclass(slots=True)
class Benchmark:
    key: str
    passages: list[Passage]
    queries: list[EvalQuery]
    info: dict[str, Any]
    calibration: list[EvalQuery] = field(default_factory=list)  # disjoint from `queries`, for `train route tune`

    def write_calibration(self, directory: Path) -> None:
        """amsrag QA JSONL (gold passages by corpus id): `amsrag train route tune --index ... --qa` reads it."""
        tmp = directory / "calibration.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for q in self.calibration:
                f.write(json.dumps({"id": q.id, "question": q.question, "answers": q.answers,
                                    "gold_passage_ids": q.gold, "dataset": q.dataset, "complexity": q.complexity},
                                   ensure_ascii=False) + "\n")
        tmp.replace(directory / "calibration.jsonl")

    def save(self, directory: Path) -> None:
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with open(tmp / "passages.jsonl", "w", encoding="utf-8") as f:
            for p in self.passages:
                f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
        with open(tmp / "queries.jsonl", "w", encoding="utf-8") as f:
            for q in self.queries:
                f.write(json.dumps(asdict(q), ensure_ascii=False) + "\n")
        (tmp / "benchmark.json").write_text(json.dumps({"key": self.key, "info": self.info}, indent=2))
        self.write_calibration(tmp)
        shutil.rmtree(directory, ignore_errors=True)
        tmp.replace(directory)

    @classmethod
    def load(cls, directory: Path) -> Benchmark:
        meta = json.loads((directory / "benchmark.json").read_text())
        passages = []
        with open(directory / "passages.jsonl", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                passages.append(Passage(id=d["id"], text=d["text"], title=d["title"], doc_id=d["id"]))
        with open(directory / "queries.jsonl", encoding="utf-8") as f:
            queries = [EvalQuery(**json.loads(line)) for line in f]
        calibration = []
        if (directory / "calibration.jsonl").is_file():
            with open(directory / "calibration.jsonl", encoding="utf-8") as f:
                for line in f:
                    d = json.loads(line)
                    calibration.append(EvalQuery(d["id"], d["question"], d["answers"], d["gold_passage_ids"],
                                                 d["dataset"], d["complexity"]))
        return cls(meta["key"], passages, queries, meta["info"], calibration)


def _file_sha(path: Path) -> str:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- assembling


class _Pool:
    """Passages by content hash (first id wins) and questions by normalised text (first wins)."""

    def __init__(self) -> None:
        self.passages: dict[str, Passage] = {}
        self.hash_of_id: dict[str, str] = {}
        self.questions: dict[str, tuple[QAExample, str]] = {}  # key -> (question, file)
        self.given: set[str] = set()  # keys whose complexity the file states (amsrag QA JSONL)

    def add_file(self, path: Path, fmt: str) -> list[str]:
        from amsrag.ingest import detect_format, load_qa

        qa = load_qa(path, fmt)
        own_labels = (fmt if fmt != "auto" else detect_format(path)) == "qa-jsonl"
        for p in qa.passages:
            h = p.content_hash
            self.passages.setdefault(h, p)
            self.hash_of_id.setdefault(p.id, h)
        keys = []
        for q in qa.questions:
            key = normalise_question(q.question)
            if key and key not in self.questions:
                self.questions[key] = (q, str(path))
                keys.append(key)
                if own_labels and q.complexity:
                    self.given.add(key)
        return keys


def _sample(keys: Sequence[str], n: int | None, seed: int, group: str) -> list[str]:
    ordered = sorted(keys)
    if n is None or n >= len(ordered):
        return ordered
    rng = random.Random(f"{seed}:{group}")
    rng.shuffle(ordered)
    return sorted(ordered[:n])


def _silver(data_dir: Path) -> dict[str, str]:
    path = data_dir / SILVER3_FILE
    return {r.key: r.three for r in load_silver3(path) if r.three} if path.is_file() else {}


def _answers_by_key(data_dir: Path, pool: _Pool) -> dict[str, tuple[list[str], str]]:
    from amsrag.ingest import load_qa

    found: dict[str, tuple[list[str], str]] = {k: (q.answers, q.dataset) for k, (q, _) in pool.questions.items()
                                               if q.answers}
    for rel in ANSWER_FILES:
        path = data_dir / rel
        if path.is_file():
            for q in load_qa(path).questions:
                key = normalise_question(q.question)
                if q.answers and key not in found:
                    found[key] = (q.answers, q.dataset)
    return found


def _complexity(q: QAExample, silver: dict[str, str], key: str, given: bool) -> tuple[str | None, str]:
    if given and q.complexity:
        return q.complexity, "given"
    if key in silver:
        return silver[key], "silver"
    hop = hop_of_dataset(q.dataset) or q.complexity
    return (hop, "dataset") if hop else (None, "")


def _noise(spec: BenchmarkSpec) -> list[Passage]:
    if spec.noise <= 0:
        return []
    from amsrag.ingest import load_qa

    path = spec.data_dir / WIKI_FILE
    if not path.is_file():
        raise InputError(f"{path}: the noise corpus is missing (use --noise 0 or set AMSRAG_DATA)")
    passages = load_qa(path).passages
    if spec.noise > len(passages):
        raise InputError(f"--noise {spec.noise}: only {len(passages)} noise passages exist in {path}")
    rng = random.Random(f"{spec.seed}:noise")
    return sorted(rng.sample(passages, spec.noise), key=lambda p: p.id)


def _read_corpus(path: Path) -> list[Passage]:
    from amsrag.ingest import iter_passages

    passages = list(iter_passages([path]))
    if not passages:
        raise InputError(f"{path}: the corpus holds no passages")
    return passages


def build(spec: BenchmarkSpec) -> Benchmark:
    """Assemble the benchmark (no caching; see `load_or_build`)."""
    if spec.noise < 0:
        raise InputError(f"--noise must be >= 0, got {spec.noise}")
    if spec.scope not in ("files", "gold"):
        raise InputError(f"corpus scope must be files or gold, got {spec.scope!r}")
    if not spec.qa and not spec.data_dir.is_dir():
        raise InputError(f"{spec.data_dir}: data folder not found (pass --qa files or set AMSRAG_DATA)")
    pool = _Pool()
    silver = _silver(spec.data_dir)
    groups: dict[str, list[str]] = defaultdict(list)
    files_of_group: dict[str, list[str]] = defaultdict(list)
    if spec.qa:
        for path in spec.qa:
            for key in pool.add_file(path, spec.fmt):
                groups[pool.questions[key][0].dataset or path.stem].append(key)
            files_of_group["qa"].append(str(path))
        sizes = spec.sizes or {}
        unknown = set(sizes) - set(groups)
        if unknown:
            raise InputError(f"--sizes names {sorted(unknown)}, but the questions' data sets are {sorted(groups)}")
    else:
        sizes = {**DEFAULT_SIZES, **(spec.sizes or {})}
        unknown = set(sizes) - set(DEFAULT_SIZES)
        if unknown:
            raise InputError(f"--sizes names {sorted(unknown)}; the default mix has {sorted(DEFAULT_SIZES)}")
        for group, rels in EVAL_FILES.items():
            for rel in rels:
                path = spec.data_dir / rel
                keys = pool.add_file(path, "auto")
                # questions whose silver label is zero_hop form their own group
                groups[group] += [k for k in keys if silver.get(k) != "zero_hop"]
                files_of_group[group].append(rel)

    selected: list[tuple[str, QAExample, str, str]] = []  # (key, question, complexity, source)
    spare: list[tuple[str, QAExample, str, str]] = []  # calibration questions, disjoint from `selected`
    dropped: Counter[str] = Counter()
    for group in sorted(groups):
        usable = []
        for key in groups[group]:
            q = pool.questions[key][0]
            if not q.answers and not q.gold_passage_ids:
                dropped["no answers and no gold passages"] += 1
            elif not spec.qa and not (q.answers and q.gold_passage_ids):
                dropped[f"{group}: no answers or no gold passages"] += 1
            else:
                usable.append(key)
        chosen = _sample(usable, sizes.get(group), spec.seed, group)
        rest = sorted(set(usable) - set(chosen))
        for keys, out in ((chosen, selected), (_sample(rest, CALIBRATION_PER_GROUP, spec.seed, f"cal:{group}"), spare)):
            for key in keys:
                q = pool.questions[key][0]
                c, src = _complexity(q, silver, key, given=key in pool.given)
                out.append((key, q, c or "", src))
    if not spec.qa and sizes.get("zero_hop", 0) > 0:
        answers = _answers_by_key(spec.data_dir, pool)
        taken = {k for k, *_ in selected}
        zero = [k for k, label in silver.items() if label == "zero_hop" and k in answers and k not in taken]
        chosen = _sample(zero, sizes["zero_hop"], spec.seed, "zero_hop")
        rest = _sample(sorted(set(zero) - set(chosen)), CALIBRATION_PER_GROUP, spec.seed, "cal:zero_hop")
        for keys, out in ((chosen, selected), (rest, spare)):
            for key in keys:
                if key in pool.questions:
                    q = pool.questions[key][0]
                else:
                    ans, dataset = answers[key]
                    q = QAExample(id=f"silver-{hashlib.sha256(key.encode()).hexdigest()[:12]}",
                                  question=_original_question(spec.data_dir, key), answers=ans, dataset=dataset)
                out.append((key, q, "zero_hop", "silver"))
        files_of_group["zero_hop"] = [SILVER3_FILE, *ANSWER_FILES]

    noise: list[Passage] = []
    if spec.corpus_passages is not None:
        corpus = list(spec.corpus_passages)
    elif spec.corpus is not None:
        corpus = _read_corpus(spec.corpus)
    elif spec.scope == "gold":
        wanted = {pool.hash_of_id[g] for _, q, *_ in selected for g in q.gold_passage_ids if g in pool.hash_of_id}
        corpus = [p for h, p in pool.passages.items() if h in wanted]
    else:
        corpus = list(pool.passages.values())
    if spec.corpus is None and spec.corpus_passages is None:
        noise = _noise(spec)  # an explicit corpus is used exactly as given
    corpus_ids: dict[str, str] = {}  # content hash -> corpus id
    passages: list[Passage] = []
    for p in [*corpus, *noise]:
        h = p.content_hash
        if h not in corpus_ids:
            corpus_ids[h] = p.id
            passages.append(p)
    if not passages:
        raise InputError("the benchmark corpus is empty: the QA files hold no paragraphs; pass --corpus FILE")
    ids = {p.id for p in passages}
    if len(ids) != len(passages):
        raise InputError("the corpus repeats a passage id for different content; passage ids must be unique")

    def to_queries(rows: list[tuple[str, QAExample, str, str]], count: Counter[str]) -> list[EvalQuery]:
        out: list[EvalQuery] = []
        seen_ids: set[str] = set()
        for _, q, c, src in rows:
            gold = []
            for gid in q.gold_passage_ids:
                h = pool.hash_of_id.get(gid)
                cid = corpus_ids.get(h) if h else (gid if gid in ids else None)
                if cid is None:
                    count["gold passage not in the corpus"] += 1
                    break
                gold.append(cid)
            else:
                qid = q.id if q.id not in seen_ids else f"{q.id}#{len(seen_ids)}"
                seen_ids.add(qid)
                out.append(EvalQuery(qid, q.question, list(q.answers), gold, q.dataset, c or None, src))
        return out

    queries = to_queries(selected, dropped)
    calibration = to_queries(spare, Counter())
    if not queries:
        raise InputError("no usable questions: none has answers or gold passages found in the corpus")
    info = {
        "files": dict(files_of_group), "noise": len(noise), "seed": spec.seed, "sizes": sizes,
        "corpus": "a prebuilt index" if spec.corpus_passages is not None else str(spec.corpus) if spec.corpus else (
            "paragraphs of the QA files + noise" if spec.scope == "files"
            else "gold passages of the questions + noise"),
        "n_passages": len(passages), "n_queries": len(queries),
        "queries_by_dataset": dict(sorted(Counter(q.dataset for q in queries).items())),
        "queries_by_class": dict(sorted(Counter(q.complexity or "unknown" for q in queries).items())),
        "label_sources": dict(sorted(Counter(q.label_source or "none" for q in queries).items())),
        "with_gold": sum(bool(q.gold) for q in queries), "dropped": dict(dropped),
    }
    info["calibration"] = {"n": len(calibration), "file": "calibration.jsonl",
                           "by_class": dict(sorted(Counter(q.complexity or "unknown" for q in calibration).items()))}
    return Benchmark(spec.key(), passages, queries, info, calibration)


_SILVER_TEXT: dict[str, str] = {}


def _original_question(data_dir: Path, key: str) -> str:
    if not _SILVER_TEXT:
        _SILVER_TEXT.update({r.key: r.question for r in load_silver3(data_dir / SILVER3_FILE)})
    return _SILVER_TEXT[key]


def load_or_build(spec: BenchmarkSpec, cache_dir: Path | None = None) -> tuple[Benchmark, Path]:
    """The cached benchmark for this spec (built on first use) and its directory."""
    key = spec.key()
    directory = (cache_dir or default_cache_dir()) / f"bench-{key[:16]}"
    if (directory / "benchmark.json").is_file():
        bench = Benchmark.load(directory)
        if bench.key == key:
            if not (directory / "calibration.jsonl").is_file():  # cached before calibration sets existed
                built = build(spec)
                built.write_calibration(directory)
                bench.calibration = built.calibration
                bench.info["calibration"] = built.info["calibration"]
                (directory / "benchmark.json").write_text(json.dumps({"key": key, "info": bench.info}, indent=2))
            return bench, directory
    bench = build(spec)
    bench.save(directory)
    return bench, directory


# The benchmarks `amsrag eval` reports on (docs/benchmarks/eval and its second run, another seed's queries):
# trainers of retrieval-side models leave every one of their questions out.
EVALUATED_SEEDS: tuple[int, ...] = (13, 29)


def evaluated_questions(data_dir: Path) -> set[str]:
    """Normalised questions of every evaluated benchmark of the default mix (eval and calibration queries)."""
    out: set[str] = set()
    for seed in EVALUATED_SEEDS:
        bench = build(BenchmarkSpec(data_dir=data_dir, seed=seed))
        out |= {normalise_question(q.question) for q in [*bench.queries, *bench.calibration]}
    return out


def spare_questions(bench: Benchmark, data_dir: Path, exclude: set[str], per_group: int,
                    seed: int = 13) -> list[EvalQuery]:
    """Questions of the default mix's files whose gold passages are all in `bench`'s corpus, none of them in
    `exclude` (normalised questions): up to `per_group` per data set, sampled with `seed`, in sorted order."""
    pool = _Pool()
    groups: dict[str, list[str]] = defaultdict(list)
    for group, rels in EVAL_FILES.items():
        for rel in rels:
            groups[group] += pool.add_file(data_dir / rel, "auto")
    corpus_ids = {p.content_hash: p.id for p in bench.passages}
    out: list[EvalQuery] = []
    for group in sorted(groups):
        usable = []
        for key in groups[group]:
            q = pool.questions[key][0]
            hashes = [pool.hash_of_id.get(g) for g in q.gold_passage_ids]
            if key in exclude or not q.answers or not hashes or any(h not in corpus_ids for h in hashes):
                continue
            usable.append(key)
        for key in _sample(usable, per_group, seed, f"spare:{group}"):
            q = pool.questions[key][0]
            gold = [corpus_ids[pool.hash_of_id[g]] for g in q.gold_passage_ids]
            hop = hop_of_dataset(q.dataset) or q.complexity
            out.append(EvalQuery(q.id, q.question, list(q.answers), gold, q.dataset, hop, "dataset"))
    return out


def held_out_questions(data_dir: Path) -> set[str]:
    """Questions no trained model may see: the default benchmark's (evaluated and calibration) and the
    demo's."""
    from importlib import resources

    bench = build(BenchmarkSpec(data_dir=data_dir))
    out = {q.question for q in [*bench.queries, *bench.calibration]}
    demo = Path(str(resources.files("amsrag") / "data" / "demo" / "questions.jsonl"))
    if demo.is_file():
        out |= {json.loads(line)["question"] for line in demo.read_text(encoding="utf-8").splitlines() if line}
    return out
