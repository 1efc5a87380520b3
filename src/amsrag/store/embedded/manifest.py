"""The index manifest: the commit point of derived indexes, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from amsrag.errors import IndexCorruptError

MANIFEST = "manifest.json"


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """`write(file)` to a temporary file beside `path`, fsync, rename over `path`, fsync the directory:
    readers see the old file or the new one, never half; a failed write leaves no temporary file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; the file is as readable as the rest of the index
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, lambda f: f.write(json.dumps(data, indent=2, sort_keys=True).encode("utf-8")))


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise IndexCorruptError(f"{path}: manifest is not valid JSON ({exc}); the index cannot be opened") from exc

