"""The Haystack adapter in a real Haystack `Pipeline` beside Haystack's own PromptBuilder and AnswerBuilder (a
scripted stand-in generator): its documents equal amsrag's own retrieval, in order, with amsrag's metadata."""

from __future__ import annotations

from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder, PromptBuilder

from amsrag.integrations.haystack import AmsragRetriever
from api_index import QUESTIONS

TEMPLATE = """Answer from the documents.
{% for doc in documents %}[{{ doc.id }}] {{ doc.content }}
{% endfor %}Question: {{ query }}"""


@component
class ScriptedGenerator:
    """A stand-in for an LLM generator: replies from a script, and keeps the prompts it was given."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    @component.output_types(replies=list[str])
    def run(self, prompt: str) -> dict[str, list[str]]:
        self.prompts.append(prompt)
        return {"replies": [self.replies[(len(self.prompts) - 1) % len(self.replies)]]}


def expected(index, question: str, system: str = "full", k: int | None = None) -> list[tuple[str, float]]:
    return [(p.id, p.score) for p in index.retrieve(question, system=system, k=k).passages]


def got(docs: list[Document]) -> list[tuple[str, float | None]]:
    return [(d.id, d.score) for d in docs]


def test_a_rag_pipeline_reads_amsrags_documents_in_order(api_index) -> None:
    generator = ScriptedGenerator(["Neil Armstrong", "1902", "alignment", "USS Hornet"])
    pipeline = Pipeline()
    pipeline.add_component("retriever", AmsragRetriever(api_index))
    pipeline.add_component("prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["query"]))
    pipeline.add_component("llm", generator)
    pipeline.add_component("answer_builder", AnswerBuilder())
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    pipeline.connect("llm.replies", "answer_builder.replies")
    pipeline.connect("retriever.documents", "answer_builder.documents")
    for question, reply in zip(QUESTIONS, generator.replies, strict=True):
        out = pipeline.run({"retriever": {"query": question}, "prompt_builder": {"query": question},
                            "answer_builder": {"query": question}})
        answer = out["answer_builder"]["answers"][0]
        assert answer.data == reply
        assert got(answer.documents) == expected(api_index, question)
        assert generator.prompts[-1].split("\n")[1].startswith(f"[{answer.documents[0].id}] ")
    first = AmsragRetriever(api_index).run(QUESTIONS[0])["documents"][0]
    assert first.meta["source"].endswith("apollo.md") and first.meta["rank"] == 1 and first.meta["route"]


def test_top_k_and_system_match_retrieve(api_index) -> None:
    retriever = AmsragRetriever(api_index.engine, system="bm25", top_k=3)
    assert got(retriever.run(QUESTIONS[1])["documents"]) == expected(api_index, QUESTIONS[1], "bm25", 3)
    assert got(retriever.run(QUESTIONS[1], top_k=1)["documents"]) == expected(api_index, QUESTIONS[1], "bm25", 1)
