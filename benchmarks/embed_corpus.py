"""Embed the benchmark corpus once and cache the vectors (keyed by content hash, with the model id).

    python benchmarks/embed_corpus.py

Embedding dominates the build (~20 passages/s for 100-word paragraphs on this CPU), so the
benchmarks compute it once; `retrieval.py` hands the cached vectors to `EmbeddedIndex.add` and reports
the embedding throughput measured here next to the other build stages.
"""

from __future__ import annotations

import json
import time

import numpy as np
from tqdm import tqdm

from amsrag.config import EmbeddingConfig
from amsrag.embed import MiniLMEncoder, passage_text_for_embedding
from common import CACHE, load_benchmark

VECTORS = CACHE / "corpus-vectors.npz"


def load_cached(model_id: str) -> tuple[dict[str, int], np.ndarray, dict] | None:
    if not VECTORS.exists():
        return None
    with np.load(VECTORS, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta["model_id"] != model_id:
            return None
        return {h: i for i, h in enumerate(z["hashes"].tolist())}, z["vectors"], meta


def main() -> None:
    passages, _ = load_benchmark()
    config = EmbeddingConfig(threads=2)
    encoder = MiniLMEncoder(config)
    texts = [passage_text_for_embedding(p.title, p.text) for p in passages]
    t = time.perf_counter()
    with tqdm(total=len(texts), desc="embed", unit="passage") as bar:
        vectors = encoder.encode(texts, progress=bar.update)
    seconds = time.perf_counter() - t
    meta = {"model_id": encoder.model_id, "passages": len(texts), "seconds": round(seconds, 1),
            "passages_per_s": round(len(texts) / seconds, 1), "threads": config.threads}
    CACHE.mkdir(exist_ok=True)
    np.savez(VECTORS, hashes=np.asarray([p.content_hash for p in passages]), vectors=vectors,
             meta=np.asarray(json.dumps(meta)))
    print(meta)


if __name__ == "__main__":
    main()
