"""Save and load of every shipped model: a JSON card + an `.npz` of float64 arrays (no pickle).

Layout of an artifact directory (`ArtifactFormat` names the two files):
- `<name>.npz`: the arrays, written by `write_npz` (sorted keys, fixed zip timestamps: the bytes depend on
  the arrays alone, so retraining on the same data reproduces the file exactly);
- `<name>.json`: the card (`artifact_version`, the feature spec, the model's own fields, metadata) with
  `npz_sha256`, the sha256 of the npz bytes.

`load_artifact` checks, in order: both files exist, the card is valid JSON (an object), its version is one
this amsrag reads, the npz's sha256 (computed at load time) equals the card's `npz_sha256`, the npz opens
without pickle; each failure is an `InputError` naming the file at fault. `check_features` refuses a card
whose feature spec differs from the code's. Shipped artifacts are only read, never rewritten.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.errors import InputError

SHA256_KEY = "npz_sha256"


@dataclass(frozen=True, slots=True)
class ArtifactFormat:
    """What differs between the shipped models: their file names, versions and the command retraining them."""

    kind: str  # "classifier", "evaluator"
    article: str  # "a" / "an", for "not a classifier artifact"
    card: str  # JSON file name
    arrays: str  # npz file name
    version: int  # the version this amsrag writes
    readable: tuple[int, ...]  # the versions it reads
    train_command: str  # e.g. "amsrag train classifier train"


@dataclass(frozen=True, slots=True)
class Artifact:
    """A loaded artifact: its card and its arrays, with the paths they came from (for error messages)."""

    card: dict[str, Any]
    arrays: dict[str, np.ndarray]
    card_path: Path
    arrays_path: Path

    def array(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            raise InputError(f"{self.arrays_path}: missing array {key!r}; the artifact is corrupt") from None


def write_npz(path: Path, arrays: Mapping[str, np.ndarray], dtype: Any = np.float64) -> None:
    """A byte-reproducible .npz (np.savez stamps the current time into the zip entries); arrays are stored as
    `dtype` (None: each keeps its own)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key], dtype=dtype), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_artifact(directory: Path | str, fmt: ArtifactFormat, arrays: Mapping[str, np.ndarray],
                  card: Mapping[str, Any]) -> Path:
    """Write the npz, then the card with the npz's sha256 (`npz_sha256`, always the freshly computed one)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    npz_path = directory / fmt.arrays
    write_npz(npz_path, arrays)
    spec = {**card, SHA256_KEY: file_sha256(npz_path)}
    (directory / fmt.card).write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return directory


def load_artifact(directory: Path | str, fmt: ArtifactFormat) -> Artifact:
    """Read and verify an artifact directory (see the module docstring); InputError names the bad file."""
    directory = Path(directory)
    card_path, npz_path = directory / fmt.card, directory / fmt.arrays
    missing = [p for p in (card_path, npz_path) if not p.is_file()]
    if missing:
        raise InputError(f"{directory}: not {fmt.article} {fmt.kind} artifact (needs {fmt.card} and {fmt.arrays}; "
                         f"missing {', '.join(str(p) for p in missing)}); train one with `{fmt.train_command}`")
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{card_path}: not valid JSON ({exc}); the artifact is corrupt") from None
    if not isinstance(card, dict):
        raise InputError(f"{card_path}: expected a JSON object, got {type(card).__name__}; the artifact is corrupt")
    if card.get("artifact_version") not in fmt.readable:
        raise InputError(f"{card_path}: artifact version {card.get('artifact_version')!r}, this amsrag reads version "
                         f"{fmt.version}; retrain with `{fmt.train_command}`")
    recorded = card.get(SHA256_KEY)
    if not isinstance(recorded, str):
        raise InputError(f"{card_path}: no `{SHA256_KEY}` recorded for {npz_path.name}; the artifact is corrupt")
    if file_sha256(npz_path) != recorded:
        raise InputError(f"{npz_path}: sha256 does not match {card_path}; the artifact is corrupt")
    try:
        with np.load(npz_path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"{npz_path}: not a readable npz ({exc}); the artifact is corrupt") from None
    return Artifact(card, arrays, card_path, npz_path)


def check_features(artifact: Artifact, fmt: ArtifactFormat, version: int, names: Sequence[str]) -> None:
    """Refuse a card whose feature spec (`features: {version, names}`) differs from this amsrag's."""
    features = artifact.card.get("features", {})
    if not isinstance(features, dict) or features.get("version") != version or features.get("names") != list(names):
        raise InputError(f"{artifact.card_path}: feature spec differs from this amsrag's (version {version}); "
                         f"retrain with `{fmt.train_command}`")
