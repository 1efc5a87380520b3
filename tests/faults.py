"""Fault-injection machinery of the fault campaign (tests/test_faults.py, benchmarks/reliability.py).

Everything here runs amsrag for real: `amsrag` subprocesses killed with SIGKILL, processes that
`os._exit` in the middle of an OS call (a crash between two steps of a write), file writes that fail
with ENOSPC past a byte budget (or a real, full tmpfs where mounting is allowed), writer and reader
processes racing on one index, and `amsrag serve` under closed-loop HTTP clients. Nothing of amsrag is
mocked: the hooks sit at the OS/library boundary (os.*, open, shutil.rmtree, tempfile.mkstemp,
sqlite3 COMMIT) and are installed only in the child processes that are meant to fail.

The module doubles as the entry point of those child processes:

    python tests/faults.py cli -- index add FILE --index DIR     # the amsrag CLI under $AMSRAG_FAULTS
    python tests/faults.py api add|delete --index DIR --records F --vectors V   # one write, vectors given
    python tests/faults.py writer|reader ...                     # the concurrency case

$AMSRAG_FAULTS is JSON: {"root": DIR, "trace": FILE, "crash_before": N, "enospc_after": BYTES}:
events under `root` are appended to `trace` as they happen; the process exits with CRASH_RC just
before event N; writes under `root` fail with ENOSPC once BYTES have been written.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import contextlib
import errno
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SLICE = ROOT / "tests" / "fixtures" / "retrieval_slice"
HERE = Path(__file__).resolve()
FAULTS_ENV = "AMSRAG_FAULTS"
CRASH_RC = 86  # the exit status of an injected crash (os._exit: no cleanup runs, as with a power cut)
RETRIEVERS = ("bm25", "dense", "graph")
TEMP_MARKERS = (".tmp",)
READER_PAUSE_S = 0.2  # a reader's pause between queries: U(0, this)
READER_REOPEN_EVERY = 5  # a reopening reader opens the index afresh for every this many queries
WRITER_PAUSE_S = 0.5  # a writer's pause between transactions: U(0, this) (back to back, one process
# re-takes the lock it just released before a waiting one polls again: the others starve)


# ============================================================================ processes
def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every child: this checkout's src first on the path, 1 thread per process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.pop(FAULTS_ENV, None)
    env.update(extra or {})
    return env


def amsrag(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "amsrag.cli", *map(str, args)]


def helper(*args: str | Path) -> list[str]:
    """A child process running this module's entry point."""
    return [sys.executable, str(HERE), *map(str, args)]


def run(argv: Sequence[str], timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env or child_env())


def index_commands() -> set[str]:
    """The `amsrag index` subcommands this checkout has (sync and check are newer than the campaign)."""
    from amsrag.cli.index import index_app

    names = set()
    for c in index_app.registered_commands:
        names.add(c.name or (c.callback.__name__.removeprefix("index_") if c.callback else ""))
    return names


@dataclass
class Killed:
    """A child killed with SIGKILL after `delay_s` (or one that finished first)."""

    delay_s: float
    finished: bool  # exited on its own before the kill
    returncode: int
    seconds: float
    stdout: str
    stderr: str


def kill_after(argv: Sequence[str], delay_s: float, env: dict[str, str] | None = None,
               timeout: float = 300) -> Killed:
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, text=True, env=env or child_env(),
                                start_new_session=True)
        finished = True
        try:
            proc.wait(timeout=delay_s)
        except subprocess.TimeoutExpired:
            finished = False
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)
        out.seek(0)
        err.seek(0)
        return Killed(delay_s, finished, proc.returncode, time.perf_counter() - t, out.read(), err.read())


# ============================================================================ passages and indexes
def slice_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SLICE / "passages.jsonl").read_text("utf-8").splitlines()]


def slice_questions() -> list[str]:
    return [json.loads(line)["question"] for line in (SLICE / "questions.jsonl").read_text("utf-8").splitlines()]


