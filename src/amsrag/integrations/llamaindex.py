"""amsrag as a LlamaIndex retriever (`pip install 'amsrag[llamaindex]'`), usable inside a
`RetrieverQueryEngine`:

    from amsrag.integrations.llamaindex import AmsragRetriever
    retriever = AmsragRetriever(amsrag.Index.open("my-index"), k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=your_llm)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from amsrag.api.passages import engine_of, retrieve

if TYPE_CHECKING:
    from amsrag.api import Index
    from amsrag.pipeline.engine import Engine


class AmsragRetriever(BaseRetriever):
    """`NodeWithScore`s of amsrag's adaptive retrieval, in its order, each a `TextNode` whose id is the passage
    id and whose metadata holds score, rank, route, title and, where known, source, page and section (the
    bookkeeping keys are kept out of what the LLM and the embedding read)."""

    LLM_HIDDEN = ("id", "score", "rank", "route", "complexity", "system", "doc_id")

    def __init__(self, index: Index | Engine, system: str = "full", k: int | None = None) -> None:
        super().__init__()
        self.engine = engine_of(index)
        self.system = system
        self.k = k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        out = []
        for r in retrieve(self.engine, query_bundle.query_str, self.system, self.k):
            hidden = [key for key in self.LLM_HIDDEN if key in r.metadata]
            node = TextNode(id_=r.id, text=r.text, metadata=r.metadata, excluded_llm_metadata_keys=hidden,
                            excluded_embed_metadata_keys=hidden)
            out.append(NodeWithScore(node=node, score=r.score))
        return out
