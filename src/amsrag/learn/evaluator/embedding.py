"""Cached embeddings of the evaluator's training texts (questions, paragraphs, sentences).

Same cache format as the classifier's (`learn.common.EmbeddingCache`: one npz per model id, keyed
by the sha256 of the embedded text), in `evaluator-embeddings` under `amsrag.config.cache_root()`.
Paragraph vectors already computed for the benchmark corpus (`corpus-vectors.npz` there, keyed by
content hash) are reused when the model matches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from amsrag.embed.encoder import Encoder, passage_text_for_embedding
from amsrag.learn.common import EmbeddingCache, default_cache_dir, embed_questions, text_hash
from amsrag.types import content_hash


def evaluator_cache_dir() -> Path:
    return default_cache_dir().parent / "evaluator-embeddings"


def seed_from_corpus_vectors(cache: EmbeddingCache, path: Path, pairs: Sequence[tuple[str, str]]) -> int:
    """Copy vectors of (title, text) paragraphs from a corpus-vectors npz (hashes, vectors, meta) into `cache`."""
    if not path.is_file():
        return 0
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("model_id") != cache.model_id:
            return 0
        where = {h: i for i, h in enumerate(z["hashes"].tolist())}
        vectors = z["vectors"]
        keys, rows = [], []
        for title, text in pairs:
            i = where.get(content_hash(title, text))
            key = text_hash(passage_text_for_embedding(title, text))
            if i is not None and cache.get(key) is None:
                keys.append(key)
                rows.append(i)
        if keys:
            cache.put_many(keys, vectors[np.asarray(rows)])
            cache.save()
    return len(keys)


def embed_cached(texts: Sequence[str], encoder: Encoder, cache_dir: Path | None = None,
                 progress: Callable[[int], None] | None = None, save_every: int = 2048) -> np.ndarray:
    """Row-aligned vectors of `texts`; only texts missing from the cache are encoded (the classifier's
    cached embedding, in the evaluator's cache directory)."""
    return embed_questions(texts, encoder, cache_dir or evaluator_cache_dir(), progress, save_every)


def open_cache(encoder: Encoder, cache_dir: Path | None = None) -> EmbeddingCache:
    return EmbeddingCache(cache_dir or evaluator_cache_dir(), encoder.model_id)


def cached_labels(texts: Sequence[str], compute: Callable[[list[str]], list[frozenset[str]]],
                  cache_dir: Path | None = None, version: str = "") -> list[frozenset[str]]:
    """NER label sets of `texts`, cached in `ner-labels.json` (keyed by sha256 of `version` + text)."""
    path = Path(cache_dir or evaluator_cache_dir()) / "ner-labels.json"
    store: dict[str, list[str]] = {}
    if path.is_file():
        try:
            store = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            store = {}
    keys = [text_hash(version + "\x1f" + t) for t in texts]
    missing = list({k: t for k, t in zip(keys, texts, strict=True) if k not in store}.items())
    if missing:
        for (k, _), labels in zip(missing, compute([t for _, t in missing]), strict=True):
            store[k] = sorted(labels)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(store, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    return [frozenset(store[k]) for k in keys]
