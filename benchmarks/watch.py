"""Live folder sync (`amsrag index sync --watch`): how soon an edit is searchable, and a burst of 1,000 files.

Runs `amsrag index sync FOLDER --watch --json` as a process of its own over a seed folder of small Markdown
files, and reads the index from this process through a second handle (as `amsrag serve` would):

(a) edits: one file at a time gets a new sentence holding a made-up word; the time from the end of the write
    to the word's passage being BM25's top hit (the reader reloads the generation the watcher published);
    the median and the worst over `--edits` edits;
(b) a burst: `--burst` files (one passage each) copied into the folder at once (`shutil.copytree`); the time
    until the index holds exactly the expected passages, each stored once, and the watcher's batches that did it.

Results: docs/benchmarks/watch.{md,json}.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/watch.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
SEED_FILES = 50
POLL_S = 0.05


class Watcher:
    """`amsrag index sync --watch --json` in a child process; its batch lines gathered by a thread."""

    def __init__(self, folder: Path, index: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                                          os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "index", "sync", str(folder), "--index",
                                      str(index), "--watch", "--json", "-q"], stdout=subprocess.PIPE, text=True,
                                     env=env)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def batches(self) -> list[dict[str, Any]]:
        return [d for d in self.lines if "batch" in d]

    def stop(self, timeout_s: float = 120) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        return next((d["watch"] for d in reversed(self.lines) if "watch" in d), {})


def wait_for(check: Any, timeout_s: float, what: str) -> float:
    """Seconds until `check()` holds (SystemExit after `timeout_s`)."""
    t = time.perf_counter()
    while not check():
        if time.perf_counter() - t > timeout_s:
            raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(POLL_S)
    return time.perf_counter() - t


def fresh(index: EmbeddedIndex) -> EmbeddedIndex:
    if index.stale():
        index.refresh()
    return index


def top(index: EmbeddedIndex, query: str) -> str | None:
    hits = retriever_for(fresh(index), "bm25").search(query, k=1)
    return hits[0].id if hits else None


def edits(folder: Path, reader: EmbeddedIndex, n: int) -> list[float]:
    """Seconds from each edit's last write to its new word being the top hit."""
    out = []
    for i in range(n):
        word = f"zorblat{i}quex"
        path = folder / f"seed{i % SEED_FILES:03d}.md"
        path.write_text(f"# Seed {i}\n\nThe seed file now speaks of the {word} of harbour {i}.\n", encoding="utf-8")
        seconds = wait_for(lambda w=word, p=path: top(reader, w) == f"{folder.name}/{p.name}#0", 120,
                           f"edit {i} to be searchable")
        out.append(seconds)
        print(f"edit {i}: searchable after {seconds:.2f} s", flush=True)
        time.sleep(1.0)  # edits apart: each is its own batch
    return out


def burst(folder: Path, reader: EmbeddedIndex, work: Path, n: int, watcher: Watcher) -> dict[str, Any]:
    """Copy `n` one-passage files in at once; time until the index holds exactly them, each once."""
    staging = work / "staging"
    for i in range(n):
        (staging / f"b{i // 100:02d}").mkdir(parents=True, exist_ok=True)
        (staging / f"b{i // 100:02d}" / f"note{i:04d}.txt").write_text(
            f"Note {i} records that crate {i} holds item code QX{i:04d} in aisle {i % 37}.\n", encoding="utf-8")
    before, batches_before = len(fresh(reader)), len(watcher.batches())
    t = time.perf_counter()
    shutil.copytree(staging, folder / "burst")
    copied = time.perf_counter() - t
    expected = before + n
    wait_for(lambda: len(fresh(reader)) >= expected, 1800, f"{n} files to be indexed")
    settled = time.perf_counter() - t
    time.sleep(5)  # a late or duplicate batch would show here
    passages = list(fresh(reader).iter_passages())
    ids = [p.id for p in passages if p.id.startswith(f"{folder.name}/burst/")]
    texts = {p.text for p in passages if p.id.startswith(f"{folder.name}/burst/")}
    want = sorted(f"{folder.name}/burst/b{i // 100:02d}/note{i:04d}.txt#0" for i in range(n))
    batches = watcher.batches()[batches_before:]
    return {"files": n, "copy_s": round(copied, 2), "settled_s": round(settled, 2), "passages": len(fresh(reader)),
            "expected": expected, "burst_ids": len(ids), "unique_ids": len(set(ids)), "unique_texts": len(texts),
            "exact": sorted(ids) == want and len(fresh(reader)) == expected, "check_ok": fresh(reader).check().ok,
            "batches": [{k: b[k] for k in ("batch", "changes", "seconds", "passages", "error")} for b in batches],
            "embedded": sum(b["report"]["embedded"] for b in batches if b.get("report"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=DOCS / "watch.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="amsrag-watch-") as tmp:
        work = Path(tmp)
        folder, index_dir = work / "kb", work / "idx"
        folder.mkdir()
        for i in range(SEED_FILES):
            (folder / f"seed{i:03d}.md").write_text(f"# Seed {i}\n\nSeed file {i} of the watched folder.\n",
                                                    encoding="utf-8")
        EmbeddedIndex.create(index_dir).close()
        watcher = Watcher(folder, index_dir)
        try:
            first = wait_for(lambda: bool(watcher.batches()), 600, "the first sync")
            print(f"first sync of {SEED_FILES} files after {first:.1f} s", flush=True)
            with EmbeddedIndex.open(index_dir) as reader:
                edit_s = edits(folder, reader, args.edits)
                burst_result = burst(folder, reader, work, args.burst, watcher)
        finally:
            summary = watcher.stop()
    result = {"cpus": os.cpu_count(), "seed_files": SEED_FILES, "first_sync_s": round(first, 2),
              "edit_to_searchable_s": {"median": round(statistics.median(edit_s), 2), "max": round(max(edit_s), 2),
                                       "all": [round(s, 2) for s in edit_s]},
              "burst": burst_result, "watch_summary": summary}
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "burst"}, indent=2))
    print(json.dumps({k: v for k, v in burst_result.items() if k != "batches"}, indent=2))


if __name__ == "__main__":
    main()
