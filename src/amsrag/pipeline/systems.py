"""The systems one run compares (DESIGN §7, §9): fixed pipelines, single retrievers, ablations A0–A4."""

from __future__ import annotations

from dataclasses import dataclass

from amsrag.errors import InputError
from amsrag.types import RETRIEVERS


@dataclass(frozen=True, slots=True)
class SystemSpec:
    name: str
    adaptive: bool  # route per query from the classifier's (c, alpha)
    fusion: str  # "none" (one list) | "rrf" | "ca-rrf" | "learned" (reranker over CA-RRF) | "experts" (MoRE)
    mmr: bool
    retrievers: tuple[str, ...] = ()  # the fixed retriever set of non-adaptive systems
    label_only: bool = False  # Adaptive-RAG style: route by the argmax label, ignore alpha
    corrective: bool = False  # run the corrective step (DESIGN §6) when the configuration enables it
    taxonomy: bool = False  # the five-way decision: aggregation / structured questions take their own routes
    compose: bool = False  # multi-step questions also answered by the decomposer's chain (`pipeline.compose`)

    @property
    def classifies(self) -> bool:
        return self.adaptive or self.fusion in ("ca-rrf", "learned", "experts")


_FIXED = SystemSpec("fixed", adaptive=False, fusion="rrf", mmr=False, retrievers=RETRIEVERS)
SYSTEMS: dict[str, SystemSpec] = {
    "bm25": SystemSpec("bm25", False, "none", False, ("bm25",)),
    "dense": SystemSpec("dense", False, "none", False, ("dense",)),
    "graph": SystemSpec("graph", False, "none", False, ("graph",)),
    "fixed": _FIXED,
    "A0": SystemSpec("A0", False, "rrf", False, RETRIEVERS),
    "A1": SystemSpec("A1", False, "ca-rrf", False, RETRIEVERS),
    "A2": SystemSpec("A2", True, "rrf", False),
    "A3": SystemSpec("A3", True, "ca-rrf", False),
    "A4": SystemSpec("A4", True, "ca-rrf", True),
    # adaptive routes, the learned reranker over CA-RRF, MMR where the candidates are redundant, the corrective step
    "full": SystemSpec("full", True, "learned", True, corrective=True, taxonomy=True, compose=True),
    # issue 36: `full` without the decomposer's chains (the plain reader's answer always stands)
    "full-plain": SystemSpec("full-plain", True, "learned", True, corrective=True, taxonomy=True),
    # issue 19: `full` on the three-class taxonomy (every question down the text path), to price the other two
    "full-3": SystemSpec("full-3", True, "learned", True, corrective=True, compose=True),
    "adaptive-rag": SystemSpec("adaptive-rag", True, "rrf", False, label_only=True),
    # issue 16: the learned reranker and the query-dependent expert weights, on the fixed and adaptive routes
    "fixed-learned": SystemSpec("fixed-learned", False, "learned", False, RETRIEVERS),
    "learned": SystemSpec("learned", True, "learned", False),
    "experts": SystemSpec("experts", True, "experts", False),
}


def system_spec(name: str) -> SystemSpec:
    try:
        return SYSTEMS[name]
    except KeyError:
        raise InputError(f"unknown system {name!r}; choose one of {', '.join(SYSTEMS)}") from None
