"""Embedding work a kill -9 loses: staged vectors are committed by size or time (`ingest.stage_every` passages
or `ingest.stage_seconds` of embedding, whichever comes first), so a killed ingest redoes at most about
`stage_seconds` of embedding. Writes the "Embedding work lost to a kill" section of docs/benchmarks/reliability.md
(+ docs/benchmarks/kill-loss.json).

    PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/kill_loss.py [--kills 10]
        [--seed 3900] [--n 500] [--load 0] [--out docs/benchmarks]

The corpus is real: the first `--n` passages of ../shared/data/flashrag/wiki_sample_corpus_1000.jsonl
(Wikipedia, via FlashRAG). An empty embedded index (default configuration, `graph.ner = false`: the entity graph
from titles, so the runs are about embedding) is filled by `amsrag index add CORPUS`, once without a kill (the
reference), then `--kills` times killed with SIGKILL at a seeded random point of its run and resumed with the same
command. `--load N` runs N busy-looping processes beside the kill runs (a busier machine: slower embedding, more
and smaller stages).

Where a kill lands is drawn on the run's progress, not on the clock, so that every kill lands while the command
runs however fast or slow the machine is at the time: a seeded u ~ U(0, 1) is a point of the reference's
timeline (u x its wall time), read as a phase of it: start-up (kill that many seconds after the spawn), the
embedding of passage p (kill when the killed run's trace shows p passages embedded: whole encoder calls plus the
elapsed share of the call in flight at the last call's rate), or the tail after the last encoder call (kill that
long after the killed run's last encoder call ends, at most half the reference's tail).

Measured per kill, from a trace the `index add` child writes (the real command, run in-process by this script's
child mode, with its encoder's calls and its staged commits timestamped; nothing is replaced):
- lost_s: seconds of embedding the kill threw away: the encoder's time (up to the kill) on every stage whose
  vectors were not committed before the kill (the stage being embedded, or embedded but not yet staged);
- redone: passages the killed run had embedded and the resume embedded again (whole encoder calls lost), and
  the resume's `resumed` count (staged vectors it found) and `embedded` count, which must add up to the corpus
  with what the killed run committed;
- exact: after the resume the index holds exactly the reference's passages (same ids, none lost or twice) with
  bit-identical vectors, and `amsrag index check` passes.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CORPUS = ROOT.parent / "shared" / "data" / "flashrag" / "wiki_sample_corpus_1000.jsonl"
COMMAND = "PYTHONPATH=src OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/kill_loss.py"
TARGET_LOST_S = 30.0
SECTION = "## 7. Embedding work lost to a kill (issue 39)"


# ============================================================================ the child: `amsrag index add`, traced
def _child(trace_path: str, argv: list[str]) -> int:
    """Run `amsrag ARGV` in this process with the ingest's encoder calls and staged commits timestamped (one
    JSON line each, written before and after the real call)."""
    from amsrag.cli import main
    from amsrag.indexing import job as job_module
    from amsrag.store.embedded import EmbeddedIndex

    trace = open(trace_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115  (line-buffered: a kill keeps it)
    staging = contextvars.ContextVar("staging", default=False)
    wrapped: set[type] = set()

    def event(kind: str, n: int) -> None:
        trace.write(json.dumps({"event": kind, "n": n, "t": time.time()}) + "\n")

    def traced_encode(real: Any) -> Any:
        def encode(self: Any, texts: Any, *a: Any, **k: Any) -> Any:
            if not staging.get():
                return real(self, texts, *a, **k)
            event("encode_start", len(texts))
            out = real(self, texts, *a, **k)
            event("encode_end", len(texts))
            return out
        return encode

    real_embed = job_module.Job.embed_missing

    def embed_missing(self: Any, passages: Any, advance: Any) -> None:
        cls = type(self.index.encoder)
        if cls not in wrapped:
            cls.encode = traced_encode(cls.encode)  # type: ignore[method-assign]
            wrapped.add(cls)
        token = staging.set(True)
        try:
            real_embed(self, passages, advance)
        finally:
            staging.reset(token)

    real_stage = EmbeddedIndex.stage_vectors

    def stage_vectors(self: Any, hashes: Any, vectors: Any) -> None:
        real_stage(self, hashes, vectors)
        event("staged", len(hashes))

    job_module.Job.embed_missing = embed_missing  # type: ignore[method-assign]
    EmbeddedIndex.stage_vectors = stage_vectors  # type: ignore[method-assign]
    event("start", 0)
    sys.argv = ["amsrag", *argv]
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


# ============================================================================ the parent
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def add_argv(index: Path, corpus: Path, trace: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", str(trace), "--",
            "index", "add", str(corpus), "--index", str(index), "--json", "--quiet"]


def read_trace(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):  # a line cut by the kill
            out.append(json.loads(line))
    return out


def stages_of(events: list[dict[str, Any]], until: float | None = None) -> list[dict[str, Any]]:
    """Each encoder call of the ingest: {n, start, end (None: still running), staged (None: not committed)}.
    `until`: the kill time (an event after it cannot have happened; the trace is written by the killed process)."""
    stages: list[dict[str, Any]] = []
    for e in events:
        if until is not None and e["t"] > until:
            break
        if e["event"] == "encode_start":
            stages.append({"n": e["n"], "start": e["t"], "end": None, "staged": None})
        elif e["event"] == "encode_end" and stages:
            stages[-1]["end"] = e["t"]
        elif e["event"] == "staged" and stages:
            stages[-1]["staged"] = e["t"]
    return stages


@dataclass
class KillResult:
    seed: int
    u: float  # the drawn point of the reference's timeline (a share of its wall time)
    plan: str = ""  # that point as a phase of a run
    killed_after_s: float = 0.0  # seconds from the spawn to the kill
    killed_at: str = ""  # where the kill landed: embedding, between stages, committing, finished
    stages_before_kill: int = 0
    committed_stages: int = 0
    embedded_before_kill: int = 0  # passages whose encoder call completed before the kill
    kept_staged: int = 0  # staged by the killed run and not yet stored
    added_by_killed: int = 0  # passages the killed run committed (stored)
    lost_s: float = 0.0  # encoder seconds thrown away
    lost_in_flight_s: float = 0.0  # of which: the encoder call the kill interrupted
    redone_passages: int = 0  # embedded (whole calls) by the killed run and again by the resume
    resume_resumed: int = 0
    resume_embedded: int = 0
    resume_added: int = 0
    resume_seconds: float = 0.0
    counts_add_up: bool = False
    exact: bool = False
    index_check: int = -1
    loadavg_1m: float = 0.0
    problems: list[str] = field(default_factory=list)


def new_index(path: Path) -> None:
    from amsrag.config import AmsragConfig
    from amsrag.store.embedded import EmbeddedIndex

    config = AmsragConfig()
    config.graph.ner = False
    EmbeddedIndex.create(path, config).close()


def index_state(path: Path) -> tuple[list[str], Any]:
    """(sorted passage ids, vectors in that order) of the index at `path`."""
    import numpy as np

    from amsrag.store.embedded import EmbeddedIndex

    with EmbeddedIndex.open(path) as idx:
        ids = sorted(p.id for p in idx.iter_passages())
        rows = idx.rows_for_ids(ids)
        vectors = np.asarray(idx.vectors_for_rows([rows[i] for i in ids]))
    return ids, vectors


def last_json(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                return obj
    raise RuntimeError(f"no JSON report in the output: {stdout[-2000:]}")


def reference(work: Path, corpus: Path, n: int) -> dict[str, Any]:
    idx, trace = work / "reference", work / "reference.trace"
    new_index(idx)
    t = time.time()
    proc = subprocess.run(add_argv(idx, corpus, trace), capture_output=True, text=True, env=child_env())
    wall = time.time() - t
    spawned = t
    if proc.returncode != 0:
        raise RuntimeError(f"the reference run failed:\n{proc.stderr[-3000:]}")
    report = last_json(proc.stdout)
    stages = stages_of(read_trace(trace))
    encode_s = sum(s["end"] - s["start"] for s in stages)
    ids, vectors = index_state(idx)
    if len(ids) != n:
        raise RuntimeError(f"the reference holds {len(ids)} passages, the corpus {n}")
    return {"wall_s": round(wall, 2), "encode_s": round(encode_s, 2), "rate": round(n / encode_s, 2),
            "stages": [s["n"] for s in stages],
            "timeline": [{"n": s["n"], "start": s["start"] - spawned, "end": s["end"] - spawned} for s in stages],
            "stage_seconds": [round(s["end"] - s["start"], 2) for s in stages],
            "report_stages": report.get("stages"), "ids": ids, "vectors": vectors}


@dataclass(frozen=True)
class KillPlan:
    """Where in a run to kill: `phase` "start-up" (`value` seconds after the spawn), "embedding" (when `value`
    passages are embedded) or "tail" (`value` seconds after the last encoder call ends)."""

    u: float
    phase: str
    value: float

    def describe(self) -> str:
        unit = "passages embedded" if self.phase == "embedding" else "s"
        return f"{self.phase} {self.value:g} {unit}"


def plan_kill(u: float, ref: dict[str, Any]) -> KillPlan:
    """The point u x the reference's wall time of the reference's timeline, as a phase of a run."""
    at, timeline = u * ref["wall_s"], ref["timeline"]
    if not timeline or at < timeline[0]["start"]:
        return KillPlan(u, "start-up", round(at, 2))
    done = 0
    for stage in timeline:
        if at <= stage["end"]:
            share = max(0.0, at - stage["start"]) / max(stage["end"] - stage["start"], 1e-9)
            return KillPlan(u, "embedding", round(done + min(1.0, share) * stage["n"], 1))
        done += stage["n"]
    tail = ref["wall_s"] - timeline[-1]["end"]
    return KillPlan(u, "tail", round(min(at - timeline[-1]["end"], tail / 2), 2))


class Progress:
    """The killed run's progress, read from its trace as it grows."""

    def __init__(self, path: Path, n: int, rate: float) -> None:
        self.path, self.n, self.rate = path, n, rate
        self.offset, self.done, self.last_end = 0, 0, 0.0
        self.in_flight: tuple[int, float] | None = None  # (passages, start) of the encoder call running

    def poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode("utf-8").splitlines():
            e = json.loads(line)
            if e["event"] == "encode_start":
                self.in_flight = (e["n"], e["t"])
            elif e["event"] == "encode_end" and self.in_flight is not None:
                size, start = self.in_flight
                self.done += size
                self.rate = size / max(e["t"] - start, 1e-9)
                self.in_flight, self.last_end = None, e["t"]

    def embedded(self, now: float) -> float:
        if self.in_flight is None:
            return float(self.done)
        size, start = self.in_flight
        return self.done + min(float(size), (now - start) * self.rate)

    def reached(self, plan: KillPlan, spawned: float, now: float) -> bool:
        if plan.phase == "start-up":
            return now - spawned >= plan.value
        if plan.phase == "embedding":
            return self.embedded(now) >= plan.value
        return self.done >= self.n and now - self.last_end >= plan.value


