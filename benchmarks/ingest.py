"""Large-file ingest: throughput, peak memory and resume after kill -9 (issue 18).

A plain-text file of `--mb` MB is made from the unique paragraphs of the benchmark corpus (real
Wikipedia / QA text of ../shared/data, blank-line separated, repeated with a numbered header per
copy once the corpus runs out, so every passage stays distinct). Then, each in its own process:

1. `amsrag index build big.txt`, killed with SIGKILL after `--kill-after` seconds;
2. `amsrag index add big.txt` on the killed index: it must say "resuming: N of M passages already
   embedded" and, given the time (`--resume-budget`, else it is killed again), finish with `index
   check` green and exactly the file's passage count;
3. `amsrag index build small.txt` of `--small-mb` MB to completion: peak RSS beside the big file's.

Peak RSS is sampled from /proc every 0.2 s (VmRSS of the amsrag process). Results go to
docs/benchmarks/ingest.{md,json}.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/ingest.py --mb 50 --small-mb 5 --kill-after 600
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CACHE, ROOT, SHARED_DATA, load_benchmark

DOCS = ROOT / "docs" / "benchmarks"


def make_text(path: Path, megabytes: float) -> int:
    """Write a text file of about `megabytes` MB of real paragraphs; its size in bytes."""
    passages, _ = load_benchmark(SHARED_DATA)
    paragraphs = [" ".join(p.text.split()) for p in passages if len(p.text.split()) >= 20]
    target = int(megabytes * 1_000_000)
    size, copy = 0, 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        while size < target:
            for n, para in enumerate(paragraphs):
                block = f"{para} (copy {copy}, paragraph {n}.)\n\n" if copy else f"{para}\n\n"
                fh.write(block)
                size += len(block.encode("utf-8"))
                if size >= target:
                    break
            copy += 1
    return size


class Watched:
    """A child process with its peak RSS sampled from /proc."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self.fh = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(args, stdout=self.fh, stderr=subprocess.STDOUT,
                                     env={**os.environ, "COLUMNS": "200"})
        self.peak_kb = 0
        self.timeline: list[tuple[float, float]] = []  # (seconds, RSS MB) every 10 s
        self.t0 = time.monotonic()
        self._stop = False
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        status = Path(f"/proc/{self.proc.pid}/status")
        last = -10.0
        while not self._stop:
            try:
                m = re.search(r"VmRSS:\s+(\d+) kB", status.read_text())
                if m:
                    self.peak_kb = max(self.peak_kb, int(m.group(1)))
                    now = time.monotonic() - self.t0
                    if now - last >= 10:
                        self.timeline.append((round(now, 1), round(int(m.group(1)) / 1024, 1)))
                        last = now
            except OSError:
                return
            time.sleep(0.2)

    def kill_after(self, seconds: float) -> None:
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)

    def wait(self, timeout: float) -> dict[str, float]:
        rc = self.proc.wait(timeout=timeout)
        self._stop = True
        self._thread.join(timeout=2)
        self.fh.close()
        return {"rc": rc, "seconds": round(time.monotonic() - self.t0, 1), "peak_rss_mb": round(self.peak_kb / 1024, 1),
                "rss_timeline_mb": self.timeline}


def amsrag(*args: str) -> list[str]:
    return [sys.executable, "-m", "amsrag.cli", *args]


def index_counts(index: Path) -> dict[str, object]:
    out = subprocess.run(amsrag("index", "stats", "--index", str(index), "--json"), capture_output=True, text=True,
                         timeout=600, check=True)
    stats = json.loads(out.stdout)
    check = subprocess.run(amsrag("index", "check", "--index", str(index), "--json"), capture_output=True,
                           text=True, timeout=1200)
    return {"passages": stats["passages"], "staged_vectors": stats["staged_vectors"],
            "check_ok": json.loads(check.stdout)["ok"]}


def expected_passages(path: Path) -> int:
    """The passages the index holds once `path` is in: distinct content (a chunk repeated in the file is
    stored once)."""
    from amsrag.ingest import iter_passages

    return len({p.content_hash for p in iter_passages([path])})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--small-mb", type=float, default=5.0)
    ap.add_argument("--kill-after", type=float, default=240.0)
    ap.add_argument("--work", type=Path, default=CACHE / "ingest")
    ap.add_argument("--timeout", type=float, default=4 * 3600)
    ap.add_argument("--resume-budget", type=float, default=4 * 3600,
                    help="kill the resumed run after this many seconds (a second kill -9) if it has not finished")
    ap.add_argument("--render-only", action="store_true", help="rewrite ingest.md from ingest.json")
    args = ap.parse_args()
    if args.render_only:
        save(json.loads((DOCS / "ingest.json").read_text(encoding="utf-8")))
        return
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    big, small = work / "big.txt", work / "small.txt"
    sizes = {"big": make_text(big, args.mb), "small": make_text(small, args.small_mb)}
    print(f"files: big {sizes['big'] / 1e6:.1f} MB, small {sizes['small'] / 1e6:.1f} MB", flush=True)
    result: dict[str, object] = {"command": "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/ingest.py "
                                            f"--mb {args.mb:g} --small-mb {args.small_mb:g} "
                                            f"--kill-after {args.kill_after:g} --resume-budget {args.resume_budget:g}",
                                 "bytes": sizes}
    n_small, n_big = expected_passages(small), expected_passages(big)
    result["expected_passages"] = {"small": n_small, "big": n_big}
    print(f"passages: small {n_small}, big {n_big}", flush=True)

    run = Watched(amsrag("index", "build", str(big), "--index", str(work / "big-index")), work / "big-killed.log")
    run.kill_after(args.kill_after)
    killed = run.wait(60)
    killed.update(index_counts(work / "big-index"))
    result["killed"] = killed
    save(result)
    print("killed:", killed, flush=True)

    run = Watched(amsrag("index", "add", str(big), "--index", str(work / "big-index")), work / "big-resume.log")
    run.kill_after(args.resume_budget)
    resumed = run.wait(60)
    resumed.update(index_counts(work / "big-index"))
    log = (work / "big-resume.log").read_text(encoding="utf-8", errors="replace")
    m = re.search(r"resuming: (\d+) of (\d+) passages already embedded", log)
    resumed["resume_message"] = m.group(0) if m else None
    resumed["progress_lines"] = sum(1 for line in log.splitlines() if "embed" in line)
    resumed["finished"] = resumed["rc"] == 0
    resumed["exact"] = resumed["passages"] == n_big
    result["resumed"] = resumed
    save(result)
    print("resumed:", resumed, flush=True)

    run = Watched(amsrag("index", "build", str(small), "--index", str(work / "small-index")), work / "small.log")
    small_run = run.wait(args.timeout)
    small_run.update(index_counts(work / "small-index"))
    small_run["passages_per_s"] = round(n_small / small_run["seconds"], 2)
    result["small"] = small_run
    save(result)
    print("small:", small_run, flush=True)


