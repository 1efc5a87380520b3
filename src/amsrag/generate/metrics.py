"""Answer metrics with SQuAD normalisation (DESIGN §7): exact match and token F1, max over gold aliases."""

from __future__ import annotations

# One implementation of the SQuAD v1.1 answer metrics lives in amsrag.evaluate.metrics (checked there
# against the official script); the generators import them from here.
from amsrag.evaluate.metrics import exact_match, f1_score, normalize_answer

token_f1 = f1_score

__all__ = ["exact_match", "normalize_answer", "token_f1"]
