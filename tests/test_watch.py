"""Live folder sync: `amsrag index sync --watch` and `amsrag serve --watch DIR` over a real folder and a real
embedded index (watchfiles' own notifications; the reader is a second handle, as another process would be)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import amsrag
from amsrag.cli.main import app
from amsrag.errors import AmsragError, InputError
from amsrag.indexing import ingest_inputs
from amsrag.indexing.watch import FolderWatcher, WatchBatch, check_watch
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex

pytest.importorskip("watchfiles")

WAIT_S = 20.0  # a generous bound for a change to show on a loaded machine (the target is 5 s: benchmarks/watch.py)
SRC = str(Path(amsrag.__file__).resolve().parents[1])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def eventually(check: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


class Reader:
    """A second handle on the index, reloaded when the watcher published a newer generation."""

    def __init__(self, path: Path) -> None:
        self.index = EmbeddedIndex.open(path)

    def fresh(self) -> EmbeddedIndex:
        if self.index.stale():
            self.index.refresh()
        return self.index

    def top(self, query: str) -> str | None:
        hits = retriever_for(self.fresh(), "bm25").search(query, k=3)
        return hits[0].id if hits else None

    def texts(self) -> dict[str, str]:
        """Every stored passage's text by id."""
        texts: dict[str, str] = {}
        for p in self.fresh().iter_passages():
            assert p.id not in texts, f"{p.id} stored twice"
            texts[p.id] = p.text
        return texts


@pytest.fixture()
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write(root / "intro.md", "# Intro\n\nThe project began in Lisbon in 2019.\n")
    write(root / "guide" / "faq.txt", "The default port is 8000. It can be changed with --port.\n")
    return root


@pytest.fixture()
def watched(tmp_path: Path, kb: Path) -> Iterator[tuple[Path, Reader, list[WatchBatch]]]:
    """An index kept in step with `kb` by a FolderWatcher (first sync done), a reader, the batches so far."""
    idx_dir = tmp_path / "idx"
    EmbeddedIndex.create(idx_dir).close()
    batches: list[WatchBatch] = []
    watcher = FolderWatcher(idx_dir, [kb], on_batch=batches.append, step_ms=100)
    watcher.start()
    try:
        assert eventually(lambda: bool(batches), 60), "the first sync never finished"
        assert batches[0].error is None and batches[0].passages == 2
        reader = Reader(idx_dir)
        yield kb, reader, batches
        reader.index.close()
    finally:
        watcher.stop()
    assert watcher.error is None and watcher.summary is not None and not watcher.summary.interrupted


def test_a_file_written_while_watching_becomes_searchable(watched) -> None:
    kb, reader, batches = watched
    t = time.monotonic()
    write(kb / "guide" / "harbour.md", "# Harbour\n\nThe harbour of Vemmerholt opens at dawn for fishing boats.\n")
    assert eventually(lambda: reader.top("harbour Vemmerholt dawn") == "kb/guide/harbour.md#0")
    assert time.monotonic() - t < WAIT_S
    assert eventually(lambda: len(batches) >= 2)  # the batch is reported after its commit
    assert batches[-1].changes >= 1 and batches[-1].report is not None and batches[-1].report.added == 1


def test_an_edited_file_loses_its_old_text(watched) -> None:
    kb, reader, _ = watched
    write(kb / "intro.md", "# Intro\n\nThe project began in Lisbon in 2019 with a zebra.\n")
    assert eventually(lambda: "zebra" in reader.texts().get("kb/intro.md#0", ""))
    write(kb / "intro.md", "# Intro\n\nThe project began in Porto in 2021 with a walrus.\n")
    assert eventually(lambda: "walrus" in reader.texts().get("kb/intro.md#0", ""))
    texts = reader.texts()
    assert len(texts) == 2 and not any("zebra" in t or "Lisbon" in t for t in texts.values())
    assert reader.top("walrus Porto 2021") == "kb/intro.md#0"


def test_a_deleted_file_loses_its_passages(watched) -> None:
    kb, reader, _ = watched
    (kb / "guide" / "faq.txt").unlink()
    assert eventually(lambda: "kb/guide/faq.txt" not in reader.fresh().documents())
    index = reader.fresh()
    assert len(index) == 1 and index.get("kb/guide/faq.txt#0") is None
    assert reader.top("default port 8000") != "kb/guide/faq.txt#0"


