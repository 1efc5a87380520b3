"""Fusion stage: rank fusion (RRF, weighted RRF, CombSUM, CombMNZ, CA-RRF), MMR, adaptive k, and the RRF merge
of whole evidence lists (DESIGN §5, §6)."""

from amsrag.fuse.adaptive_k import adaptive_cut, adaptive_k
from amsrag.fuse.base import FusedItem, FusedList, Fuser
from amsrag.fuse.merge import merge_lists
from amsrag.fuse.mmr import MMR_GATES, MMRGate, MMRGateMode, MMRPick, MMRResult, minmax, mmr, mmr_applies, redundancy
from amsrag.fuse.rank_fusion import (
    CARRF,
    FUSION_METHODS,
    RRF,
    CombMNZ,
    CombSUM,
    WeightedRRF,
    ca_rrf_weights,
    make_fuser,
    rho,
)

__all__ = [
    "CARRF",
    "FUSION_METHODS",
    "MMR_GATES",
    "RRF",
    "CombMNZ",
    "CombSUM",
    "FusedItem",
    "FusedList",
    "Fuser",
    "MMRGate",
    "MMRGateMode",
    "MMRPick",
    "MMRResult",
    "WeightedRRF",
    "adaptive_cut",
    "adaptive_k",
    "ca_rrf_weights",
    "make_fuser",
    "merge_lists",
    "minmax",
    "mmr",
    "mmr_applies",
    "redundancy",
    "rho",
]
