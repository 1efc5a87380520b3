"""Local personalized PageRank on a passage-entity bipartite graph, as pure functions.

Both entity-graph backends rank with these: the embedded `EntityGraph` over its whole matrices, the
PostgreSQL graph over the same matrices read from its tables into each reader process. The steps are:
`seed_weights` (positive seed weight per known passage), `extract_subgraph` (seeds -> their
entities -> those entities' passages, hubs left out, restart vectors normalised), `passage_scores`
(power iteration, optionally minus the restart mass) and `top_passages` (top-k, ties by passage id).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from amsrag.config import GraphConfig

TITLE, MENTION = 2, 1  # edge kinds: the entity is the passage's own title / the passage mentions it
MIN_SCORE = 1e-12  # passages scored at or below this are not returned


@dataclass(frozen=True)
class Subgraph:
    """A seeds' neighbourhood: entities x passages with the edge kinds, and the restart vectors."""

    entities: np.ndarray  # entity ids (rows of `kinds`)
    passages: np.ndarray  # passage rows (columns of `kinds`)
    kinds: sp.csr_array
    restart_e: np.ndarray
    restart_p: np.ndarray


def entity_major(by_passage: sp.csr_array) -> sp.csr_array:
    """Entities x passages (the transpose of passages x entities), indices sorted."""
    by_entity = sp.csr_array(by_passage.T)
    by_entity.sort_indices()
    return by_entity


def entity_idf(degree: np.ndarray, n_passages: int) -> np.ndarray:
    """ln(1 + N / degree) per entity (degree at least 1, N at least 1)."""
    return np.log1p(max(n_passages, 1) / np.maximum(degree, 1))


def seed_weights(seed_rows: Sequence[tuple[int, float]], known: Container[int]) -> dict[int, float]:
    """Positive seed weights summed per known passage row (unknown rows are ignored)."""
    weights: dict[int, float] = {}
    for row, weight in seed_rows:
        r = int(row)
        if r in known and weight > 0:
            weights[r] = weights.get(r, 0.0) + float(weight)
    return weights


def normalise_restart(restart_p: np.ndarray, restart_e: np.ndarray, query_entity_weight: float) -> None:
    """Scale the restart vectors in place: passages and entities share the mass by
    `query_entity_weight` when both have seeds, else the side with seeds takes it all."""
    total_p, total_e = restart_p.sum(), restart_e.sum()
    share_e = query_entity_weight if total_p > 0 and total_e > 0 else float(total_e > 0)
    if total_p > 0:
        restart_p *= (1.0 - share_e) / total_p
    if total_e > 0:
        restart_e *= share_e / total_e


def extract_subgraph(by_passage: sp.csr_array, by_entity: sp.csr_array, degree: np.ndarray,
                     query_entities: Sequence[int], passages: Mapping[int, float],
                     config: GraphConfig) -> Subgraph | None:
    """The neighbourhood of the seed passages (`passages`: row -> weight, from `seed_weights`) and
    the query's entities, without hub entities (degree above `max_entity_degree`); None when
    there is no usable seed."""
    hub = degree > config.max_entity_degree
    entity_seeds = np.array([e for e in query_entities if not hub[e]], dtype=np.int64)
    if not passages and not len(entity_seeds):
        return None
    seed_p = np.array(sorted(passages), dtype=np.int64)
    m = by_passage
    reached = [m.indices[m.indptr[r] : m.indptr[r + 1]] for r in seed_p]
    entities = np.unique(np.concatenate([entity_seeds, *reached]).astype(np.int64))
    entities = entities[~hub[entities]]
    block = by_entity[entities]
    rows, local = np.unique(np.concatenate([block.indices, seed_p]), return_inverse=True)
    kinds = sp.csr_array((block.data, local[: block.nnz], block.indptr), shape=(len(entities), len(rows)))
    restart_p = np.zeros(len(rows))
    restart_p[np.searchsorted(rows, seed_p)] = [passages[int(r)] for r in seed_p]
    restart_e = np.zeros(len(entities))
    restart_e[np.searchsorted(entities, entity_seeds)] = 1.0
    normalise_restart(restart_p, restart_e, config.query_entity_weight)
    return Subgraph(entities, rows, kinds, restart_e, restart_p)


def transitions(sub: Subgraph, idf: np.ndarray, config: GraphConfig) -> tuple[sp.csr_array, sp.csr_array]:
    """(entity<-passage, passage<-entity) column-stochastic transition blocks of the subgraph;
    `idf` is indexed by entity id."""
    kinds = sub.kinds
    weight = np.where(kinds.data == TITLE, config.title_weight, config.mention_weight)
    ent_of_edge = np.repeat(np.arange(kinds.shape[0]), np.diff(kinds.indptr))
    # entity -> passage: by edge weight, so an entity leads mostly to its own title passage
    out_e = np.bincount(ent_of_edge, weight, minlength=kinds.shape[0])
    to_p = sp.csr_array((weight / out_e[ent_of_edge], kinds.indices, kinds.indptr), shape=kinds.shape)
    # passage -> entity: every entity of the passage (its own title too) by mention weight x idf,
    # so frequent entities draw little of a passage's mass; a title-weighted step back to the
    # passage itself would only trap the walk there
    w_idf = config.mention_weight * idf[sub.entities][ent_of_edge]
    out_p = np.bincount(kinds.indices, w_idf, minlength=kinds.shape[1])
    to_e = sp.csr_array((w_idf / out_p[kinds.indices], kinds.indices, kinds.indptr), shape=kinds.shape)
    return to_e, sp.csr_array(to_p.T)


def personalized_pagerank(sub: Subgraph, idf: np.ndarray, config: GraphConfig) -> np.ndarray:
    """Passage scores of a personalized PageRank on the bipartite subgraph (power iteration)."""
    alpha = config.restart
    to_e, to_p = transitions(sub, idf, config)
    x_p, x_e = sub.restart_p.copy(), sub.restart_e.copy()
    for _ in range(config.iterations):
        x_p, x_e = (
            alpha * sub.restart_p + (1 - alpha) * (to_p @ x_e),
            alpha * sub.restart_e + (1 - alpha) * (to_e @ x_p),
        )
    return x_p


def passage_scores(sub: Subgraph, idf: np.ndarray, config: GraphConfig) -> np.ndarray:
    """The ranking score of each subgraph passage: its PageRank, minus its restart mass when
    `config.score` is "walk" (so a seed is not ranked for being a seed)."""
    scores = personalized_pagerank(sub, idf, config)
    if config.score == "walk":
        scores = scores - config.restart * sub.restart_p
    return scores


def top_candidates(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the positive scores that can be in the top k: the k best and every one tied with the
    k-th (ties are broken by passage id, so they all need their ids)."""
    positive = np.flatnonzero(scores > MIN_SCORE)
    if len(positive) > k:
        cut = np.partition(scores[positive], len(positive) - k)[len(positive) - k]
        positive = positive[scores[positive] >= cut]
    return positive


def top_passages(rows: np.ndarray, scores: np.ndarray, k: int,
                 ids: Sequence[str] | Mapping[int, str]) -> list[tuple[int, float, str]]:
    """Top-k (row, score, passage id) of the positive scores; `ids` is indexed by row (at least the rows
    of `top_candidates`), ties by id."""
    order = sorted(top_candidates(scores, k).tolist(), key=lambda i: (-float(scores[i]), ids[int(rows[i])]))[:k]
    return [(int(rows[i]), float(scores[i]), ids[int(rows[i])]) for i in order]
