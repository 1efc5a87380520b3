"""The LlamaIndex adapter inside a real `RetrieverQueryEngine` (LlamaIndex's MockLLM stands in for the LLM):
its source nodes equal amsrag's own retrieval, in order, with amsrag's metadata."""

from __future__ import annotations

import asyncio

from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode

from amsrag.integrations.llamaindex import AmsragRetriever
from api_index import QUESTIONS


def expected(index, question: str, system: str = "full", k: int | None = None) -> list[tuple[str, float]]:
    return [(p.id, p.score) for p in index.retrieve(question, system=system, k=k).passages]


def test_a_query_engine_answers_from_amsrags_passages(api_index) -> None:
    retriever = AmsragRetriever(api_index)
    assert isinstance(retriever, BaseRetriever)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
    for question in QUESTIONS:
        response = engine.query(question)
        assert [(n.node.node_id, n.score) for n in response.source_nodes] == expected(api_index, question)
        assert str(response).strip()  # MockLLM echoes part of the prompt the synthesizer built from the nodes
    node = engine.query(QUESTIONS[0]).source_nodes[0].node
    assert node.metadata["source"].endswith("apollo.md") and node.metadata["rank"] == 1
    llm_text = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "section: The landing" in llm_text and "score:" not in llm_text


def test_k_system_and_async_match_retrieve(api_index) -> None:
    retriever = AmsragRetriever(api_index.engine, system="dense", k=2)
    nodes = retriever.retrieve(QUESTIONS[2])
    assert [(n.node.node_id, n.score) for n in nodes] == expected(api_index, QUESTIONS[2], system="dense", k=2)
    nodes = asyncio.run(AmsragRetriever(api_index).aretrieve(QUESTIONS[3]))
    assert [(n.node.node_id, n.score) for n in nodes] == expected(api_index, QUESTIONS[3])
