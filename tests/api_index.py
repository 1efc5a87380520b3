"""A small real index over tests/fixtures/api_docs, built once per session through `amsrag.Index.build`:
the Python API, adapter and MCP tests share it (they must not modify it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

API_DOCS = Path(__file__).parent / "fixtures" / "api_docs"
QUESTIONS = ["Who was the first person to walk on the Moon?", "When was Hillcrest Observatory founded?",
             "What causes spring tides?", "Which ship recovered the Apollo 11 crew?"]


@pytest.fixture(scope="session")
def api_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import amsrag

    root = tmp_path_factory.mktemp("api")
    shutil.copytree(API_DOCS, root / "docs")
    with amsrag.Index.build(root / "index", [f"docs={root / 'docs'}"]):
        pass
    return root / "index"


@pytest.fixture(scope="session")
def api_index(api_index_dir: Path) -> Iterator[object]:
    import amsrag

    with amsrag.Index.open(api_index_dir) as index:
        yield index
