"""Stand-in vectors for the benchmark corpus, for a machine without the time to embed it with MiniLM.

`hashed_vectors` makes them; `build_hashed_index` builds bench-cache/corpus-index-hashed (the ~25k
benchmark corpus with them and the title graph) in about two minutes, where MiniLM and NER take half
an hour on two cores. Used by postgres.py (`--hashed-vectors`) and scale.py (`--source hashed`).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from amsrag.progress import RichProgress
from amsrag.store import EmbeddedIndex
from common import CACHE, load_benchmark

HASHED_INDEX = CACHE / "corpus-index-hashed"


def hashed_vectors(texts: list[str], tokenizer, dim: int = 384) -> np.ndarray:
    """Stand-in embeddings for a machine without the hours to embed the corpus: each BM25 token a fixed
    random direction (seeded by its CRC-32), a text the normalised sum of its tokens' directions
    weighted by 1 + log tf. The directions' coordinates shrink as 1/sqrt(i + 1) (a participation ratio
    of ~26 dimensions): isotropic random vectors are far harder for HNSW than sentence embeddings,
    whose variance sits in a few dozen directions. Lexical, not semantic: dense and graph quality say
    nothing about MiniLM's; HNSW latency over them is a stand-in, the two backends' agreement is real."""
    import zlib

    import scipy.sparse as sp

    vocab: dict[str, int] = {}
    data, cols, ptr = [], [], [0]
    for text in texts:
        counts: dict[int, int] = defaultdict(int)
        for tok in tokenizer(text):
            counts[vocab.setdefault(tok, len(vocab))] += 1
        cols.extend(counts)
        data.extend(1.0 + np.log(c) for c in counts.values())
        ptr.append(len(cols))
    scale = (1.0 / np.sqrt(np.arange(1, dim + 1))).astype(np.float32)
    basis = np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(dim, dtype=np.float32) * scale
                      for t in vocab]) if vocab else np.zeros((0, dim), dtype=np.float32)
    weights = sp.csr_array((np.asarray(data, dtype=np.float32), cols, ptr), shape=(len(texts), len(vocab)))
    out = np.asarray(weights @ basis, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    out /= np.where(norms > 0, norms, 1.0)
    out[norms[:, 0] == 0, 0] = 1.0  # a text without a token: any unit vector
    return out


def build_hashed_index(path: Path) -> EmbeddedIndex:
    """The benchmark corpus (~25k passages) with `hashed_vectors` and the title graph (no spaCy): built in
    about two minutes where MiniLM and NER take half an hour on two cores."""
    from amsrag.config import AmsragConfig
    from amsrag.embed import passage_text_for_embedding
    from amsrag.indexes.bm25 import BM25Tokenizer

    passages, _ = load_benchmark()
    config = AmsragConfig()
    config.graph.ner = False
    index = EmbeddedIndex.create(path, config)
    vectors = hashed_vectors([passage_text_for_embedding(p.title, p.text) for p in passages],
                             BM25Tokenizer(config.bm25))
    with RichProgress() as progress:
        index.add(passages, progress=progress, vectors=vectors)
    return index
