"""The benchmark's index, built once per corpus, with passage embeddings cached by content hash.

Vector caches are `.npz` files in the layout of `benchmarks/embed_corpus.py`: `hashes` (content hash
per passage), `vectors` (float32) and `meta` (JSON with `model_id`). The eval cache's own file is
read and extended; `corpus-vectors.npz` beside the eval cache folder (`bench-cache/` in a checkout), when
present, is read too, so the benchmark corpus is never embedded again.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import model_id_for, passage_text_for_embedding
from amsrag.progress import NullProgress, Progress
from amsrag.store import EmbeddedIndex
from amsrag.store.embedded.manifest import MANIFEST
from amsrag.types import Passage

VECTOR_FILE = "passage-vectors.npz"
CORPUS_VECTORS = "corpus-vectors.npz"  # `benchmarks/embed_corpus.py`'s file, beside the eval cache folder


class VectorCache:
    def __init__(self, paths: Sequence[Path], own: Path, model_id: str) -> None:
        self.own, self.model_id = own, model_id
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        for path in [*paths, own]:
            if path.is_file():
                with np.load(path, allow_pickle=False) as z:
                    if json.loads(str(z["meta"])).get("model_id") == model_id:
                        self._vectors.update(zip(z["hashes"].tolist(), z["vectors"], strict=True))

    def __len__(self) -> int:
        return len(self._vectors)

    def missing(self, passages: Sequence[Passage]) -> list[Passage]:
        return [p for p in passages if p.content_hash not in self._vectors]

    def put(self, passages: Sequence[Passage], vectors: np.ndarray) -> None:
        for p, v in zip(passages, vectors, strict=True):
            self._vectors[p.content_hash] = np.asarray(v, dtype=np.float32)
        self._dirty = True

    def matrix(self, passages: Sequence[Passage]) -> np.ndarray:
        return np.stack([self._vectors[p.content_hash] for p in passages]).astype(np.float32)

    def save(self) -> None:
        if not self._dirty:
            return
        self.own.parent.mkdir(parents=True, exist_ok=True)
        hashes = sorted(self._vectors)
        tmp = self.own.with_name(self.own.stem + ".tmp.npz")
        np.savez(tmp, hashes=np.asarray(hashes), vectors=np.stack([self._vectors[h] for h in hashes]),
                 meta=np.asarray(json.dumps({"model_id": self.model_id})))
        tmp.replace(self.own)
        self._dirty = False


def open_or_build_index(passages: Sequence[Passage], directory: Path, cache_dir: Path,
                        config: AmsragConfig | None = None, progress: Progress | None = None) -> EmbeddedIndex:
    """The index of these passages at `directory` (reused when it already holds exactly them)."""
    progress = progress or NullProgress()
    if (directory / MANIFEST).is_file():
        index = EmbeddedIndex.open(directory)
        if len(index) == len(passages):
            return index
        index.close()
    config = config or AmsragConfig()
    cache = VectorCache([cache_dir.parent / CORPUS_VECTORS], cache_dir / VECTOR_FILE, model_id_for(config.embedding))
    todo = cache.missing(passages)
    if todo:
        from amsrag.embed import encoder_for

        encoder = encoder_for(config.embedding)
        with progress.task(f"embed {len(todo)} new passages", len(todo)) as advance:
            vectors = encoder.encode([passage_text_for_embedding(p.title, p.text) for p in todo], advance)
        cache.put(todo, vectors)
        cache.save()
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    index = EmbeddedIndex.create(tmp, config)
    index.add(passages, progress=progress, vectors=cache.matrix(passages))
    index.close()
    shutil.rmtree(directory, ignore_errors=True)
    tmp.replace(directory)
    return EmbeddedIndex.open(directory)
