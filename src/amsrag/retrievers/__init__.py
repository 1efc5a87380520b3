"""Retrievers built over a store: the registry (`registry.py`: one factory per retriever name and backend,
`retriever_for(index, name)`), the PostgreSQL retrievers (`postgres.py`). The store keeps passages and their
derived indexes; this package, above both `store/` and `retrieve/`, turns them into retrievers."""

from amsrag.retrievers.registry import FACTORIES, retriever_for, scoped_retriever

__all__ = ["FACTORIES", "retriever_for", "scoped_retriever"]