def passages_of(records: Sequence[dict[str, Any]]) -> list[Any]:
    from amsrag.types import Passage

    return [Passage(id=r["id"], title=r["title"], text=r["text"], doc_id=r.get("doc_id", r["id"]),
                    metadata=r.get("metadata", {})) for r in records]


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def copy_index(src: Path, dest: Path) -> Path:
    """A copy of an index no one is writing (the WAL is copied: an open index may hold commits there)."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    return dest


def build_index(path: Path, records: Sequence[dict[str, Any]], vectors: Any = None) -> Path:
    """An embedded index of `records` (vectors given: no embedding)."""
    from amsrag.store import EmbeddedIndex

    with EmbeddedIndex.create(path) as idx:
        idx.add(passages_of(records), vectors=vectors)
    return path


def embed_records(records: Sequence[dict[str, Any]]) -> Any:
    """The stored vectors of `records` (built once through the real embedding path)."""
    import numpy as np

    from amsrag.store import EmbeddedIndex

    with tempfile.TemporaryDirectory() as tmp, EmbeddedIndex.create(Path(tmp) / "i") as idx:
        ps = passages_of(records)
        idx.add(ps)
        rows = idx.rows_for_ids([p.id for p in ps])
        return np.asarray(idx.vectors_for_rows([rows[p.id] for p in ps]))


# ============================================================================ state and consistency
@dataclass
class RawState:
    """What is on disk, read without amsrag (and so without repairing anything)."""

    ids: set[str]
    docs: dict[str, frozenset[tuple[str, str]]]  # doc_id -> {(passage id, content hash)}
    sqlite_generation: int
    manifest_generation: int | None
    component_dirs: dict[str, str | None]
    dirs: list[str]
    temp_files: list[str]

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def manifest_behind(self) -> bool:
        return self.manifest_generation != self.sqlite_generation

    def orphans(self) -> list[str]:
        """Derived-index directories the manifest does not name (left by a failed or killed write)."""
        current = {d for d in self.component_dirs.values() if d}
        return sorted(d for d in self.dirs if d.split(".g")[0] in RETRIEVERS and d not in current)

    def leftovers(self) -> list[str]:
        return sorted(set(self.orphans()) | set(self.temp_files))


def raw_state(path: Path) -> RawState:
    conn = sqlite3.connect(f"file:{path / 'passages.sqlite'}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT id, doc_id, content_hash FROM passages").fetchall()
        ids = {r[0] for r in rows}
        by_doc: dict[str, set[tuple[str, str]]] = {}
        for pid, doc, h in rows:
            by_doc.setdefault(doc, set()).add((pid, h))
        gen = int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
    finally:
        conn.close()
    manifest = json.loads((path / "manifest.json").read_text("utf-8"))
    dirs = sorted(d.name for d in path.iterdir() if d.is_dir())
    temps = sorted(str(f.relative_to(path)) for f in path.rglob("*") if any(m in f.name for m in TEMP_MARKERS))
    return RawState(ids, {d: frozenset(v) for d, v in by_doc.items()}, gen, manifest.get("generation"),
                    {n: c.get("dir") for n, c in manifest.get("components", {}).items()}, dirs, temps)


class Inconsistent(AssertionError):
    pass


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise Inconsistent(what)


_ENCODER: list[Any] = []


def shared_encoder() -> Any:
    """One encoder for every check in this process (loading the model per check would dominate)."""
    if not _ENCODER:
        from amsrag.config import AmsragConfig
        from amsrag.embed.encoder import MiniLMEncoder

        _ENCODER.append(MiniLMEncoder(AmsragConfig().embedding))
    return _ENCODER[0]


def check_index(path: Path, expect_ids: set[str] | None = None, cli_check: bool = False) -> dict[str, Any]:
    """Open the index (the next writer repairs a commit-without-manifest state) and verify it:
    passages = the SQLite rows = every derived index's rows, manifest generation = SQLite generation,
    every component directory present, every retriever answers (BM25 finds a stored passage by its own
    words), the index's own `check()` finds nothing (what `amsrag index check` runs: checksums, norms,
    stored vectors), and with `cli_check` the `amsrag index check --json` command exits 0. Raises
    Inconsistent."""
    from amsrag.retrievers import retriever_for
    from amsrag.store import EmbeddedIndex

    facts: dict[str, Any] = {}
    with EmbeddedIndex.open(path) as idx:
        idx._encoder = shared_encoder()  # the same model the index was built with (checked by open)
        stored = {r.id for r in idx.table.iter_rows()}
        rows = set(idx.stored_rows())
        facts.update(passages=len(idx), generation=idx.manifest["generation"])
        _require(len(idx) == idx.table.count() == len(stored), f"len {len(idx)} != SQLite {idx.table.count()}")
        _require(idx.manifest["generation"] == idx.table.generation,
                 f"manifest generation {idx.manifest['generation']} != SQLite {idx.table.generation} after open")
        if expect_ids is not None:
            _require(stored == expect_ids, f"stored ids differ from the committed state: "
                                           f"{len(stored - expect_ids)} extra, {len(expect_ids - stored)} missing")
        for name in RETRIEVERS:
            d = idx.manifest["components"][name]["dir"]
            _require(d is None or (path / d).is_dir(), f"{name}: manifest names {d}, which is missing")
            _require(idx.manifest["components"][name]["n"] == len(stored) or d is None,
                     f"{name}: manifest n {idx.manifest['components'][name]['n']} != {len(stored)}")
        _require(set(idx.bm25_index.rows.tolist()) == rows, "bm25 rows != stored rows")
        vec_rows = set(int(r) for r in getattr(idx.vector_index, "rows", []))
        _require(vec_rows == rows, f"dense rows ({len(vec_rows)}) != stored rows ({len(rows)})")
        if stored:
            probe = idx.passages_by_rows([min(rows)])[0]
            query = f"{probe.title} {' '.join(probe.text.split()[:12])}"
            vec = idx.encoder.encode_query(query)
            for name in RETRIEVERS:
                hits = retriever_for(idx, name).search(query, 5, vec)
                _require(bool(hits), f"{name} returned no hits for a stored passage's words")
                if name == "bm25":
                    _require(probe.id in [h.id for h in hits], f"bm25 does not find {probe.id} by its own words")
        facts["ids"] = stored
        if hasattr(idx, "check"):  # the checks `amsrag index check` runs, in process
            report = idx.check()
            facts["check_problems"] = list(report.problems)
            _require(report.ok, f"index check: {'; '.join(report.problems)}")
    if cli_check and "check" in index_commands():
        proc = run(amsrag("index", "check", "--index", path, "--json"), timeout=300)
        facts["index_check"] = proc.returncode
        _require(proc.returncode == 0,
                 f"`amsrag index check` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return facts


# ============================================================================ hooks (child processes only)
class _Hooks:
    """Trace, crash and ENOSPC at the OS boundary of a child process (see the module docstring)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.root = os.path.realpath(spec["root"])
        self.trace = spec.get("trace")
        self.crash_before = spec.get("crash_before")
        self.free = spec.get("enospc_after")
        self.n = 0
        self.armed = spec.get("armed", True)
        self.written = 0

    def mine(self, p: Any) -> bool:
        try:
            return os.path.realpath(os.fspath(p)).startswith(self.root)
        except TypeError:
            return False

    def name(self, p: Any) -> str:
        """The path under the index, with mkstemp's random part masked (the same step in every run)."""
        rel = os.path.relpath(os.path.realpath(os.fspath(p)), self.root)
        return re.sub(r"(\.[^/]+?\.(?:json|npz))\.[^/.]+\.tmp$", r"\1.*.tmp", rel)

    def event(self, what: str) -> None:
        if not self.armed:
            return
        if self.crash_before is not None and self.n == self.crash_before:
            self._log({"n": self.n, "event": what, "crash": True})
            os._exit(CRASH_RC)
        self._log({"n": self.n, "event": what})
        self.n += 1

    def _log(self, rec: dict[str, Any]) -> None:
        if self.trace:
            fd = os.open(self.trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (json.dumps(rec) + "\n").encode())
            finally:
                os.close(fd)

    def take(self, n: int) -> int:
        if not self.armed:
            return n
        self.written += n
        if self.free is None:
            return n
        ok = max(0, min(n, self.free))
        self.free -= ok
        return ok


HOOKS: _Hooks | None = None


class _BudgetFile:
    """A file whose writes fail with ENOSPC once the process's byte budget is spent (a full disk)."""

    def __init__(self, f: Any, hooks: _Hooks, name: str) -> None:
        self._f, self._hooks, self._name = f, hooks, name

    def write(self, data: Any) -> int:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(memoryview(data).cast("B"))
        ok = self._hooks.take(len(raw))
        if ok < len(raw):
            if ok:
                self._f.write(raw[:ok] if not isinstance(data, str) else raw[:ok].decode("utf-8", "ignore"))
            self._hooks._log({"enospc": self._hooks.name(self._name)})
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._name)
        return self._f.write(data)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._f, attr)

    def __enter__(self) -> _BudgetFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._f)


