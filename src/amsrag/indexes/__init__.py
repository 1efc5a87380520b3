"""The derived data structures an index keeps, below the store that persists them (issue 41).

`bm25.py` (with `bm25_segments.py`, `cjk_tokens.py`) is the BM25 index, `vectors.py` the vector index, `entity_graph.py`
the entity graph (with `pagerank.py`, `graph_parts.py`, and the entity matching of `entities.py`, `entities_zh.py`),
`allowed_rows.py` the rows a metadata filter allows, `themes.py` the corpus-themes model and `theme_terms.py` the
c-TF-IDF terms it labels themes with. Searching them is `amsrag.retrieve` (the retrievers) and `amsrag.themes`."""
