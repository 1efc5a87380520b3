"""amsrag as a Haystack 2.x/3.x retriever component (`pip install 'amsrag[haystack]'`):

    from amsrag.integrations.haystack import AmsragRetriever
    pipeline.add_component("retriever", AmsragRetriever(amsrag.Index.open("my-index"), top_k=5))
    pipeline.connect("retriever.documents", "prompt_builder.documents")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from haystack import Document, component

from amsrag.api.passages import engine_of, retrieve

if TYPE_CHECKING:
    from amsrag.api import Index
    from amsrag.pipeline.engine import Engine


@component
class AmsragRetriever:
    """Haystack `Document`s of amsrag's adaptive retrieval, in its order (`meta`: rank, route, title, id and,
    where known, source, page and section; `score`: amsrag's fused score)."""

    def __init__(self, index: Index | Engine, system: str = "full", top_k: int | None = None) -> None:
        self.engine = engine_of(index)
        self.system = system
        self.top_k = top_k

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None) -> dict[str, list[Document]]:
        """`top_k`: this run's number of passages (default: the component's, else the route's own k)."""
        found = retrieve(self.engine, query, self.system, top_k if top_k is not None else self.top_k)
        return {"documents": [Document(id=r.id, content=r.text, meta=r.metadata, score=r.score) for r in found]}
