"""Answer generation (DESIGN §2): a = f(q, D*) with citations.

`extractive` (default, no LLM: the trained span reader), `heuristic` (the earlier sentence reader),
`llamacpp` (a local GGUF), `openai` (any OpenAI-compatible server);
`TargGate` decides when a generator with its own knowledge may skip retrieval.
"""

from amsrag.generate.base import (
    ABSTAIN,
    AbstainsBelow,
    CalibratedReader,
    Completes,
    EvidencePassage,
    Generation,
    Generator,
    GeneratorError,
    Quote,
    ReadsQueryVector,
    generate_answer,
    parse_citations,
    validate_citations,
)
from amsrag.generate.factory import GENERATORS, make_generator
from amsrag.generate.metrics import exact_match, normalize_answer, token_f1

__all__ = [
    "ABSTAIN",
    "GENERATORS",
    "AbstainsBelow",
    "CalibratedReader",
    "Completes",
    "EvidencePassage",
    "Generation",
    "Generator",
    "GeneratorError",
    "Quote",
    "ReadsQueryVector",
    "exact_match",
    "generate_answer",
    "make_generator",
    "normalize_answer",
    "parse_citations",
    "token_f1",
    "validate_citations",
]
