"""Shared fixtures: a small real slice of ../shared/data (see fixtures/retrieval_slice/SOURCES.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amsrag.types import Passage, QAExample
from api_index import api_index, api_index_dir  # noqa: F401  (the Python API, adapter and MCP tests' index)
from pg_server import pg_built_index, pg_server, pg_url  # noqa: F401  (PostgreSQL fixtures, see pg_server.py)

FIXTURES = Path(__file__).parent / "fixtures"
SLICE = FIXTURES / "retrieval_slice"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no usage reports from the Haystack tests


def read_slice_passages() -> list[Passage]:
    rows = [json.loads(line) for line in (SLICE / "passages.jsonl").read_text("utf-8").splitlines()]
    return [Passage(id=r["id"], title=r["title"], text=r["text"], doc_id=r["id"], metadata=r["metadata"]) for r in rows]


def read_slice_questions() -> list[QAExample]:
    rows = [json.loads(line) for line in (SLICE / "questions.jsonl").read_text("utf-8").splitlines()]
    return [QAExample(id=r["id"], question=r["question"], answers=r["answers"], gold_passage_ids=r["gold_passage_ids"],
                      dataset=r["dataset"], complexity=r["complexity"], qtype=r["qtype"]) for r in rows]


@pytest.fixture(scope="session")
def slice_passages() -> list[Passage]:
    return read_slice_passages()


@pytest.fixture(scope="session")
def slice_questions() -> list[QAExample]:
    return read_slice_questions()


@pytest.fixture(scope="session")
def built_index(tmp_path_factory, slice_passages):
    """The slice indexed once per session, through the real embedding path. Tests must not modify it."""
    from amsrag.store import EmbeddedIndex

    index = EmbeddedIndex.create(tmp_path_factory.mktemp("idx") / "index")
    index.add(slice_passages)
    return index


@pytest.fixture(scope="session")
def slice_vectors(built_index, slice_passages):
    """Stored vectors of the slice, aligned with `slice_passages`, so other tests need not re-embed."""
    rows = built_index.rows_for_ids([p.id for p in slice_passages])
    return built_index.vectors_for_rows([rows[p.id] for p in slice_passages])


@pytest.fixture()
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}: the shared QA data is needed for this test")
    return SHARED_DATA
