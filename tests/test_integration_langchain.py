"""The LangChain adapter in a real LangChain chain (a scripted stand-in LLM): its documents equal amsrag's own
retrieval, in order, with amsrag's metadata; sync and async."""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from amsrag.integrations.langchain import AmsragRetriever
from api_index import QUESTIONS

PROMPT = PromptTemplate.from_template("Answer from the context.\n\n{context}\n\nQuestion: {question}")


def expected(index, question: str, system: str = "full", k: int | None = None) -> list[tuple[str, float]]:
    return [(p.id, p.score) for p in index.retrieve(question, system=system, k=k).passages]


def got(docs: list[Document]) -> list[tuple[str, float]]:
    return [(d.id, d.metadata["score"]) for d in docs]


def test_a_retrieval_chain_reads_amsrags_passages_in_order(api_index) -> None:
    retriever = AmsragRetriever(index=api_index)
    assert isinstance(retriever, BaseRetriever)
    llm = FakeListLLM(responses=["Neil Armstrong", "1902", "the Sun and the Moon lining up", "USS Hornet"])
    prompts: list[str] = []

    def context(inputs: dict) -> dict:
        text = "\n\n".join(f"[{d.id}] {d.page_content}" for d in inputs["docs"])
        prompts.append(text)
        return {"context": text, "question": inputs["question"]}

    chain = RunnableParallel(docs=retriever, question=RunnablePassthrough()).assign(
        answer=context | PROMPT | llm | StrOutputParser())
    for question, reply in zip(QUESTIONS, llm.responses, strict=True):
        out = chain.invoke(question)
        assert out["answer"] == reply
        assert got(out["docs"]) == expected(api_index, question)
        assert prompts[-1].startswith(f"[{out['docs'][0].id}] ")
    first = chain.invoke(QUESTIONS[0])["docs"][0]
    meta = first.metadata
    assert meta["rank"] == 1 and meta["id"] == first.id and meta["route"] in ("A", "B", "C")
    assert meta["source"].endswith("apollo.md") and meta["section"] == "The landing"
    assert meta["title"].startswith("Apollo 11")


def test_k_system_and_async_match_retrieve(api_index) -> None:
    retriever = AmsragRetriever(index=api_index.engine, system="bm25", k=2)
    docs = retriever.invoke(QUESTIONS[1])
    assert got(docs) == expected(api_index, QUESTIONS[1], system="bm25", k=2)
    assert len(docs) == 2 and {d.metadata["route"] for d in docs} == {"A"}

    async def both() -> list[list[Document]]:
        return list(await asyncio.gather(*(AmsragRetriever(index=api_index).ainvoke(q) for q in QUESTIONS[:2])))

    for question, async_docs in zip(QUESTIONS[:2], asyncio.run(both()), strict=True):
        assert got(async_docs) == expected(api_index, question)


def test_the_metadata_comes_from_the_passages_the_engine_read(api_index) -> None:
    """Every adapter hands on the stored passages the engine read (no second read of the store): the same metadata
    as reading them again, for every system, also after the corrective step's merges."""
    from dataclasses import replace

    from amsrag.api.passages import retrieved

    engine = api_index.engine
    for question, system in zip(QUESTIONS, ("full", "fixed", "A4", "bm25"), strict=True):
        result = engine.retrieve(question, system=system)
        assert result.passages and all(p.stored is not None and p.stored.id == p.id for p in result.passages)
        reread = replace(result, passages=[replace(p, stored=None) for p in result.passages])
        assert reread.passages == result.passages  # `stored` is not part of a passage's equality
        handed_on = retrieved(engine, result)
        assert handed_on == retrieved(engine, reread)
        assert all(r.metadata["source"].endswith(".md") and r.metadata["section"] for r in handed_on)