def install_hooks(spec: dict[str, Any]) -> _Hooks:
    global HOOKS
    hooks = HOOKS = _Hooks(spec)
    real_open, real_fdopen = builtins.open, os.fdopen
    real = {n: getattr(os, n) for n in ("rename", "replace", "fsync", "mkdir", "unlink", "rmdir")}
    real_rmtree, real_mkstemp, real_connect = shutil.rmtree, tempfile.mkstemp, sqlite3.connect

    def writing(mode: str) -> bool:
        return any(c in mode for c in "wax+")

    def open_(file: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
        f = real_open(file, mode, *a, **k)
        if isinstance(file, int) or not writing(mode) or not hooks.mine(file):
            return f
        hooks.event(f"open-w {hooks.name(file)}")
        return _BudgetFile(f, hooks, os.fspath(file))

    def fdopen(fd: int, mode: str = "r", *a: Any, **k: Any) -> Any:
        f = real_fdopen(fd, mode, *a, **k)
        path = os.readlink(f"/proc/self/fd/{fd}")
        if not writing(mode) or not hooks.mine(path):
            return f
        hooks.event(f"open-w {hooks.name(path)}")
        return _BudgetFile(f, hooks, path)

    def two(name: str) -> Callable[..., Any]:
        def op(src: Any, dst: Any, *a: Any, **k: Any) -> Any:
            if hooks.mine(dst):
                hooks.event(f"{name} {hooks.name(src)} -> {hooks.name(dst)}")
            return real[name](src, dst, *a, **k)
        return op

    def one(name: str) -> Callable[..., Any]:
        def op(p: Any, *a: Any, **k: Any) -> Any:
            if not isinstance(p, int) and hooks.mine(p):
                hooks.event(f"{name} {hooks.name(p)}")
            return real[name](p, *a, **k)
        return op

    def fsync(fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if hooks.mine(path):
            hooks.event(f"fsync {hooks.name(path)}")
        real["fsync"](fd)

    def rmtree(p: Any, *a: Any, **k: Any) -> Any:
        if hooks.mine(p):
            hooks.event(f"rmtree {hooks.name(p)}" + ("" if os.path.exists(p) else " (absent)"))
        return real_rmtree(p, *a, **k)

    def mkstemp(*a: Any, **k: Any) -> Any:
        fd, name = real_mkstemp(*a, **k)
        if hooks.mine(name):
            hooks.event(f"mkstemp {hooks.name(name)}")
        return fd, name

    class Conn(sqlite3.Connection):
        def execute(self, sql: str, *a: Any, **k: Any) -> Any:  # type: ignore[override]
            verb = sql.strip().upper()
            if verb in ("COMMIT", "BEGIN IMMEDIATE", "ROLLBACK"):
                hooks.event(f"sqlite {verb}")
                result = super().execute(sql, *a, **k)
                if verb == "COMMIT":
                    hooks.event("sqlite committed")
                return result
            return super().execute(sql, *a, **k)

    def connect(*a: Any, **k: Any) -> Any:
        k.setdefault("factory", Conn)
        return real_connect(*a, **k)

    builtins.open = io.open = open_  # type: ignore[assignment]
    os.fdopen = fdopen  # type: ignore[assignment]
    os.rename, os.replace = two("rename"), two("replace")
    os.mkdir, os.unlink, os.rmdir = one("mkdir"), one("unlink"), one("rmdir")
    os.fsync = fsync
    shutil.rmtree = rmtree  # type: ignore[assignment]
    tempfile.mkstemp = mkstemp  # type: ignore[assignment]
    sqlite3.connect = connect  # type: ignore[assignment]
    return hooks


def faults_env(root: Path, trace: Path | None = None, crash_before: int | None = None,
               enospc_after: int | None = None, armed: bool = True) -> dict[str, str]:
    spec = {"root": str(root), "trace": str(trace) if trace else None, "crash_before": crash_before,
            "enospc_after": enospc_after, "armed": armed}
    return child_env({FAULTS_ENV: json.dumps(spec)})


def read_trace(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ============================================================================ case 1: kill -9 at random points
@dataclass
class KillCase:
    """One kill: the command, its seed, where it died and what the index held afterwards."""

    command: str
    seed: int
    fraction: float
    delay_s: float
    finished: bool = False
    outcome: str = ""
    before: int = 0
    target: int = 0
    after_kill: int = -1
    after_rerun: int = -1
    leftovers_after_kill: list[str] = field(default_factory=list)
    leftovers_after_rerun: list[str] = field(default_factory=list)
    index_check: int | None = None  # exit status of `amsrag index check` after the kill (None: not available)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


@dataclass
class Plan:
    """A command over an index: its argv, the states a kill may leave, the ids it ends with."""

    argv: list[str]
    allowed: Callable[[RawState], bool]
    final: set[str]
    target: int
    exact: Callable[[RawState], bool] | None = None  # the final state, beyond its ids (default: the ids)
    # a rerun after the command had completed may refuse with this clear error (a delete of ids already gone)
    done_error: str | None = None


def plan_add(index: Path, work: Path, rng: random.Random, size: int = 10) -> Plan:
    before = raw_state(index).ids
    pool = [r for r in slice_records() if r["id"] not in before]
    batch = rng.sample(pool, min(size, len(pool)))
    f = write_jsonl(work / f"add-{rng.randrange(10**9)}.jsonl", batch)
    after = before | {r["id"] for r in batch}
    return Plan(amsrag("index", "add", f, "--index", index, "--quiet"), lambda st: st.ids in (before, after), after,
                len(after))


def plan_delete(index: Path, work: Path, rng: random.Random, size: int = 10) -> Plan:
    before = raw_state(index).ids
    gone = set(rng.sample(sorted(before), min(size, len(before) - 1)))
    after = before - gone
    return Plan(amsrag("index", "delete", *sorted(gone), "--index", index), lambda st: st.ids in (before, after),
                after, len(after), done_error="not in the index")


SYNC_NAME = "docs"  # the folder's declared name: documents are docs/FILE
SYNC_BATCH = 2  # [ingest] batch_passages of the sync index: a sync commits in several batches


def sync_folders(work: Path, records: Sequence[dict[str, Any]]) -> tuple[Path, Path]:
    """Two versions of a folder of Markdown files (one slice passage each): v2 deletes 2 files of v1,
    changes 3 and adds 3."""
    v1, v2 = work / "sync-v1", work / "sync-v2"
    if not v2.exists():
        for d in (v1, v2):
            d.mkdir(parents=True, exist_ok=True)
        page = lambda r: f"# {r['title']}\n\n{r['text']}\n"  # noqa: E731
        for i in range(12):
            (v1 / f"page{i:02d}.md").write_text(page(records[i]), encoding="utf-8")
        for i in range(2, 12):
            (v2 / f"page{i:02d}.md").write_text(page(records[i + 10 if i in (2, 3, 4) else i]), encoding="utf-8")
        for i in range(12, 15):
            (v2 / f"page{i:02d}.md").write_text(page(records[i + 3]), encoding="utf-8")
    return v1, v2


def build_sync_base(path: Path, work: Path, records: Sequence[dict[str, Any]]) -> Path:
    """An index synced from the first version of the folder (commits in batches of SYNC_BATCH)."""
    from amsrag.config import AmsragConfig

    v1, _ = sync_folders(work, records)
    config = AmsragConfig()
    config.ingest.batch_passages = SYNC_BATCH
    from amsrag.store import EmbeddedIndex

    EmbeddedIndex.create(path, config).close()
    proc = run(amsrag("index", "sync", f"{SYNC_NAME}={v1}", "--index", path, "--quiet"))
    if proc.returncode != 0:
        raise RuntimeError(f"sync of the base folder failed:\n{proc.stderr}")
    return path


_SYNC_FINAL: dict[str, dict[str, frozenset[tuple[str, str]]]] = {}


def plan_sync(index: Path, work: Path, rng: random.Random) -> Plan:
    """`amsrag index sync docs=v2`: each document must hold its old passages or its new ones, never a
    mix (one transaction per batch of whole files; the deletions go with the first batch)."""
    _, v2 = sync_folders(work, slice_records())
    argv = amsrag("index", "sync", f"{SYNC_NAME}={v2}", "--index", index, "--quiet")
    before = raw_state(index).docs
    key = str(work)
    if key not in _SYNC_FINAL:  # the state an uninterrupted sync ends in
        ref = copy_index(index, work / "sync-reference")
        proc = run([*argv[:-3], "--index", str(ref), "--quiet"])
        if proc.returncode != 0:
            raise RuntimeError(f"reference sync failed:\n{proc.stderr}")
        _SYNC_FINAL[key] = raw_state(ref).docs
        shutil.rmtree(ref, ignore_errors=True)
    after = _SYNC_FINAL[key]

    def allowed(st: RawState) -> bool:
        return (set(st.docs) <= set(before) | set(after)
                and all(st.docs.get(d) in (before.get(d), after.get(d)) for d in set(before) | set(after)))

    final_ids = {pid for v in after.values() for pid, _ in v}
    return Plan(argv, allowed, final_ids, len(final_ids), exact=lambda st: st.docs == after)


PLANS: dict[str, Callable[[Path, Path, random.Random], Plan]] = {"add": plan_add, "delete": plan_delete,
                                                                  "sync": plan_sync}


def calibrate(command: str, base: Path, work: Path, seed: int = 0) -> float:
    """Wall time of one uninterrupted run of `command` on a copy of `base` (the kill window)."""
    idx = copy_index(base, work / f"calibrate-{command}")
    plan = PLANS[command](idx, work, random.Random(seed))
    t = time.perf_counter()
    proc = run(plan.argv)
    if proc.returncode != 0:
        raise RuntimeError(f"calibration run of {command} failed:\n{proc.stderr}")
    return time.perf_counter() - t


def kill_fraction(seed: int) -> float:
    """Where seed `seed` kills: this fraction of the measured run time (U(0, 1.1): past the end too)."""
    return random.Random(seed).uniform(0.0, 1.1)


def kill_once(command: str, seed: int, base: Path, work: Path, window_s: float) -> KillCase:
    """Copy `base`, run `command` and SIGKILL it after U(0, 1.1) x `window_s` (seeded), then: the
    on-disk state must be the state before or after (all or nothing), the index must open and pass
    `check_index`, and a rerun must complete with exactly the final state."""
    t = time.perf_counter()
    rng = random.Random(seed)
    fraction = kill_fraction(seed)
    rng.random()
    idx = copy_index(base, work / f"{command}-{seed}")
    plan = PLANS[command](idx, work, rng)
    case = KillCase(command, seed, round(fraction, 4), round(fraction * window_s, 3),
                    before=raw_state(idx).count, target=plan.target)
    before_gen = raw_state(idx).sqlite_generation
    killed = kill_after(plan.argv, case.delay_s)
    case.finished = killed.finished
    if killed.finished and killed.returncode != 0:
        case.problems.append(f"exited {killed.returncode} before the kill: {killed.stderr[-2000:]}")
    state = raw_state(idx)
    case.after_kill = state.count
    case.leftovers_after_kill = state.leftovers()
    if not plan.allowed(state):
        case.problems.append(f"after the kill the index holds {state.count} passages: not a committed state "
                             f"(before: {case.before}, after: {plan.target}, all or nothing per transaction)")
    if killed.finished:
        case.outcome = "finished before the kill"
    elif state.sqlite_generation == before_gen:
        case.outcome = "killed before the commit (rolled back)"
    elif state.manifest_behind:
        case.outcome = "killed between a commit and its manifest"
    elif state.ids != plan.final or (plan.exact is not None and not plan.exact(state)):
        case.outcome = "killed between two committed batches"
    else:
        case.outcome = "killed after the manifest swap"
    try:
        facts = check_index(idx, state.ids, cli_check=True)
        case.index_check = facts.get("index_check")
    except Inconsistent as exc:
        case.problems.append(f"after the kill: {exc}")
    except Exception as exc:
        case.problems.append(f"after the kill the index does not open: {type(exc).__name__}: {exc}")
    already = raw_state(idx).ids == plan.final
    rerun = run(plan.argv)
    refused = (already and plan.done_error is not None and rerun.returncode == 2
               and plan.done_error in rerun.stderr and "Traceback" not in rerun.stderr)
    if rerun.returncode != 0 and not refused:
        case.problems.append(f"rerun failed ({rerun.returncode}): {rerun.stderr[-2000:]}")
    state = raw_state(idx)
    case.after_rerun = state.count
    case.leftovers_after_rerun = state.leftovers()
    if state.ids != plan.final or (plan.exact is not None and not plan.exact(state)):
        case.problems.append(f"after the rerun: {state.count} passages, expected exactly {plan.target}"
                             + ("" if state.ids != plan.final else " (same ids, other content)"))
    try:
        check_index(idx, plan.final, cli_check=False)
    except Exception as exc:
        case.problems.append(f"after the rerun: {type(exc).__name__}: {exc}")
    case.seconds = round(time.perf_counter() - t, 2)
    shutil.rmtree(idx, ignore_errors=True)
    return case


# ============================================================================ case 2: disk full
@dataclass
class DiskFullCase:
    how: str  # "injected" (ENOSPC past a byte budget) or "tmpfs" (a real full file system)
    label: str
    budget: int
    returncode: int = 0
    failed_at: str = ""
    message: str = ""
    traceback_shown: bool = False
    names_the_problem: bool = False
    count_after: int = -1
    committed: bool = False  # ENOSPC came after the SQLite commit: the add is in, the next open repairs
    intact: bool = False
    leftovers: list[str] = field(default_factory=list)
    later_add_ok: bool = False
    leftovers_after_later_add: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


SPACE_WORDS = ("no space left", "disk full", "disk is full", "enospc", "out of space", "not enough space")
MISDIAGNOSES = ("another process is writing", "being written by another process")


def names_disk_full(stderr: str) -> bool:
    """The error says the disk is full, and does not blame something else (a busy index, another writer)."""
    text = stderr.lower()
    return any(w in text for w in SPACE_WORDS) and not any(w in text for w in MISDIAGNOSES)


def _error_facts(case: DiskFullCase, proc: subprocess.CompletedProcess) -> None:
    case.returncode = proc.returncode
    case.traceback_shown = "Traceback (most recent call last)" in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "━" not in ln]
    case.message = "\n".join(lines[-3:])[-600:]
    case.names_the_problem = names_disk_full(proc.stderr)


def _after_disk_full(case: DiskFullCase, idx: Path, before: set[str], after: set[str],
                     later: Callable[[], Any]) -> None:
    """All or nothing: the state before the add, or (ENOSPC past the SQLite commit) the state after it."""
    state = raw_state(idx)
    case.count_after = state.count
    case.committed = state.ids == after
    case.leftovers = state.leftovers()
    if state.ids not in (before, after):
        case.problems.append(f"after ENOSPC the index holds {state.count} passages: neither before nor after")
    try:
        check_index(idx, state.ids, cli_check=True)
        case.intact = True
    except Exception as exc:
        case.problems.append(f"index not intact after ENOSPC: {type(exc).__name__}: {exc}")
    try:
        proc = later()
    except Exception as exc:
        proc = subprocess.CompletedProcess([], 1, "", f"{type(exc).__name__}: {exc}")
    state = raw_state(idx)
    case.later_add_ok = proc.returncode == 0 and state.ids == after
    case.leftovers_after_later_add = state.leftovers()
    if not case.later_add_ok:
        case.problems.append(f"a later add failed ({proc.returncode}): {proc.stderr[-1500:]}")


def disk_full_injected(base: Path, work: Path, budget: int, label: str,
                       batch: Sequence[dict[str, Any]]) -> DiskFullCase:
    """`amsrag index add` whose writes under the index fail with ENOSPC past `budget` bytes."""
    case = DiskFullCase("injected", label, budget)
    idx = copy_index(base, work / f"enospc-{label}")
    f = write_jsonl(work / f"enospc-{label}.jsonl", batch)
    before = raw_state(idx).ids
    trace = work / f"enospc-{label}.trace"
    trace.unlink(missing_ok=True)
    proc = run(helper("cli", "--", "index", "add", f, "--index", idx),
               env=faults_env(idx, trace=trace, enospc_after=budget))
    case.failed_at = next((e["enospc"] for e in read_trace(trace) if "enospc" in e), "")
    _error_facts(case, proc)
    if proc.returncode == 0:
        case.problems.append("the add succeeded although the disk was full")
    def later() -> subprocess.CompletedProcess:  # the same add with room on the disk (in process: cheaper)
        _write_in_process("add", idx, f, None)
        return subprocess.CompletedProcess([], 0, "", "")

    _after_disk_full(case, idx, before, before | {r["id"] for r in batch}, later)
    shutil.rmtree(idx, ignore_errors=True)
    return case


def bytes_written_by_add(base: Path, work: Path, batch: Sequence[dict[str, Any]]) -> tuple[int, list[str]]:
    """Bytes an uninterrupted `index add` writes under the index through Python file objects, and its events."""
    idx = copy_index(base, work / "enospc-measure")
    f = write_jsonl(work / "enospc-measure.jsonl", batch)
    trace = work / "enospc-measure.trace"
    trace.unlink(missing_ok=True)
    proc = run(helper("cli", "--measure", "--", "index", "add", f, "--index", idx), env=faults_env(idx, trace=trace))
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    events = read_trace(trace)
    written = next(e["written"] for e in events if "written" in e)
    shutil.rmtree(idx, ignore_errors=True)
    return written, [e["event"] for e in events if "event" in e]


def can_mount_tmpfs() -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as d:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d], capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", d], capture_output=True)
        return ok


@contextlib.contextmanager
def tmpfs(where: Path, size_kb: int) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def disk_full_tmpfs(base: Path, work: Path, free_kb: int, batch: Sequence[dict[str, Any]]) -> DiskFullCase:
    """The index on a real tmpfs with `free_kb` left (a filler file takes the rest); SQLite's writes fail too."""
    label = f"tmpfs-{free_kb}k"
    case = DiskFullCase("tmpfs", label, free_kb * 1024)
    f = write_jsonl(work / f"{label}.jsonl", batch)
    size_kb = sum(p.stat().st_size for p in base.rglob("*") if p.is_file()) // 1024 + 2048
    with tmpfs(work / label, size_kb) as mnt:
        idx = copy_index(base, mnt / "index")
        before = raw_state(idx).ids
        filler = mnt / "filler"
        st = os.statvfs(mnt)
        fill = st.f_bavail * st.f_frsize - free_kb * 1024
        with builtins.open(filler, "wb") as fh:
            fh.truncate(0)
            chunk = b"\0" * 65536
            while fill > 0:
                try:
                    fh.write(chunk[: min(fill, 65536)])
                except OSError:
                    break
                fill -= 65536
        proc = run(amsrag("index", "add", f, "--index", idx))
        _error_facts(case, proc)
        if proc.returncode == 0:
            case.problems.append(f"the add succeeded with {free_kb} kB free")

        def later() -> subprocess.CompletedProcess:
            filler.unlink()
            return run(amsrag("index", "add", f, "--index", idx))

        _after_disk_full(case, idx, before, before | {r["id"] for r in batch}, later)
    return case


# ============================================================================ case 3: power cut of the write
@dataclass
class CrashCase:
    op: str
    n: int
    event: str
    state_on_disk: str = ""
    count_after: int = -1
    expected: int = -1
    leftovers_after_reopen: list[str] = field(default_factory=list)
    leftovers_after_next_write: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def api_write(op: str, index: Path, records: Path, vectors: Path | None,
              env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = helper("api", op, "--index", index, "--records", records, *(["--vectors", vectors] if vectors else []))
    return run(argv, env=env)


def trace_write(op: str, base: Path, work: Path, records: Path, vectors: Path | None) -> list[str]:
    """The events of one uninterrupted write: the steps a crash is injected between."""
    idx = copy_index(base, work / f"trace-{op}")
    trace = work / f"trace-{op}.jsonl"
    trace.unlink(missing_ok=True)
    proc = api_write(op, idx, records, vectors, faults_env(idx, trace=trace, armed=False))
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    shutil.rmtree(idx, ignore_errors=True)
    return [e["event"] for e in read_trace(trace)]


def crash_points(events: Sequence[str], first: str | None = None) -> list[tuple[int, str]]:
    """(n, event) to crash before: every step, except the one right after a no-op and the fsyncs of the
    staged files (for a process crash both leave the same files as the crash one step earlier; from the
    COMMIT on every fsync is kept); from the first event starting with `first` when given."""
    points = []
    start = next((i for i, e in enumerate(events) if first and e.startswith(first)), 0)
    commit = events.index("sqlite COMMIT") if "sqlite COMMIT" in events else len(events)
    for n in range(start, len(events)):
        if n > 0 and events[n - 1].endswith("(absent)"):
            continue
        if n < commit and events[n].startswith("fsync "):
            continue  # staging: a process crash before an fsync leaves what the crash before the last step did
        points.append((n, events[n]))
    return points


def crash_campaign(op: str, base: Path, work: Path, records: Path, vectors: Path | None, before: set[str],
                   after: set[str], first: str | None = None, workers: int = 2) -> list[CrashCase]:
    """`crash_once` at every crash point of `op` (independent copies, `workers` at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    points = crash_points(trace_write(op, base, work, records, vectors), first)
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda p: crash_once(op, p[0], p[1], base, work, records, vectors, before, after),
                             points))


def crash_once(op: str, n: int, event: str, base: Path, work: Path, records: Path, vectors: Path | None,
               before: set[str], after: set[str]) -> CrashCase:
    """Crash (os._exit) just before event `n` of the write; then reopen, check, write again."""
    case = CrashCase(op, n, event)
    idx = copy_index(base, work / f"crash-{op}-{n}")
    trace = work / f"crash-{op}-{n}.jsonl"
    trace.unlink(missing_ok=True)
    proc = api_write(op, idx, records, vectors, faults_env(idx, trace=trace, crash_before=n, armed=False))
    hit = [e for e in read_trace(trace) if e.get("crash")]
    if proc.returncode != CRASH_RC or not hit or hit[0]["event"] != event:
        case.problems.append(f"the crash did not land on {event!r} (rc {proc.returncode}, {hit}): {proc.stderr[-800:]}")
    state = raw_state(idx)
    committed = after if state.sqlite_generation != raw_state(base).sqlite_generation else before
    case.state_on_disk = ("rolled back" if committed is before else
                          "committed, manifest behind" if state.manifest_behind else "committed and published")
    if state.ids != committed:
        case.problems.append(f"on disk after the crash: {state.count} passages, neither before nor after")
    case.expected = len(committed)
    with _IN_PROCESS:
        _reopen_and_write_again(case, idx, committed, work, records, vectors, before, after)
    shutil.rmtree(idx, ignore_errors=True)
    return case


# The crashing writes run in subprocesses, in parallel; what runs in this process runs one case at a time.
# CPython 3.11 keeps the `ast` module's recursion depth in shared state (gh-106905), and its tracebacks
# call `ast.parse`: two threads formatting an exception at once fail with "SystemError: AST constructor
# recursion depth mismatch", which is the interpreter's race, not the index's.
_IN_PROCESS = threading.Lock()


def _reopen_and_write_again(case: CrashCase, idx: Path, committed: set[str], work: Path, records: Path,
                            vectors: Path | None, before: set[str], after: set[str]) -> None:
    op, n = case.op, case.n
    try:
        facts = check_index(idx, committed)
        case.count_after = facts["passages"]
    except Exception as exc:
        case.problems.append(f"reopening after the crash: {type(exc).__name__}: {exc}")
    case.leftovers_after_reopen = raw_state(idx).leftovers()
    # the interrupted write again (a no-op when it had committed), then one more real write: what the
    # crash left behind must be gone once a write has run
    try:
        _write_in_process(op, idx, records, vectors)
        state = raw_state(idx)
        if state.ids != after:
            case.problems.append(f"after rerunning the write: {state.count} passages, expected {len(after)}")
        extra = [r for r in slice_records() if r["id"] not in after and r["id"] not in before][:2]
        _write_in_process("add", idx, write_jsonl(work / f"crash-{op}-{n}-extra.jsonl", extra), None)
        state = raw_state(idx)
        if state.ids != after | {r["id"] for r in extra}:
            case.problems.append(f"after one more write: {state.count} passages, expected {len(after) + len(extra)}")
        case.leftovers_after_next_write = state.leftovers()
    except Exception as exc:
        case.problems.append(f"writing after the crash: {type(exc).__name__}: {exc}")


def _write_in_process(op: str, index: Path, records: Path, vectors: Path | None) -> None:
    import numpy as np

    from amsrag.store import EmbeddedIndex

    recs = [json.loads(line) for line in records.read_text("utf-8").splitlines()]
    with EmbeddedIndex.open(index) as idx:
        idx._encoder = shared_encoder()
        if op == "add":
            idx.add(passages_of(recs), vectors=np.load(vectors) if vectors else None)
        else:
            present = [r["id"] for r in recs if idx.get(r["id"]) is not None]
            if present:
                idx.delete(present)


def _api_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("op", choices=["add", "delete"])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--vectors", type=Path)
    a = ap.parse_args(argv)
    import numpy as np

    from amsrag.store import EmbeddedIndex

    records = [json.loads(line) for line in a.records.read_text("utf-8").splitlines()]
    with EmbeddedIndex.open(a.index) as idx:
        if HOOKS is not None:
            HOOKS.armed = True
        if a.op == "add":
            vectors = np.load(a.vectors) if a.vectors else None
            report = idx.add(passages_of(records), vectors=vectors)
            print(json.dumps({"added": report.added, "passages": len(idx)}))
        else:
            report = idx.delete([r["id"] for r in records])
            print(json.dumps({"deleted": report.deleted, "passages": len(idx)}))
    return 0


# ============================================================================ case 4: concurrent writers and readers
def _ready_and_wait(start: Path, me: Path, timeout: float = 600) -> float:
    """Say this child is ready, wait for the parent's start file; returns the deadline it holds."""
    Path(f"{me}.ready").touch()
    deadline = time.time() + timeout
    while not start.exists():
        if time.time() > deadline:
            raise TimeoutError("the start signal never came")
        time.sleep(0.05)
    return float(start.read_text())


def _writer_main(argv: list[str]) -> int:
    """Add and delete this writer's own passages (stored vectors) until the deadline; log each commit."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--vectors", type=Path, required=True)
    ap.add_argument("--start", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--log", type=Path, required=True)
    a = ap.parse_args(argv)
    import numpy as np

    from amsrag.store import EmbeddedIndex

    rng = random.Random(a.seed)
    records = [json.loads(line) for line in a.records.read_text("utf-8").splitlines()]
    vectors = np.load(a.vectors)
    mine = {r["id"]: (p, vectors[i]) for i, (r, p) in enumerate(zip(records, passages_of(records), strict=True))}
    present: set[str] = set()
    with builtins.open(a.log, "a", encoding="utf-8") as log, EmbeddedIndex.open(a.index) as idx:
        until = _ready_and_wait(a.start, a.log)
        while time.time() < until:
            absent = sorted(set(mine) - present)
            t0 = time.time()
            try:
                if absent and (not present or rng.random() < 0.6):
                    ids = rng.sample(absent, rng.randint(1, min(4, len(absent))))
                    report = idx.add([mine[i][0] for i in ids], vectors=np.stack([mine[i][1] for i in ids]))
                    assert report.added == len(ids), f"added {report.added} of {len(ids)}"
                    present |= set(ids)
                    op = "add"
                else:
                    ids = rng.sample(sorted(present), rng.randint(1, min(4, len(present))))
                    report = idx.delete(ids)
                    assert report.deleted == len(ids), f"deleted {report.deleted} of {len(ids)}"
                    present -= set(ids)
                    op = "delete"
            except Exception as exc:
                log.write(json.dumps({"error": f"{type(exc).__name__}: {exc}", "tb": traceback.format_exc()}) + "\n")
                log.flush()
                return 1
            log.write(json.dumps({"op": op, "ids": ids, "t0": t0, "t1": time.time()}) + "\n")
            log.flush()
            time.sleep(rng.uniform(0.0, WRITER_PAUSE_S))
    return 0


def _reader_main(argv: list[str]) -> int:
    """Search every retriever until the deadline: reopening the index each time (as `amsrag search`
    does) or on one long-lived handle refreshed before each query (as the service does)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)  # JSON [[question, vector], ...]
    ap.add_argument("--start", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--mode", choices=["reopen", "refresh"], required=True)
    ap.add_argument("--log", type=Path, required=True)
    a = ap.parse_args(argv)
    import numpy as np

    from amsrag.retrievers import retriever_for
    from amsrag.store import EmbeddedIndex

    rng = random.Random(a.seed)
    queries = [(q, np.asarray(v, dtype=np.float32)) for q, v in json.loads(a.queries.read_text())]
    searches, errors, ms = 0, [], []
    EmbeddedIndex.open(a.index).close()  # imports and first loads done before the clock runs
    handle = EmbeddedIndex.open(a.index) if a.mode == "refresh" else None
    used = 0  # queries on the current handle
    until = _ready_and_wait(a.start, a.log)
    while time.time() < until:
        q, v = rng.choice(queries)
        t = time.perf_counter()
        try:
            if a.mode == "reopen" and (handle is None or used >= READER_REOPEN_EVERY):
                if handle is not None:
                    handle.close()
                handle, used = None, 0
                handle = EmbeddedIndex.open(a.index)
            assert handle is not None
            if a.mode == "refresh":
                handle.refresh()
            used += 1
            for name in RETRIEVERS:
                hits = retriever_for(handle, name).search(q, 5, v)
                if name == "dense" and len(handle) and not hits:  # (BM25 may share no term with the query)
                    raise AssertionError(f"{name}: no hits over {len(handle)} passages")
                for h in hits:  # every hit resolves to a stored passage
                    if handle.get(h.id) is None and handle.rows_for_ids([h.id]) == {}:
                        raise AssertionError(f"{name}: hit {h.id} is not stored")
            searches += 1
        except Exception as exc:
            errors.append({"error": f"{type(exc).__name__}: {exc}", "tb": traceback.format_exc()[-3000:]})
            if a.mode == "reopen":
                used = READER_REOPEN_EVERY  # open afresh after an error
        ms.append((time.perf_counter() - t) * 1000)
        time.sleep(rng.uniform(0.0, READER_PAUSE_S))  # 8 readers must not starve 4 writers of 2 cores
    if handle is not None:
        handle.close()
    a.log.write_text(json.dumps({"mode": a.mode, "searches": searches, "errors": errors, "ms": ms}))
    return 0


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """A child with its stderr in LOG.err (a file: 12 chatty children cannot block on full pipes)."""
    with builtins.open(f"{log}.err", "w") as err:  # the child keeps its own descriptor
        return subprocess.Popen(argv, env=child_env(), stdout=subprocess.DEVNULL, stderr=err, text=True)


@dataclass
class ConcurrencyResult:
    seconds: float
    writers: int
    readers: int
    commits: int
    adds: int
    deletes: int
    searches: int
    errors: list[str]
    expected: int
    stored: int
    lost: int
    extra: int
    reader_ms_p50: float = 0.0
    reader_ms_p99: float = 0.0
    timed_out: list[str] = field(default_factory=list)


def concurrency_run(base_records: Sequence[dict[str, Any]], base_vectors: Any,
                    parts: Sequence[Sequence[dict[str, Any]]], part_vectors: Sequence[Any], work: Path,
                    seconds: float, readers: int = 8,
                    seed: int = 4000) -> ConcurrencyResult:
    """len(parts) writer processes (disjoint passage sets) and `readers` reader processes for `seconds`."""
    import numpy as np

    idx = build_index(work / "concurrent", base_records, base_vectors)
    encoder = shared_encoder()
    qs = slice_questions()
    (work / "queries.json").write_text(json.dumps([[q, encoder.encode_query(q).tolist()] for q in qs]))
    start = work / "start"
    procs: list[tuple[str, subprocess.Popen, Path]] = []
    for w, (part, vecs) in enumerate(zip(parts, part_vectors, strict=True)):
        rec = write_jsonl(work / f"writer{w}.jsonl", part)
        np.save(work / f"writer{w}.npy", np.asarray(vecs))
        log = work / f"writer{w}.log"
        procs.append((f"writer{w}", _spawn(
            helper("writer", "--index", idx, "--records", rec, "--vectors", work / f"writer{w}.npy",
                   "--start", start, "--seed", seed + w, "--log", log), log), log))
    for r in range(readers):
        log = work / f"reader{r}.json"
        mode = "reopen" if r % 2 == 0 else "refresh"
        procs.append((f"reader{r}", _spawn(
            helper("reader", "--index", idx, "--queries", work / "queries.json", "--start", start,
                   "--seed", seed + 100 + r, "--mode", mode, "--log", log), log), log))
    ready_by = time.time() + 300  # the clock starts once every child has imported and opened the index
    while not all(Path(f"{log}.ready").exists() for _, _, log in procs):
        if time.time() > ready_by or any(p.poll() is not None for _, p, _ in procs):
            break
        time.sleep(0.1)
    until = time.time() + seconds
    tmp = work / "start.tmp"
    tmp.write_text(repr(until))
    os.replace(tmp, start)
    errors: list[str] = []
    timed_out: list[str] = []
    hard = until + 120  # bounded: a hung process is a failure, not a hung test
    for name, p, log in procs:
        try:
            p.wait(timeout=max(1.0, hard - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            timed_out.append(name)
        if p.returncode not in (0, None) and name not in timed_out:
            errors.append(f"{name} exited {p.returncode}: {Path(f'{log}.err').read_text()[-1500:]}")
    expected = {r["id"] for r in base_records}
    adds = deletes = searches = 0
    ms: list[float] = []
    for name, _, log in procs:
        if name.startswith("writer"):
            present: set[str] = set()
            for line in log.read_text().splitlines() if log.exists() else []:
                rec = json.loads(line)
                if "error" in rec:
                    errors.append(f"{name}: {rec['error']}\n{rec['tb'][-1500:]}")
                elif rec["op"] == "add":
                    present |= set(rec["ids"])
                    adds += 1
                else:
                    present -= set(rec["ids"])
                    deletes += 1
            expected |= present
        elif log.exists():
            rec = json.loads(log.read_text())
            searches += rec["searches"]
            ms += rec["ms"]
            errors += [f"{name} ({rec['mode']}): {e['error']}\n{e['tb'][-1500:]}" for e in rec["errors"]]
        else:
            errors.append(f"{name}: no report")
    stored = raw_state(idx).ids
    try:
        check_index(idx, expected)
    except Exception as exc:
        errors.append(f"final check: {type(exc).__name__}: {exc}")
    a = np.asarray(ms or [0.0])
    return ConcurrencyResult(seconds, len(parts), readers, adds + deletes, adds, deletes, searches, errors,
                             len(expected), len(stored), len(expected - stored), len(stored - expected),
                             round(float(np.percentile(a, 50)), 1), round(float(np.percentile(a, 99)), 1), timed_out)


# ============================================================================ case 5: service soak
@dataclass
class SoakResult:
    seconds: float
    clients: int
    requests: int
    by_status: dict[str, int]
    by_endpoint: dict[str, dict[str, float]]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    status_5xx: int
    status_429: int
    unexpected: list[str]
    passages_before: int
    passages_after: int
    request_timeout_s: float
    transport_errors: int = 0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(index: Path, port: int, timeout: float = 180) -> subprocess.Popen:
    import httpx

    env = child_env()
    env.pop("AMSRAG_API_KEYS", None)
    with builtins.open(index.parent / f"serve-{port}.log", "w") as log:  # the child keeps its own handle
        proc = subprocess.Popen(amsrag("serve", "--index", index, "--port", port), env=env,
                                stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"amsrag serve exited ({proc.returncode}): "
                               f"{(index.parent / f'serve-{port}.log').read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        time.sleep(0.25)
    proc.kill()
    raise RuntimeError("amsrag serve did not become healthy")


async def _soak_client(n: int, http: Any, questions: list[str], until: float, seed: int,
                       lat: dict[str, list[float]], status: Counter, unexpected: list[str]) -> None:
    rng = random.Random(seed + n)
    i = 0

    async def call(endpoint: str, method: str, path: str, ok: tuple[int, ...], **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            r = await http.request(method, path, **kw)
        except Exception as exc:
            status["transport_error"] += 1
            unexpected.append(f"{method} {path}: {type(exc).__name__}: {exc}")
            return None
        lat[endpoint].append((time.perf_counter() - t) * 1000)
        status[str(r.status_code)] += 1
        if r.status_code not in ok and r.status_code != 429:
            unexpected.append(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r

    while time.monotonic() < until:
        x = rng.random()
        i += 1
        q = rng.choice(questions)
        if x < 0.5:
            await call("retrieve", "POST", "/v1/retrieve", (200,), json={"query": q, "k": 5})
        elif x < 0.7:
            await call("ask", "POST", "/v1/ask", (200,), json={"query": q})
        else:  # a document's life: add, read back, delete, gone
            pid = f"soak-{n}-{i}"
            text = f"Soak test passage {n}.{i}: {q} The answer recorded by client {n} is number {i}."
            r = await call("documents_add", "POST", "/v1/documents", (200,),
                           json={"passages": [{"id": pid, "title": f"Soak {n} {i}", "text": text}]})
            if r is None or r.status_code != 200:
                continue
            r = await call("documents_get", "GET", f"/v1/documents/{pid}", (200,))
            if r is not None and r.status_code == 200 and r.json().get("text") != text:
                unexpected.append(f"GET {pid}: text differs from what was added")
            r = await call("documents_delete", "DELETE", f"/v1/documents/{pid}", (200,))
            while r is not None and r.status_code == 429:  # the passage must not stay behind
                await asyncio.sleep(0.5)
                r = await call("documents_delete", "DELETE", f"/v1/documents/{pid}", (200,))
            await call("documents_get", "GET", f"/v1/documents/{pid}", (404,))


def soak_run(index: Path, seconds: float, clients: int = 32, seed: int = 5000) -> SoakResult:
    """`amsrag serve` on a free loopback port, `clients` closed-loop httpx clients for `seconds`."""
    import httpx
    import numpy as np

    from amsrag.config import AmsragConfig

    port = free_port()
    proc = start_serve(index, port)
    url = f"http://127.0.0.1:{port}"
    timeout_s = AmsragConfig.load(index / "config.toml").serve.request_timeout_s
    try:
        before = httpx.get(f"{url}/healthz", timeout=10).json()["passages"]
        lat: dict[str, list[float]] = {k: [] for k in ("retrieve", "ask", "documents_add", "documents_get",
                                                          "documents_delete")}
        status: Counter = Counter()
        unexpected: list[str] = []

        async def main() -> None:
            limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients)
            async with httpx.AsyncClient(base_url=url, timeout=timeout_s + 30, limits=limits) as http:
                until = time.monotonic() + seconds
                await asyncio.gather(*(_soak_client(n, http, slice_questions(), until, seed, lat, status, unexpected)
                                       for n in range(clients)))

        t = time.perf_counter()
        asyncio.run(main())
        elapsed = time.perf_counter() - t
        after = httpx.get(f"{url}/healthz", timeout=30).json()["passages"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    every = np.asarray([v for vs in lat.values() for v in vs] or [0.0])
    pct = lambda a, p: round(float(np.percentile(np.asarray(a), p)), 1)  # noqa: E731
    return SoakResult(
        round(elapsed, 1), clients, int(sum(v for k, v in status.items() if k != "transport_error")), dict(status),
        {k: {"n": len(v), "p50_ms": pct(v, 50), "p99_ms": pct(v, 99)} for k, v in lat.items() if v},
        pct(every, 50), pct(every, 95), pct(every, 99), round(float(every.max()), 1),
        sum(v for k, v in status.items() if k.startswith("5")), status.get("429", 0), unexpected,
        before, after, timeout_s, status.get("transport_error", 0))


# ============================================================================ entry point of the children
def _cli_main(argv: list[str]) -> int:
    measure = "--measure" in argv
    args = argv[argv.index("--") + 1:]
    sys.argv = ["amsrag", *args]
    from amsrag.cli import main

    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    if measure and HOOKS is not None:
        HOOKS._log({"written": HOOKS.written})
    return code


def _main() -> int:
    spec = os.environ.get(FAULTS_ENV)
    if spec:
        install_hooks(json.loads(spec))
    cmd, rest = sys.argv[1], sys.argv[2:]
    return {"cli": _cli_main, "api": _api_main, "writer": _writer_main, "reader": _reader_main}[cmd](rest)


def as_dict(obj: Any) -> Any:
    return asdict(obj)


if __name__ == "__main__":
    sys.path.insert(0, str(SRC))
    sys.exit(_main())