def save(result: dict[str, object]) -> None:
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "ingest.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (DOCS / "ingest.md").write_text(render(result), encoding="utf-8")


def _rate(run: dict[str, Any], embedded: int) -> str:
    return f"{embedded / run['seconds']:.2f}" if run.get("seconds") else "–"


def render(r: dict[str, Any]) -> str:
    """docs/benchmarks/ingest.md from the results so far."""
    n = r["expected_passages"]
    lines = ["# Large-file ingest: memory, throughput, resume after kill -9", "",
             f"Command: `{r['command']}` (results: `ingest.json`). A {r['bytes']['big'] / 1e6:.1f} MB plain-text "
             f"file of real paragraphs ({n['big']:,} passages of ≤ 200 tokens) and a "
             f"{r['bytes']['small'] / 1e6:.1f} MB one ({n['small']:,} passages); each phase is its own `amsrag` "
             "process, RSS sampled from /proc every 0.2 s. Two shared cores; other jobs ran beside it, so rates "
             "are lower bounds.", "",
             "| phase | exit | seconds | peak RSS MB | passages in index | staged vectors | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for key, label in (("killed", "build 50 MB, SIGKILL"), ("resumed", "add 50 MB (resume)"),
                       ("small", "build small file")):
        run = r.get(key)
        if run and "peak_rss_mb" in run:
            lines.append(f"| {label} | {run['rc']} | {run['seconds']} | {run['peak_rss_mb']} | {run['passages']:,} | "
                         f"{run['staged_vectors']:,} | {'ok' if run['check_ok'] else 'FAILED'} |")
    killed, resumed = r.get("killed"), r.get("resumed")
    if killed:
        scan = [mb for t, mb in killed["rss_timeline_mb"] if mb < 400]
        lines += ["", f"While the 50 MB file is read and chunked (first pass, before the encoder loads) RSS stays at "
                      f"{max(scan) if scan else 0:.0f} MB; with the encoder running it is "
                      f"{killed['peak_rss_mb']:.0f} MB and flat from then on (see `rss_timeline_mb`): the "
                      "onnxruntime CPU arena holds the activations of the largest batch (32 × 256 tokens), "
                      "independent of the file's size. The kill left "
                      f"{killed['staged_vectors']:,} staged vectors and {killed['passages']:,} committed passages; "
                      f"`index check` {'passed' if killed['check_ok'] else 'FAILED'}."]
    if resumed:
        lines += ["", f"The resumed run printed `{resumed.get('resume_message')}`; "
                      + ("it finished with exactly the file's passages "
                         f"({resumed['passages']:,} of {n['big']:,})." if resumed.get("finished") and resumed["exact"]
                         else f"it was stopped after {resumed['seconds']:.0f} s (the time budget, a second kill -9) "
                              f"with {resumed['passages']:,} passages committed and {resumed['staged_vectors']:,} "
                              "staged, `index check` "
                              f"{'passing' if resumed['check_ok'] else 'FAILING'}; a further `index add` resumes "
                              "again.")
              + (f" It embedded and committed {resumed.get('passages_per_s')} passages/s." if resumed.get(
                  "passages_per_s") else ""),
              "", "RSS over the resumed run (`rss_timeline_mb`) grows with the *index*, not the file: "
                  + ", ".join(f"{mb:.0f} MB at {t / 60:.0f} min" for t, mb in resumed["rss_timeline_mb"][::60])
                  + ". Each commit rebuilds BM25 from the token cache, concatenates the vectors and re-matches "
                    "every passage's entities (reading all passage texts): about 20 KB per stored passage on top "
                    "of the encoder's arena. Making commits independent of the corpus size is issue 20's "
                    "incremental BM25 and title matching."]
    small = r.get("small")
    if small and killed:
        lines += ["", f"Peak RSS: {small['peak_rss_mb']:.0f} MB for the {r['bytes']['small'] / 1e6:.0f} MB file, "
                      f"{max(killed['peak_rss_mb'], (resumed or killed)['peak_rss_mb']):.0f} MB for the 50 MB file; "
                      f"the small build ran at {small['passages_per_s']} passages/s end to end (embedding, BM25, "
                      "NER, writes)."]
    lines += ["", "Before this change `amsrag index add` of a 50 MB file read it whole, embedded every passage in "
                  "one transaction (3.2 GB after 9 min, unfinished) and lost all work to a kill -9.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
