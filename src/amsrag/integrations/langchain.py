"""amsrag as a LangChain retriever (`pip install 'amsrag[langchain]'`):

    from amsrag.integrations.langchain import AmsragRetriever
    retriever = AmsragRetriever(index=amsrag.Index.open("my-index"), k=5)
    docs = retriever.invoke("Who founded the observatory?")   # or await retriever.ainvoke(...)
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from amsrag.api.passages import engine_of, retrieve


class AmsragRetriever(BaseRetriever):
    """`Document`s of amsrag's adaptive retrieval, in its order; `metadata` holds score, rank, route, title,
    id and, where known, source, page and section. `index`: an `amsrag.Index` or an `amsrag.Engine`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    system: str = "full"
    k: int | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=r.text, metadata=r.metadata, id=r.id)
                for r in retrieve(engine_of(self.index), query, self.system, self.k)]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        # the engine is synchronous and CPU-bound: run it off the event loop
        found = await asyncio.to_thread(retrieve, engine_of(self.index), query, self.system, self.k)
        return [Document(page_content=r.text, metadata=r.metadata, id=r.id) for r in found]
