"""The index manifest: the commit point of derived indexes, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from amsrag.errors import IndexCorruptError

MANIFEST = "manifest.json"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write then rename, with fsync of the file and its directory, so readers see old or new, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; the manifest is as readable as the rest of the index
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


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