def test_a_burst_of_200_files_is_synced_exactly_once(watched, tmp_path: Path) -> None:
    kb, reader, batches = watched
    staging = tmp_path / "staging"
    for i in range(200):
        write(staging / f"note{i:03d}.txt", f"Note {i} records that crate {i} holds item code QX{i:03d}.\n")
    shutil.copytree(staging, kb / "burst")
    assert eventually(lambda: len(reader.fresh()) == 202, 60), f"the index holds {len(reader.fresh())}"
    time.sleep(1.0)  # a late batch would show here
    index = reader.fresh()
    texts = reader.texts()
    burst = {pid: t for pid, t in texts.items() if pid.startswith("kb/burst/")}
    assert len(index) == 202 and len(burst) == 200 and len(set(burst.values())) == 200
    assert sorted(burst) == [f"kb/burst/note{i:03d}.txt#0" for i in range(200)]
    assert all(b.error is None for b in batches) and index.check().ok
    assert sum(b.report.added for b in batches[1:] if b.report) == 200


def test_a_half_written_file_does_not_stop_the_watch(watched) -> None:
    kb, reader, batches = watched
    write(kb / "notes.jsonl", '{"id": "n1", "text": "The lighthouse keeper')  # half a record
    write(kb / "empty.md", "")  # created, not written yet
    assert eventually(lambda: any(b.report and b.report.skipped_files for b in batches))
    skipped = {s["file"] for b in batches if b.report for s in b.report.skipped_files}
    assert {"kb/notes.jsonl", "kb/empty.md"} <= skipped
    write(kb / "other.md", "# Other\n\nThe orchard of Quillmere grows plums.\n")  # the rest keeps syncing
    assert eventually(lambda: reader.top("orchard Quillmere plums") == "kb/other.md#0")
    write(kb / "notes.jsonl", '{"id": "n1", "text": "The lighthouse keeper of Vemmerholt is Zorbulax."}\n')
    write(kb / "empty.md", "# Empty\n\nNo longer empty: it speaks of a narwhal.\n")
    assert eventually(lambda: reader.top("lighthouse keeper Vemmerholt") == "n1")
    assert eventually(lambda: reader.top("narwhal") == "kb/empty.md#0")
    assert all(b.error is None for b in batches)


