"""The Python API (amsrag.Index) on a small real index (tests/test_guides.py runs docs/python-api.md's examples)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import amsrag
from amsrag.retrievers import retriever_for
from api_index import API_DOCS, QUESTIONS


def test_import_amsrag_stays_light() -> None:
    code = ("import sys, amsrag; "
            "print(sorted(m for m in ('numpy', 'amsrag.pipeline', 'amsrag.api') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_exports_are_the_engine_objects() -> None:
    from amsrag.pipeline.engine import Engine
    from amsrag.pipeline.results import AnswerResult, RetrievalResult

    assert (amsrag.AnswerResult, amsrag.RetrievalResult, amsrag.Engine) == (AnswerResult, RetrievalResult, Engine)
    assert all(hasattr(amsrag, name) for name in amsrag.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        amsrag.Nope  # noqa: B018


def test_ask_matches_the_engine_and_cites_with_sources(api_index) -> None:
    question = QUESTIONS[0]
    answer = api_index.ask(question)
    direct = api_index.engine.ask(question)
    assert (answer.answer, answer.citations, answer.abstained) == (direct.answer, direct.citations, direct.abstained)
    citations = api_index.citations(answer)
    assert [c.id for c in citations] == answer.citations
    assert citations and citations[0].source is not None and citations[0].source.endswith("apollo.md")
    assert citations[0].section == "The landing"
    route = amsrag.route_of(answer.trace)
    assert route.strategy == answer.trace.strategy and route.reason == answer.trace.reason
    assert set(route.retrievers) == {run.name for run in answer.trace.runs}


def test_retrieve_and_search_equal_the_engine_and_the_retriever(api_index) -> None:
    result = api_index.retrieve(QUESTIONS[1], k=3)
    direct = api_index.engine.retrieve(QUESTIONS[1], k=3)
    assert [(p.id, p.score) for p in result.passages] == [(p.id, p.score) for p in direct.passages]
    assert result.passages[0].id.startswith("docs/observatory.md#")
    assert [p.id for p in api_index.passages(result)] == [p.id for p in result.passages]
    hits = api_index.search("reflecting telescope", retriever="bm25", k=2)
    assert [h.id for h in hits] == [h.id for h in retriever_for(api_index.engine.index, "bm25").search(
        "reflecting telescope", k=2)]
    with pytest.raises(amsrag.InputError, match="unknown retriever 'bm26'"):
        api_index.search("x", retriever="bm26")
    with pytest.raises(amsrag.InputError, match="max_question_chars"):
        api_index.retrieve("x" * 100_000)


def test_build_refuses_bad_input_and_leaves_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(amsrag.InputError, match="no supported files"):
        amsrag.Index.build(tmp_path / "index", [empty])
    assert not (tmp_path / "index").exists()


def test_add_and_sync(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(API_DOCS, docs)
    with amsrag.Index.build(tmp_path / "index", [docs]) as index:
        before = len(index)
        (docs / "tides.md").unlink()
        report = index.sync([docs])
        assert report.documents_deleted == 1 and len(index) < before
        extra = tmp_path / "extra.md"
        extra.write_text("# Comets\n\nHalley's Comet returns about every 76 years.\n", encoding="utf-8")
        report = index.add([extra])
        assert report.added == 1
        assert index.retrieve("How often does Halley's Comet return?").passages[0].title.startswith("Comets")
