"""Query-dependent expert weights (mixture of retrieval experts, seed 001 §7; issue 16).

For a query q with embedding v, its `neighbours` nearest training queries j (cosine s_j of the stored,
L2-normalised query embeddings) say how well each retriever r ranked their gold passages (quality
`Q[j, r]`: nDCG@10 of r alone). Their similarity-weighted mean quality, sharpened by a softmax at
`temperature`, is the kNN weight; it is blended with the class prior beta^(c) (CA-RRF's) by how similar
the neighbours are:

    q_r   = sum_j s_j^+ Q[j, r] / sum_j s_j^+                (over the activated retrievers)
    knn_r = exp(q_r / temperature) / sum_r' exp(q_r' / temperature)
    w_r   = lam * knn_r + (1 - lam) * beta_r^(c),           lam = clip(mean_j s_j / trust, 0, 1)

The lists are then fused by weighted RRF with CA-RRF's k_r(c). temperature 0.05 and trust 0.4 were chosen
leave-one-out on the training questions (nDCG@5 of the all-retriever fusion 0.830 against 0.807 uniform;
the plain normalised mean, temperature -> infinity, gave 0.809): without sharpening the retrievers'
mean qualities are too close for the weights to differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256, write_npz
from amsrag.config import FusionConfig
from amsrag.errors import InputError
from amsrag.fuse.base import FusedList
from amsrag.fuse.rank_fusion import rank_fuse
from amsrag.types import Hit


@dataclass(frozen=True, slots=True)
class ExpertMemory:
    """Calibration queries' embeddings (rows L2-normalised) and each retriever's quality on them."""

    vectors: np.ndarray  # (n, dim) float32
    quality: np.ndarray  # (n, len(retrievers)) in [0, 1]
    retrievers: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.quality.shape != (len(self.vectors), len(self.retrievers)):
            raise InputError(f"expert memory: vectors {self.vectors.shape} and quality {self.quality.shape} do not "
                             f"match {len(self.retrievers)} retrievers")

    def neighbours(self, vector: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, cosines) of the n most similar calibration queries, most similar first (ties by index)."""
        q = np.asarray(vector, dtype=np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        sims = self.vectors @ q
        n = min(n, len(sims))
        if n <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.lexsort((top, -sims[top]))]
        return top, sims[top]


def expert_weights(memory: ExpertMemory, vector: np.ndarray, activated: Sequence[str], prior: Mapping[str, float],
                   neighbours: int = 16, temperature: float = 0.05,
                   trust: float = 0.4) -> tuple[dict[str, float], float]:
    """Per activated retriever its weight (they sum to 1), and lam, the share given to the neighbours."""
    names = sorted(set(activated))
    if not names:
        return {}, 0.0
    if not (temperature > 0 and trust > 0):
        raise InputError(f"expert weights: temperature and trust must be > 0, got {temperature}, {trust}")
    idx, sims = memory.neighbours(vector, neighbours)
    pos = np.clip(sims.astype(np.float64), 0.0, None)
    lam = float(np.clip(sims.mean() / trust, 0.0, 1.0)) if len(sims) and pos.sum() > 0 else 0.0
    col = {r: i for i, r in enumerate(memory.retrievers)}
    quality = np.asarray([float((pos * memory.quality[idx, col[r]]).sum() / pos.sum())
                          if r in col and pos.sum() > 0 else 0.0 for r in names])
    sharp = np.exp((quality - quality.max()) / temperature)
    knn = dict(zip(names, (sharp / sharp.sum()).tolist(), strict=True))
    raw_prior = {r: max(float(prior.get(r, 0.0)), 0.0) for r in names}
    ptotal = sum(raw_prior.values())
    beta = {r: v / ptotal for r, v in raw_prior.items()} if ptotal > 0 else {r: 1.0 / len(names) for r in names}
    return {r: lam * knn[r] + (1.0 - lam) * beta[r] for r in names}, lam


class ExpertFuser:
    """Weighted RRF with per-query expert weights (see the module docstring), for predicted class c."""

    method = "experts"

    def __init__(self, memory: ExpertMemory, vector: np.ndarray, complexity: str,
                 config: FusionConfig | None = None) -> None:
        self.memory = memory
        self.vector = vector
        self.complexity = complexity
        self.config = config or FusionConfig()
        self.neighbours = self.config.expert_neighbours

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        prior = self.config.beta_by_class.get(self.complexity, {})  # type: ignore[call-overload]
        weights, lam = expert_weights(self.memory, self.vector, list(lists), prior, self.neighbours,
                                      self.config.expert_temperature, self.config.expert_trust)
        k_c = self.config.k_by_class.get(self.complexity, {})  # type: ignore[call-overload]
        ks = {r: float(k_c.get(r, self.config.rrf_k)) for r in lists}
        return rank_fuse(lists, weights, ks, method=self.method,
                         params={"complexity": self.complexity, "neighbours": self.neighbours,
                                 "neighbour_share": round(lam, 4), "expert_weights": {r: round(w, 4)
                                                                                 for r, w in weights.items()}})


EXPERTS_FILE = "experts.npz"


def save_memory(directory: Path, memory: ExpertMemory) -> str:
    """Write `experts.npz` (vectors as float16) into `directory`; returns its sha256."""
    path = directory / EXPERTS_FILE
    write_npz(path, {"vectors": memory.vectors.astype(np.float16), "quality": memory.quality.astype(np.float32)},
              dtype=None)
    return file_sha256(path)


def load_memory(directory: Path, card: Mapping[str, Any]) -> ExpertMemory:
    """The expert memory of a learned-fuser artifact, checked against the card's `experts` section."""
    section = card.get("experts")
    path = directory / EXPERTS_FILE
    if not isinstance(section, dict) or not path.is_file():
        raise InputError(f"{path}: expert memory missing from the fusion artifact; rebuild it with "
                         "`amsrag train fusion train`")
    if file_sha256(path) != section.get("npz_sha256"):
        raise InputError(f"{path}: sha256 differs from the card's experts.npz_sha256; the file is corrupt")
    try:
        with np.load(path, allow_pickle=False) as z:
            vectors, quality = z["vectors"].astype(np.float32), z["quality"].astype(np.float64)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: unreadable expert memory ({exc})") from None
    return ExpertMemory(vectors, quality, tuple(section.get("retrievers", ())))
