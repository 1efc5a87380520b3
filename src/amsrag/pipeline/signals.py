"""What the learned reranker's features read from an index (`fuse.features.CandidateSignals`), and the index's
profile its artifact is checked against."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from amsrag.embed.encoder import model_id_for
from amsrag.errors import InputError
from amsrag.fuse.learned import IndexProfile
from amsrag.retrievers import retriever_for
from amsrag.store.base import PassageIndex
from amsrag.types import RETRIEVERS


@runtime_checkable
class ScoresRows(Protocol):
    """A BM25 retriever that scores given passages for a query."""

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray: ...


@runtime_checkable
class RowEntities(Protocol):
    """An entity graph that names the entities of a query and of a passage."""

    def query_entities(self, query: str) -> list[int]: ...

    def entity_overlap(self, rows: Sequence[int], entities: Sequence[int]) -> np.ndarray: ...


class IndexSignals:
    """`CandidateSignals` over a `PassageIndex`: stored vectors, BM25 of any passage, graph entities."""

    def __init__(self, index: PassageIndex) -> None:
        self.index = index
        bm25 = retriever_for(index, "bm25")
        graph = getattr(retriever_for(index, "graph"), "graph", None)
        if not isinstance(bm25, ScoresRows):
            raise InputError(f"{index.location}: the learned fuser needs BM25 scores of given passages, which this "
                             f"index's BM25 retriever ({type(bm25).__name__}) does not provide; use a CA-RRF system")
        if not isinstance(graph, RowEntities):
            raise InputError(f"{index.location}: the learned fuser needs the entities of given passages, which this "
                             f"index's entity graph ({type(graph).__name__}) does not provide; use a CA-RRF system")
        self.bm25: ScoresRows = bm25
        self.graph: RowEntities = graph

    def vectors(self, rows: Sequence[int]) -> np.ndarray:
        return self.index.vectors_for_rows(rows)

    def bm25_scores(self, query: str, rows: Sequence[int]) -> np.ndarray:
        return self.bm25.score_rows(query, rows)

    def entity_share(self, query: str, rows: Sequence[int]) -> tuple[np.ndarray, int]:
        entities = self.graph.query_entities(query)
        if not entities:
            return np.zeros(len(rows)), 0
        return self.graph.entity_overlap(rows, entities) / len(entities), len(entities)


def index_profile(index: PassageIndex) -> IndexProfile:
    """The retrievers, encoder and BM25 settings of `index`, as the learned fuser's card records them."""
    config = index.config
    bm25 = config.bm25
    return IndexProfile(RETRIEVERS, model_id_for(config.embedding),
                        {"method": bm25.method, "k1": bm25.k1, "b": bm25.b, "stemmer": bm25.stemmer,
                         "stopwords": bm25.stopwords})
