"""Embedding-similarity routing: the query library's vote blended into the classifier's p(multi_hop).

An index keeps labelled queries (question, hop label one_hop | multi_hop, where the label came
from) with their 384-d MiniLM embeddings (`PassageIndex.query_library()`). For a new query,
`QueryLibrary.vote(query_vector, LibrarySettings())` looks at its k nearest stored queries; those
with a cosine of at least `threshold` are close, and their weighted share of multi_hop (each weighs its
cosine, or its margin over the threshold: `LibrarySettings.weights`) is `p_lib`, weighed by
w = S / (S + strength) (S: the sum of the close neighbours' weights). `blend` mixes it into
the classifier's calibrated probability: (1 - w) p + w p_lib; with no close neighbour, p itself.

The library itself is defined on the store's layer (`amsrag.store.query_library`: both backends
persist it, and the store may not import this package); this module is its public home.
"""

from __future__ import annotations

from amsrag.errors import InputError
from amsrag.store.query_library import (
    HOP_LABELS,
    BatchVotes,
    Hop,
    LibraryAddReport,
    LibrarySettings,
    LibraryVote,
    QueryLibrary,
    Weighting,
)


def blend(p_multi_classifier: float, vote: LibraryVote | None) -> float:
    """(1 - w) p + w p_lib; `p_multi_classifier` itself when there is no vote (no close neighbour)."""
    p = float(p_multi_classifier)
    if not 0.0 <= p <= 1.0:
        raise InputError(f"p(multi_hop) must be a probability in [0, 1], got {p_multi_classifier!r}")
    if vote is None:
        return p
    return (1.0 - vote.weight) * p + vote.weight * vote.p_multi


__all__ = ["HOP_LABELS", "BatchVotes", "Hop", "LibraryAddReport", "LibrarySettings", "LibraryVote", "QueryLibrary",
           "Weighting", "blend"]