def run_until(plan: KillPlan, argv: list[str], trace: Path, out: Any, n: int, rate: float) -> tuple[Any, float | None]:
    """Spawn the run and SIGKILL it when it reaches `plan`; (the process, the kill time or None: it finished)."""
    progress = Progress(trace, n, rate)
    spawned = time.time()
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=child_env(), start_new_session=True)
    while proc.poll() is None:
        progress.poll()
        now = time.time()
        if progress.reached(plan, spawned, now):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            return proc, now
        time.sleep(0.02)
    return proc, None


def kill_once(seed: int, work: Path, corpus: Path, ref: dict[str, Any], n: int) -> KillResult:
    import numpy as np

    plan = plan_kill(random.Random(seed).uniform(0.0, 1.0), ref)
    res = KillResult(seed, round(plan.u, 3), plan=plan.describe(), loadavg_1m=round(os.getloadavg()[0], 2))
    idx, trace = work / f"kill-{seed}", work / f"kill-{seed}.trace"
    new_index(idx)
    with tempfile.TemporaryFile("w+") as out:
        spawned = time.time()
        proc, killed_at = run_until(plan, add_argv(idx, corpus, trace), trace, out, n, ref["rate"])
        res.killed_after_s = round((killed_at or time.time()) - spawned, 2)
        if killed_at is None:
            res.problems.append("the run finished before the kill")
            out.seek(0)
            if proc.returncode != 0:
                res.problems.append(f"exited {proc.returncode} before the kill: {out.read()[-2000:]}")
    stages = stages_of(read_trace(trace), until=killed_at)
    res.stages_before_kill = len(stages)
    res.committed_stages = sum(s["staged"] is not None for s in stages)
    res.embedded_before_kill = sum(s["n"] for s in stages if s["end"] is not None)
    lost = [s for s in stages if s["staged"] is None]
    end = killed_at if killed_at is not None else time.time()
    res.lost_s = round(sum((s["end"] or end) - s["start"] for s in lost), 2)
    res.lost_in_flight_s = round(sum(end - s["start"] for s in lost if s["end"] is None), 2)
    if killed_at is None:
        res.killed_at = "finished before the kill"
    elif lost and lost[-1]["end"] is None:
        res.killed_at = "embedding a stage"
    elif lost:
        res.killed_at = "a stage embedded, not yet staged"
    elif not stages:
        res.killed_at = "before embedding (start-up, reading)"
    else:
        res.killed_at = "after a staged commit (committing or between stages)"
    from amsrag.store.embedded import EmbeddedIndex

    with EmbeddedIndex.open(idx) as opened:
        res.added_by_killed = len(opened)
    t = time.time()
    rerun = subprocess.run(add_argv(idx, corpus, work / f"resume-{seed}.trace"), capture_output=True, text=True,
                           env=child_env())
    res.resume_seconds = round(time.time() - t, 2)
    if rerun.returncode != 0:
        res.problems.append(f"the resume failed ({rerun.returncode}): {rerun.stderr[-2000:]}")
        return res
    report = last_json(rerun.stdout)
    res.resume_resumed, res.resume_embedded = int(report["resumed"]), int(report["embedded"])
    res.resume_added = int(report["added"])
    res.kept_staged = res.resume_resumed
    # what the resume embedded = the corpus less what the killed run kept (committed or staged)
    res.counts_add_up = (res.resume_embedded == n - res.added_by_killed - res.resume_resumed
                         and res.resume_added == n - res.added_by_killed)
    if not res.counts_add_up:
        res.problems.append(f"counts: resume embedded {res.resume_embedded}, added {res.resume_added}; the killed "
                            f"run committed {res.added_by_killed} and staged {res.resume_resumed} of {n}")
    res.redone_passages = res.embedded_before_kill - res.added_by_killed - res.resume_resumed
    ids, vectors = index_state(idx)
    res.exact = ids == ref["ids"] and bool(np.array_equal(vectors, ref["vectors"]))
    if not res.exact:
        same = vectors.shape == ref["vectors"].shape and bool(np.array_equal(vectors, ref["vectors"]))
        res.problems.append(f"not exact: {len(ids)} passages ({len(set(ids) - set(ref['ids']))} unexpected, "
                            f"{len(set(ref['ids']) - set(ids))} missing), vectors equal: {same}")
    check = subprocess.run([sys.executable, "-m", "amsrag.cli", "index", "check", "--index", str(idx)],
                           capture_output=True, text=True, env=child_env())
    res.index_check = check.returncode
    if check.returncode != 0:
        res.problems.append(f"index check: {check.returncode}: {check.stdout[-1000:]}{check.stderr[-1000:]}")
    if res.lost_s > TARGET_LOST_S:
        res.problems.append(f"lost {res.lost_s} s of embedding (target <= {TARGET_LOST_S:g} s)")
    shutil.rmtree(idx, ignore_errors=True)
    return res


