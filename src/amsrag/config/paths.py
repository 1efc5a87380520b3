"""Where amsrag keeps its files: the home directory of the demo index and the rebuildable caches."""

from __future__ import annotations

import os
from pathlib import Path


def amsrag_home() -> Path:
    """`$AMSRAG_HOME`, else ~/.cache/amsrag: where the demo index and the rebuildable caches live."""
    return Path(os.environ.get("AMSRAG_HOME") or Path.home() / ".cache" / "amsrag")


def cache_root() -> Path:
    """Caches that can always be rebuilt (benchmark indexes, embeddings, corpus vectors): `$AMSRAG_HOME/cache`
    when that is set, else `./bench-cache` when the current directory holds one (a checkout whose benchmarks
    ran; git-ignored), else ~/.cache/amsrag/cache."""
    if os.environ.get("AMSRAG_HOME"):
        return amsrag_home() / "cache"
    local = Path("bench-cache")
    return local if local.is_dir() else amsrag_home() / "cache"
