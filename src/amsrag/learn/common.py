"""What the classifier's and the evaluator's trainers share.

- Embeddings of training texts, cached on disk by (model id, sha256 of the text): `EmbeddingCache`,
  `embed_questions`. The cache lives outside the package, in `classifier-embeddings` under
  `amsrag.config.cache_root()`; the evaluator's sits next to it (`learn.evaluator.embedding`).
- `seeded_rank`: the seeded hash order both trainers sample and split by.
- `standardise`: the mean / scale of a design matrix, as both logistic regressions use it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import cache_root
from amsrag.embed.encoder import DIMENSION, Encoder


def default_cache_dir() -> Path:
    """`classifier-embeddings` under `amsrag.config.cache_root()`."""
    return cache_root() / "classifier-embeddings"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seeded_rank(seed: int, key: str) -> str:
    """A stable pseudo-random order key of `key` for `seed` (sort by it to sample or split reproducibly)."""
    return hashlib.sha256(f"{seed}\x1f{key}".encode()).hexdigest()


def standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) per column; constant columns get scale 1 so (x - mean) / scale stays finite."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    return mean, scale


class EmbeddingCache:
    """One `.npz` per model id: `keys` (sha256 hex of each text) and `vectors` (float32, n x 384)."""

    def __init__(self, directory: Path, model_id: str) -> None:
        self.path = Path(directory) / f"{hashlib.sha256(model_id.encode()).hexdigest()[:16]}.npz"
        self.model_id = model_id
        self._vectors: dict[str, np.ndarray] = {}
        if self.path.is_file():
            with np.load(self.path, allow_pickle=False) as npz:
                if str(npz["model_id"]) == model_id:
                    self._vectors = dict(zip((str(k) for k in npz["keys"]), npz["vectors"], strict=True))

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, key: str) -> np.ndarray | None:
        return self._vectors.get(key)

    def __getitem__(self, key: str) -> np.ndarray:
        return self._vectors[key]

    def put_many(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        for k, v in zip(keys, vectors, strict=True):
            self._vectors[k] = v

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._vectors)
        vectors = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, DIMENSION), np.float32)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=vectors.astype(np.float32), model_id=np.array(self.model_id))
        tmp.replace(self.path)


def embed_questions(
    questions: Sequence[str],
    encoder: Encoder,
    cache_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
    save_every: int = 4096,
) -> np.ndarray:
    """Embeddings of `questions` (row-aligned); only texts missing from the cache are encoded."""
    cache = EmbeddingCache(cache_dir or default_cache_dir(), encoder.model_id)
    keys = [text_hash(q) for q in questions]
    missing = sorted({k: q for k, q in zip(keys, questions, strict=True) if cache.get(k) is None}.items())
    if progress is not None:
        progress(len(questions) - len(missing))
    for start in range(0, len(missing), save_every):
        chunk = missing[start : start + save_every]
        vectors = encoder.encode([q for _, q in chunk], progress=progress)
        cache.put_many([k for k, _ in chunk], vectors)
        cache.save()
    return np.stack([cache[k] for k in keys]).astype(np.float32) if keys else np.zeros((0, DIMENSION), np.float32)


def lambdarank_params(seed: int, num_leaves: int, learning_rate: float, min_data_in_leaf: int,
                      feature_fraction: float, lambda_l2: float, eval_at: int, truncation: int) -> dict[str, Any]:
    """LightGBM lambdarank settings of the shipped rankers: deterministic, one thread, row-wise."""
    return {"objective": "lambdarank", "metric": "ndcg", "eval_at": [eval_at],
            "lambdarank_truncation_level": truncation, "num_leaves": num_leaves, "learning_rate": learning_rate,
            "min_data_in_leaf": min_data_in_leaf, "feature_fraction": feature_fraction, "lambda_l2": lambda_l2,
            "seed": seed, "deterministic": True, "force_row_wise": True, "num_threads": 1, "verbose": -1}
