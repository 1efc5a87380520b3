"""Peak RSS of the ingest path on hostile input shapes (issue 39): writes docs/benchmarks/memory-inputs.json
and prints a Markdown table for docs/benchmarks/reliability.md.

    OMP_NUM_THREADS=1 python benchmarks/memory_inputs.py [--sizes 1,20] [--tiny-files 20000] [--ner-passages 2000]

Inputs (generated, seeded): `.txt` files of N MB with a sentence per line and the same words on one line
(no newline, no full stop), a single-line JSON array of passages of N MB, and a folder of many tiny `.txt`
files. Each case runs in a fresh process (peak RSS = that process's VmHWM; Linux keeps `ru_maxrss` across
exec, so a child would start from its parent's):

- parse + chunk: every passage of the input, through `amsrag.ingest.iter_passages` (the reader and the
  chunker `index add` uses, default settings), counted and dropped;
- NER + embedding: the first `--ner-passages` passages through `extract_ner` and the index encoder (the
  full path's later stages see passages in bounded batches: `ingest.batch_passages`, `stage_every`), so
  their memory does not grow with the file; their cost per passage is the ingest benchmark's subject.

What it does not run: the store's write (SQLite, BM25, graph): bounded by `ingest.batch_passages`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
TARGET_MB = 1024


def _words(rng: random.Random, n: int) -> list[str]:
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    names = ["Ada Lovelace", "Charles Babbage", "London", "Grace Hopper", "Harvard", "Alan Turing"]
    return [rng.choice(names) if rng.random() < 0.02 else rng.choice(vocab) for _ in range(n)]


def make_inputs(work: Path, sizes: list[int], tiny_files: int) -> dict[str, Path]:
    rng = random.Random(39)
    cases: dict[str, Path] = {}
    for mb in sizes:
        target = mb * 1024 * 1024
        words = _words(rng, target // 6 + 1)
        flat = " ".join(words)[:target]
        p = work / f"one-line-{mb}mb.txt"
        p.write_text(flat)
        cases[f"{mb} MB .txt, no newline"] = p
        p = work / f"lines-{mb}mb.txt"
        with p.open("w") as fh:
            written, i = 0, 0
            while written < target:
                line = " ".join(words[i : i + 15]).capitalize() + ".\n"
                fh.write(line)
                written += len(line)
                i = (i + 15) % (len(words) - 15)
        cases[f"{mb} MB .txt, a sentence per line"] = p
        p = work / f"one-line-{mb}mb.json"
        records, size, i = [], 0, 0
        while size < target:
            text = " ".join(words[i : i + 120])
            records.append({"id": f"r{len(records)}", "title": f"Record {len(records)}", "text": text})
            size += len(text) + 40
            i = (i + 120) % (len(words) - 120)
        p.write_text(json.dumps(records))
        cases[f"{mb} MB single-line JSON"] = p
    if tiny_files:
        folder = work / "tiny"
        folder.mkdir()
        for k in range(tiny_files):
            sub = folder / f"d{k // 1000:03d}"
            sub.mkdir(exist_ok=True)
            (sub / f"f{k:06d}.txt").write_text(f"Tiny note {k} about Ada Lovelace.\n")
        cases[f"{tiny_files} tiny .txt files"] = folder
    return cases


def peak_mb() -> int:
    """This process's peak RSS in MB (VmHWM of /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def run_case(path: str, ner_passages: int) -> dict[str, object]:
    """In the child process: the ingest path over `path`, its counts, times and peak RSS."""
    from amsrag.config import AmsragConfig
    from amsrag.embed.factory import encoder_for
    from amsrag.indexes.entities import extract_ner
    from amsrag.ingest import iter_passages

    t = time.perf_counter()
    passages = chars = 0
    sample = []
    for p in iter_passages(path):
        passages += 1
        chars += len(p.text)
        if len(sample) < ner_passages:
            sample.append(p.text)
    parse_s = time.perf_counter() - t
    rss_parse = peak_mb()
    t = time.perf_counter()
    extract_ner(sample, ["PERSON", "ORG", "GPE"])
    rss_ner = peak_mb()
    encoder = encoder_for(AmsragConfig().embedding)
    for start in range(0, len(sample), 256):
        encoder.encode(sample[start : start + 256])
    later_s = time.perf_counter() - t
    return {"passages": passages, "chars": chars, "parse_chunk_s": round(parse_s, 1),
            "ner_embed_passages": len(sample), "ner_embed_s": round(later_s, 1), "peak_rss_mb_parse_chunk": rss_parse,
            "peak_rss_mb_after_ner": rss_ner,
            "peak_rss_mb": peak_mb()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,20")
    ap.add_argument("--tiny-files", type=int, default=20_000)
    ap.add_argument("--ner-passages", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, args.ner_passages)))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = make_inputs(Path(tmp), sizes, args.tiny_files)
        for name, path in cases.items():
            proc = subprocess.run([sys.executable, __file__, "--child", str(path), "--ner-passages",
                                   str(args.ner_passages)], capture_output=True, text=True, env=os.environ)
            if proc.returncode != 0:
                results.append({"input": name, "error": proc.stderr.strip().splitlines()[-1:]})
            else:
                results.append({"input": name, **json.loads(proc.stdout.strip().splitlines()[-1])})
            print(json.dumps(results[-1]), flush=True)
    out = {"started": started, "finished": datetime.now(UTC).isoformat(timespec="seconds"),
           "python": platform.python_version(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()[0],
           "target_peak_rss_mb": TARGET_MB, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memory-inputs.json").write_text(json.dumps(out, indent=1) + "\n")
    print("| input | passages | parse + chunk s | peak RSS MB: parse + chunk | + NER | + embedding |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        if "error" in r:
            print(f"| {r['input']} | error: {r['error']} | | | | |")
            continue
        print(f"| {r['input']} | {r['passages']:,} | {r['parse_chunk_s']} | **{r['peak_rss_mb_parse_chunk']}** | "
              f"{r['peak_rss_mb_after_ner']} | {r['peak_rss_mb']} |")


if __name__ == "__main__":
    main()
