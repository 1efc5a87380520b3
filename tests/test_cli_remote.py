"""`amsrag ask` through a running service: the discovery file `amsrag serve` keeps in the index directory, and
the CLI's `--server` / discovered path printing what a local `ask` prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amsrag.cli.remote import find_service, service_key
from amsrag.config import ServeConfig
from amsrag.errors import InputError
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from amsrag.serve.background import BackgroundServer
from amsrag.serve.discovery import DISCOVERY_FILE, client_url, read_discovery, remove_discovery, write_discovery

KEY = "remote-key-0123456789abcdef"
AMSRAG = [sys.executable, "-m", "amsrag.cli"]


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_discovery_file_round_trip(tmp_path: Path) -> None:
    path = write_discovery(tmp_path, "0.0.0.0", 8123)
    assert path == tmp_path / DISCOVERY_FILE
    found = read_discovery(tmp_path)
    assert found is not None and found.url == "http://127.0.0.1:8123" and found.pid == os.getpid()
    remove_discovery(path, pid=os.getpid() + 1)  # not this process's file: kept
    assert path.exists()
    remove_discovery(path)
    assert not path.exists() and read_discovery(tmp_path) is None


def test_stale_or_damaged_discovery_is_ignored(tmp_path: Path) -> None:
    write_discovery(tmp_path, "127.0.0.1", 8123, pid=dead_pid())
    assert read_discovery(tmp_path) is None  # the service was killed: its file stays, unused
    (tmp_path / DISCOVERY_FILE).write_text("{not json", encoding="utf-8")
    assert read_discovery(tmp_path) is None
    (tmp_path / DISCOVERY_FILE).write_text(json.dumps({"url": "file:///etc/passwd", "pid": os.getpid()}), "utf-8")
    assert read_discovery(tmp_path) is None


def test_client_url_reaches_wildcard_binds() -> None:
    assert client_url("0.0.0.0", 80) == "http://127.0.0.1:80"
    assert client_url("::", 80) == "http://[::1]:80"
    assert client_url("10.0.0.5", 8000) == "http://10.0.0.5:8000"


def test_find_service_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMSRAG_API_KEY", raising=False)
    monkeypatch.delenv("AMSRAG_API_KEYS", raising=False)
    assert find_service(str(tmp_path), None, False, []) is None  # nothing announced: local
    write_discovery(tmp_path, "127.0.0.1", 8123)
    found = find_service(str(tmp_path), None, False, [])
    assert found is not None and found.discovered and found.url == "http://127.0.0.1:8123" and found.key is None
    assert find_service(str(tmp_path), None, True, []) is None  # --local
    assert find_service(str(tmp_path), None, False, ["--generator"]) is None  # a local-only option
    with pytest.raises(InputError, match="--generator: only for a local answer"):
        find_service(str(tmp_path), "http://127.0.0.1:1", False, ["--generator"])
    with pytest.raises(InputError, match="give the service's URL"):
        find_service(None, "127.0.0.1:8000", False, [])
    (tmp_path / "config.toml").write_text('[serve]\napi_keys = ["from-the-config-0123456789"]\n', "utf-8")
    assert service_key(str(tmp_path)) == "from-the-config-0123456789"
    monkeypatch.setenv("AMSRAG_API_KEYS", "first-of-the-served-keys-01,second-key-0123456789")
    assert service_key(str(tmp_path)) == "first-of-the-served-keys-01"
    monkeypatch.setenv("AMSRAG_API_KEY", "the-client-key-0123456789")
    assert service_key(str(tmp_path)) == "the-client-key-0123456789"


def run(*args: str | Path, key: str | None = KEY) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AMSRAG_API_KEY", "AMSRAG_API_KEYS")}
    if key is not None:
        env["AMSRAG_API_KEY"] = key
    return subprocess.run([*AMSRAG, *map(str, args)], capture_output=True, text=True, timeout=600, env=env,
                          check=False)


def untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "ms" and not k.endswith("_ms")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


@pytest.fixture(scope="module")
def served(built_index, tmp_path_factory):
    index_dir = tmp_path_factory.mktemp("remote") / "index"
    shutil.copytree(built_index.path, index_dir, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    service = Service(Engine.open(index_dir), ServeConfig(api_keys=[KEY]))
    server = BackgroundServer(create_app(service))
    url = server.start()
    host, port = url.removeprefix("http://").split(":")
    write_discovery(index_dir, host, int(port))
    yield index_dir, url
    server.stop()
    service.close()


def test_ask_through_the_discovered_service_prints_the_local_answer(served, slice_questions) -> None:
    index_dir, _ = served
    question = slice_questions[0].question
    proc = run("ask", question, "--index", index_dir, "--json")
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    assert "sources" not in remote  # the service's extra field is not part of `ask --json`
    local = run("ask", question, "--index", index_dir, "--json", "--local")
    assert local.returncode == 0, local.stderr
    assert untimed(remote) == untimed(json.loads(local.stdout))
    printed = run("ask", question, "--index", index_dir)
    assert printed.returncode == 0 and remote["answer"] in printed.stdout
    for cid in remote["citations"]:
        assert f"[{cid}]" in printed.stdout


def test_wrong_key_explicit_fails_discovered_falls_back(served, slice_questions) -> None:
    index_dir, url = served
    question = slice_questions[0].question
    explicit = run("ask", question, "--server", url, "--json", key="not-the-key-0123456789abc")
    assert explicit.returncode == 2 and "answered 401" in explicit.stderr
    discovered = run("ask", question, "--index", index_dir, "--json", key="not-the-key-0123456789abc")
    assert discovered.returncode == 0 and "answering locally" in discovered.stderr
    assert json.loads(discovered.stdout)["query"] == question