def test_a_failed_batch_is_retried(tmp_path: Path, kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync that fails (here: the index is locked by another writer) is tried again without a new change."""
    import fcntl

    import amsrag.store.embedded.publish as embedded

    idx_dir = tmp_path / "idx"
    EmbeddedIndex.create(idx_dir).close()
    batches: list[WatchBatch] = []
    monkeypatch.setattr(embedded, "LOCK_TIMEOUT_S", 0.5)
    lock = os.open(idx_dir / embedded.LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another writer holds the index
    with FolderWatcher(idx_dir, [kb], on_batch=batches.append, step_ms=100):
        try:
            assert eventually(lambda: bool(batches), 60)
        finally:
            os.close(lock)  # the other writer is done
        assert batches[0].error is not None and "being written by another process" in batches[0].error
        assert "tried again on the next change or in 2 s" in batches[0].line()
        assert eventually(lambda: any(b.error is None for b in batches))
        assert batches[-1].changes == 0 and batches[-1].passages == 2


def test_bad_arguments_are_clear_errors(tmp_path: Path, kb: Path) -> None:
    with pytest.raises(InputError, match="inside the watched folder"):
        check_watch(kb / "idx", [kb])
    with pytest.raises(InputError, match="give a folder"):
        check_watch(None, [kb / "intro.md"])
    with pytest.raises(InputError, match="no such file or directory"):
        FolderWatcher(tmp_path / "idx", [tmp_path / "none"]).start()


def invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    if isinstance(r.exception, AmsragError):
        return 2, r.output + str(r.exception)
    return r.exit_code, r.output


def test_without_watchfiles_watch_says_how_to_install_it(tmp_path: Path, kb: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with EmbeddedIndex.create(tmp_path / "idx") as idx:
        ingest_inputs(idx, [kb])
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # `import watchfiles` raises ImportError
    for args in (("index", "sync", str(kb), "--index", str(tmp_path / "idx"), "--watch"),
                 ("serve", "--index", str(tmp_path / "idx"), "--watch", str(kb))):
        code, out = invoke(*args)
        assert code == 2 and 'pip install "amsrag[watch]"' in out, out
    code, out = invoke("index", "sync", str(kb), "--index", str(tmp_path / "idx"), "--json")
    assert code == 0, out  # a plain sync does not need it


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AMSRAG_API_KEYS", "AMSRAG_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _json_lines(proc: subprocess.Popen[str], n: int, timeout_s: float) -> list[dict]:
    """The next `n` JSON lines of the process's stdout."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    lines: list[dict] = []
    while len(lines) < n:
        assert time.monotonic() < deadline, f"no output within {timeout_s} s; got {lines}"
        line = proc.stdout.readline()
        assert line or proc.poll() is None, f"the process ended: {proc.stderr.read() if proc.stderr else ''}"
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


@pytest.mark.slow
def test_cli_sync_watch_until_ctrl_c(tmp_path: Path, kb: Path) -> None:
    idx_dir = tmp_path / "idx"
    EmbeddedIndex.create(idx_dir).close()
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "index", "sync", str(kb), "--index", str(idx_dir),
                             "--watch", "--json", "-q"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = _json_lines(proc, 1, 120)[0]
        assert first["batch"] == 1 and first["error"] is None and first["passages"] == 2
        write(kb / "more.md", "# More\n\nThe harbour opens at dawn.\n")
        second = _json_lines(proc, 1, WAIT_S)[0]
        assert second["changes"] >= 1 and second["report"]["added"] == 1 and second["passages"] == 3
        proc.send_signal(signal.SIGINT)
        try:
            outcome = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # a loaded CI machine: the first Ctrl-C landed in a sync; ask again
            proc.send_signal(signal.SIGINT)
            outcome = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, outcome[1]
    last = json.loads(outcome[0].strip().splitlines()[-1])["watch"]
    assert last["interrupted"] and last["batches"] == 2 and last["added"] == 3 and last["passages"] == 3


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_serve_watch_serves_new_passages(tmp_path: Path, kb: Path) -> None:
    idx_dir = tmp_path / "idx"
    with EmbeddedIndex.create(idx_dir) as idx:
        ingest_inputs(idx, [kb])
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "serve", "--index", str(idx_dir), "--port",
                             str(port), "--watch", str(kb), "--no-query-log", "--no-review", "--no-shadow"],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"

    def top(query: str) -> str | None:
        r = httpx.post(f"{url}/v1/retrieve", json={"query": query, "system": "bm25", "k": 3}, timeout=10)
        passages = r.json()["passages"]
        return passages[0]["id"] if passages else None

    try:
        def up() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert eventually(up, 120), "amsrag serve did not start"
        write(kb / "harbour.md", "# Harbour\n\nThe harbour of Vemmerholt opens at dawn for fishing boats.\n")
        assert eventually(lambda: top("harbour Vemmerholt dawn") == "kb/harbour.md#0")
        (kb / "intro.md").unlink()
        assert eventually(lambda: httpx.get(f"{url}/healthz", timeout=5).json()["passages"] == 2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "watch stopped" in stderr and "batch 1 (first sync)" in stderr, stderr


@pytest.mark.slow
def test_watch_keeps_a_postgresql_index_in_step(pg_url: str, kb: Path) -> None:
    from amsrag.store.open import create_index, open_index

    create_index(pg_url).close()
    batches: list[WatchBatch] = []
    with FolderWatcher(pg_url, [kb], on_batch=batches.append, step_ms=100), open_index(pg_url) as reader:
        assert eventually(lambda: bool(batches), 60) and batches[0].error is None and batches[0].passages == 2

        def top(query: str) -> str | None:
            hits = retriever_for(reader, "bm25").search(query, k=3)
            return hits[0].id if hits else None

        write(kb / "harbour.md", "# Harbour\n\nThe harbour of Vemmerholt opens at dawn for fishing boats.\n")
        assert eventually(lambda: top("harbour Vemmerholt dawn") == "kb/harbour.md#0")
        (kb / "intro.md").unlink()
        assert eventually(lambda: "kb/intro.md" not in reader.documents())
        assert eventually(lambda: len(batches) >= 3) and all(b.error is None for b in batches)
        assert len(reader) == 2
