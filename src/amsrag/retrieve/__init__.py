"""Retrievers: BM25 (sparse), dense (MiniLM + exact/HNSW), entity graph (personalized PageRank)."""

from amsrag.retrieve.base import Retriever, RowLookup, check_query

__all__ = ["Retriever", "RowLookup", "check_query"]
