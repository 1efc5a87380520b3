"""The discovery file of a running `amsrag serve`: `serve.json` in the index directory, holding the URL and the
process id of the service, so `amsrag ask` on the same index sends its question to the warm service instead of
loading the models itself. Written when the service starts, removed when it stops; a file whose process is
gone (a killed service) is ignored. Standard library only: the CLI reads it before anything heavy loads."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

DISCOVERY_FILE = "serve.json"


@dataclass(frozen=True, slots=True)
class Discovered:
    """A service found through an index's discovery file."""

    url: str
    pid: int
    path: Path


def client_url(host: str, port: int) -> str:
    """The URL a local client reaches a service bound to `host`:`port` at (a wildcard bind by loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def write_discovery(index_dir: Path, host: str, port: int, pid: int | None = None) -> Path | None:
    """Write `serve.json` into `index_dir` (atomically); None when the directory is not writable (the service
    runs all the same, only without being discovered)."""
    path = index_dir / DISCOVERY_FILE
    record = {"url": client_url(host, port), "pid": os.getpid() if pid is None else pid,
              "index": str(index_dir.resolve())}
    tmp = path.with_name(f".{DISCOVERY_FILE}.{record['pid']}.tmp")
    try:
        tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    return path


def remove_discovery(path: Path, pid: int | None = None) -> None:
    """Remove the discovery file `path` if it is still this process's (another service may have replaced it)."""
    found = _read(path)
    if found is not None and found.pid == (os.getpid() if pid is None else pid):
        with contextlib.suppress(OSError):
            path.unlink()


def read_discovery(index_dir: Path) -> Discovered | None:
    """The service announced in `index_dir`, or None: no file, an unreadable one, or one whose process is gone."""
    found = _read(index_dir / DISCOVERY_FILE)
    if found is None or not _alive(found.pid):
        return None
    return found


def _read(path: Path) -> Discovered | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        url, pid = record["url"], record["pid"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not isinstance(pid, int):
        return None
    return Discovered(url, pid, path)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, under another user
        return True
    return True
