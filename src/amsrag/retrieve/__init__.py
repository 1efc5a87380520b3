"""Retrievers: BM25 (sparse), dense (MiniLM + exact/HNSW), entity graph (personalized PageRank)."""

from amsrag.retrieve.base import GraphRanker, Retriever, RowLookup, check_query

__all__ = ["GraphRanker", "Retriever", "RowLookup", "check_query"]
