"""Retrievers: BM25 (sparse), dense (MiniLM + exact/HNSW), entity graph (personalized PageRank)."""

from amsrag.retrieve.base import GraphRanker, Retriever, RowLookup

__all__ = ["GraphRanker", "Retriever", "RowLookup"]
