"""One place that builds every retriever over a store: `FACTORIES`, keyed by (retriever name, backend).
A new retriever is one entry per backend here (and its name in `amsrag.types.RETRIEVERS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from amsrag.errors import InputError
from amsrag.retrieve.base import Retriever
from amsrag.retrieve.bm25 import BM25Retriever
from amsrag.retrieve.dense import DenseRetriever
from amsrag.retrieve.filtered import current_scope, ranking_within
from amsrag.retrieve.graph import GraphRetriever
from amsrag.store.base import PassageIndex
from amsrag.types import RETRIEVERS

if TYPE_CHECKING:
    from amsrag.store.embedded import EmbeddedIndex
    from amsrag.store.postgres.store import PostgresIndex

Factory = Callable[[Any], Retriever]  # the concrete backend -> a retriever over its current data


def _embedded_bm25(index: EmbeddedIndex) -> Retriever:
    return BM25Retriever(index.bm25_index, index)


def _embedded_dense(index: EmbeddedIndex) -> Retriever:
    return DenseRetriever(index.vector_index, index.encoder, index)


def _embedded_graph(index: EmbeddedIndex) -> Retriever:
    return GraphRetriever(index.entity_graph, index, [_embedded_bm25(index), _embedded_dense(index)],
                          index.config.graph)


def _postgres_bm25(index: PostgresIndex) -> Retriever:
    from amsrag.retrievers.postgres import PgBM25Retriever

    return PgBM25Retriever(index)


def _postgres_dense(index: PostgresIndex) -> Retriever:
    from amsrag.retrievers.postgres import PgDenseRetriever

    return PgDenseRetriever(index)


def _postgres_graph(index: PostgresIndex) -> Retriever:
    from amsrag.retrievers.postgres import PgEntityGraph

    return GraphRetriever(PgEntityGraph(index, index.config.graph), index,
                          [_postgres_bm25(index), _postgres_dense(index)], index.config.graph)


FACTORIES: dict[tuple[str, str], Factory] = {
    ("bm25", "embedded"): _embedded_bm25,
    ("dense", "embedded"): _embedded_dense,
    ("graph", "embedded"): _embedded_graph,
    ("bm25", "postgres"): _postgres_bm25,
    ("dense", "postgres"): _postgres_dense,
    ("graph", "postgres"): _postgres_graph,
}


def retriever_for(index: PassageIndex, name: str) -> Retriever:
    """The retriever `name` (one of `amsrag.types.RETRIEVERS`) over the index's current passages, built once per
    index generation and settings (the graph's query matcher is costly to build) and kept in `index.built`."""
    found = index.built.get(name)
    if found is None:
        factory = FACTORIES.get((name, index.backend))
        if factory is None:
            if name not in RETRIEVERS:
                raise InputError(f"unknown retriever {name!r}; choose one of {', '.join(RETRIEVERS)}")
            raise InputError(f"retriever {name!r} is not available on a {index.backend} index")
        found = index.built[name] = factory(index)
    return cast(Retriever, found)  # only this function fills `built` under a retriever's name


def scoped_retriever(index: PassageIndex, name: str) -> Retriever:
    """`retriever_for(index, name)`, ranking within the filter of the current call when one is in force
    (`amsrag.retrieve.filtered.scope`)."""
    retriever = retriever_for(index, name)
    allowed = current_scope()
    return retriever if allowed is None else ranking_within(allowed, retriever)