@contextlib.contextmanager
def busy(n: int):  # type: ignore[no-untyped-def]
    """`n` processes spinning on the CPU while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def markdown(result: dict[str, Any]) -> str:
    ref, cases, cfg = result["reference"], result["kills"], result["config"]
    killed = [c for c in cases if c["killed_at"] != "finished before the kill"]
    worst = max((c["lost_s"] for c in cases), default=0.0)
    lines = [
        SECTION, "",
        "Staged vectors are committed by size or time, whichever comes first: `ingest.stage_every` "
        f"({cfg['stage_every']}) passages or `ingest.stage_seconds` ({cfg['stage_seconds']:g}) of embedding. So a "
        "killed ingest redoes at most about `stage_seconds` of embedding. The stage sizes follow the last stage's "
        "rate.", "",
        f"    {result['command']}", "",
        f"Run {result['date'][:16].replace('T', ' ')} UTC.", "",
        f"The corpus: the first {result['n']} passages of `flashrag/wiki_sample_corpus_1000.jsonl` (Wikipedia). "
        f"Each run is `amsrag index add` into an empty embedded index (`graph.ner = false`). A run is killed with "
        f"SIGKILL at a seeded random point of its progress (seeds {result['seed']}..{result['seed'] + len(cases) - 1}"
        "): u ~ U(0, 1) is a point of the reference's timeline (u x its wall time), read as a phase: start-up "
        "(that many seconds after the spawn), the embedding of passage p (killed when the run's trace shows p "
        "passages embedded), or the tail after the last encoder call (that long after the run's last call, at "
        "most half the reference's tail). So every kill lands while the command runs, however loaded the machine "
        "is at the time. Then it is resumed with the same command. "
        f"Extra load: {result['load']} busy process(es); load average (1 min) "
        f"{min(c['loadavg_1m'] for c in cases):.2f}-{max(c['loadavg_1m'] for c in cases):.2f} on "
        f"{result['machine']['cpus']} CPUs.", "",
        f"Reference (no kill): {ref['wall_s']} s wall, {ref['encode_s']} s of embedding, {ref['rate']} passages/s. "
        f"Its stages: {', '.join(map(str, ref['stages']))} passages, taking "
        f"{', '.join(f'{s:g}' for s in ref['stage_seconds'])} s.", "",
        "| seed | u | kill planned at | killed after (s) | where | stages committed / begun | embedded before kill "
        "| kept (stored + staged) | redone passages | **lost (s)** | resume: resumed / embedded | exact | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        lines.append(
            f"| {c['seed']} | {c['u']:g} | {c['plan']} | {c['killed_after_s']:g} | {c['killed_at']} "
            f"| {c['committed_stages']} / "
            f"{c['stages_before_kill']} | {c['embedded_before_kill']} | {c['added_by_killed']} + {c['kept_staged']} "
            f"| {c['redone_passages']} | **{c['lost_s']:g}** | {c['resume_resumed']} / {c['resume_embedded']} "
            f"| {'yes' if c['exact'] else 'NO'} | {'ok' if c['index_check'] == 0 else c['index_check']} |")
    exact = sum(c["exact"] for c in cases)
    lines += [
        "",
        f"Worst loss: **{worst:g} s** of embedding (target ≤ {TARGET_LOST_S:g} s). {len(killed)} of {len(cases)} "
        f"runs were killed while the command ran. After every resume the index was exact in {exact} of "
        f"{len(cases)} runs: the reference's {result['n']} passages, none lost or twice, vectors bit-identical. "
        f"The resume's counts added up in {sum(c['counts_add_up'] for c in cases)} of {len(cases)} runs: it "
        "embedded the corpus less what the killed run had stored or staged.", "",
        "How it is measured. The `index add` child runs the real command in-process. Its encoder calls and "
        "staged commits are timestamped in a trace. Lost seconds are the encoder time, up to the kill, of every "
        "stage not committed before the kill. Redone passages are those whose encoder call had completed but "
        "were not kept. The in-flight call's passages are not counted there; its seconds are.", "",
        f"Problems: {sum(len(c['problems']) for c in cases)}. Total time {result['seconds']:.0f} s. "
        "Data: `docs/benchmarks/kill-loss.json`.", "",
    ]
    return "\n".join(lines)


def write_section(doc: Path, section: str) -> None:
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    if SECTION in text:
        start = text.index(SECTION)
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + (text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text, encoding="utf-8")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return _child(sys.argv[2], sys.argv[4:] if sys.argv[3] == "--" else sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=3900)
    ap.add_argument("--n", type=int, default=500, help="passages of the corpus (at most 1000)")
    ap.add_argument("--load", type=int, default=0, help="busy-looping processes beside the kill runs")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    if not 1 <= args.n <= 1000:
        ap.error("--n must be between 1 and 1000 (the corpus file's passages)")
    if args.kills < 1 or args.load < 0:
        ap.error("--kills must be at least 1 and --load at least 0")
    if not CORPUS.exists():
        ap.error(f"the corpus {CORPUS} is missing (../shared/data beside the checkout)")
    sys.path.insert(0, str(SRC))
    from amsrag.config import IngestConfig

    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kill-loss-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus.jsonl"
        lines = CORPUS.read_text(encoding="utf-8").splitlines()[:args.n]
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with busy(args.load):
            ref = reference(work, corpus, args.n)
            print(f"reference: {ref['wall_s']} s wall, {ref['encode_s']} s embedding ({ref['rate']} passages/s), "
                  f"stages {ref['stages']} ({ref['stage_seconds']} s)", flush=True)
            cases = []
            for seed in range(args.seed, args.seed + args.kills):
                case = kill_once(seed, work, corpus, ref, args.n)
                print(f"seed {seed}: kill at {case.plan}, {case.killed_after_s} s ({case.killed_at}), "
                      f"lost {case.lost_s} s, redone "
                      f"{case.redone_passages}, resumed {case.resume_resumed}, exact {case.exact} "
                      f"{case.problems or ''}", flush=True)
                cases.append(asdict(case))
    ingest = IngestConfig()
    result = {
        "command": COMMAND + "".join(f" --{k} {v}" for k, v in (("kills", args.kills), ("seed", args.seed),
                                                                    ("n", args.n), ("load", args.load))
                                     if v != ap.get_default(k)),
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "n": args.n, "seed": args.seed, "load": args.load,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "omp_num_threads": os.environ.get("OMP_NUM_THREADS")},
        "config": {"stage_every": ingest.stage_every, "stage_seconds": ingest.stage_seconds},
        "reference": {k: v for k, v in ref.items() if k not in ("ids", "vectors", "timeline")},
        "kills": cases, "worst_lost_s": max(c["lost_s"] for c in cases),
        "problems": sum(len(c["problems"]) for c in cases), "seconds": round(time.time() - t0, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kill-loss.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    write_section(args.out / "reliability.md", markdown(result))
    print(f"worst loss {result['worst_lost_s']} s; problems {result['problems']}; {result['seconds']} s")
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
