"""The docs/integrations.md examples run as written, against a copy of the shared small index, with each
framework's scripted stand-in LLM as `your_llm`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from llama_index.core.llms import MockLLM

DOC = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"


def test_the_integrations_page_runs(api_index, api_index_dir: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(api_index_dir, tmp_path / "my-index")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), re.S)
    assert len(blocks) == 3
    langchain: dict[str, object] = {}
    exec(compile(blocks[0], "integrations.md LangChain", "exec"), langchain)
    expected = [p.id for p in api_index.retrieve("When was Hillcrest Observatory founded?", k=3).passages]
    assert [d.id for d in langchain["docs"]] == expected
    llamaindex: dict[str, object] = {"your_llm": MockLLM(max_tokens=8)}
    exec(compile(blocks[1], "integrations.md LlamaIndex", "exec"), llamaindex)
    expected = [p.id for p in api_index.retrieve("What causes spring tides?", k=3).passages]
    assert [n.node.node_id for n in llamaindex["response"].source_nodes] == expected
    haystack: dict[str, object] = {}
    exec(compile(blocks[2], "integrations.md Haystack", "exec"), haystack)
    expected = [p.id for p in api_index.retrieve("Which ship recovered the Apollo 11 crew?", k=3).passages]
    assert [d.id for d in haystack["out"]["retriever"]["documents"]] == expected
