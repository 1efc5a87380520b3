"""Documentation rows of the citation-support audit (issue 37): kinds, labels and splits on a hand-made
documentation folder, and the set registry's split discipline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from amsrag.audit.features import FEATURE_NAMES
from amsrag.generate.span_reader import SpanReader
from amsrag.learn.audit.doc_rows import DOC_SETS, DocSet, build_doc_rows, doc_set, folder_sha256, near_misses
from amsrag.learn.reader.doc_data import doc_items, doc_passages

CONFIG_MD = """# Configuring Tool

## max_width

Maximum width of each line.

Default value: 100
Possible values: any positive integer
Stable: Yes

## brace_style

Brace style for items.

Default value: "SameLineWhere"
Possible values: "AlwaysNextLine", "PreferSameLine", "SameLineWhere"
Stable: No

## hard_tabs

Use tab characters for indentation, spaces for alignment.

Default value: false
Possible values: true, false
Stable: Yes
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs") / "tool"
    root.mkdir()
    (root / "Configurations.md").write_text(CONFIG_MD, encoding="utf-8")
    return root


def test_near_misses_are_other_values_of_the_settings_list(folder: Path) -> None:
    items = doc_items(doc_passages(folder, "tool"), "tool")
    brace = next(it for it in items if "brace_style" in it.question)
    assert brace.answers == ['"SameLineWhere"']
    near = near_misses(brace, items, 0.3)
    assert '"AlwaysNextLine"' in near and '"PreferSameLine"' in near
    assert all("SameLineWhere" not in v for v in near)


def test_doc_rows_kinds_labels_and_splits(folder: Path) -> None:
    tool = DocSet("tool", "tool", "cal", "x/tool", "0" * 40, "MIT")
    rows = build_doc_rows(folder.parent, [tool], SpanReader.load())
    assert rows.x.shape == (len(rows.y), len(FEATURE_NAMES))
    kinds = dict(zip(rows.kind.tolist(), rows.y.tolist(), strict=False))
    assert kinds["doc-gold"] == 1 and kinds["doc-neighbour"] == 0 and kinds["doc-near"] == 0
    assert set(rows.y[rows.kind != "doc-gold"].tolist()) == {0}
    assert set(rows.split.tolist()) == {"cal"} and set(rows.dataset.tolist()) == {"docs:tool"}
    assert int((rows.kind == "doc-gold").sum()) == len(rows.questions) == 3
    info = rows.sets["tool"]
    assert info["sha256"] == folder_sha256(folder) and info["rows"] == len(rows.y)
    assert np.all(rows.question < len(rows.questions))


def test_registered_sets_are_not_evaluated_sets_and_split_by_set() -> None:
    evaluated = {"mkdocs", "cargo", "poetry", "nodejs", "pip", "git", "r", "sqlite"}
    assert not evaluated & {s.name for s in DOC_SETS}
    assert {s.split for s in DOC_SETS} == {"train", "cal"}
    assert all(len(s.commit) == 40 for s in DOC_SETS)
    with pytest.raises(ValueError):
        doc_set("mkdocs")


def test_doc_default_reads_whose_default_the_answer_is() -> None:
    from amsrag.audit.features import doc_default

    title, text = "Configuring Tool › brace_style", CONFIG_MD.split("## brace_style")[1].split("## hard_tabs")[0]
    asked = "What is the default value of brace_style?"
    assert doc_default(asked, '"SameLineWhere"', [title], [text]) > 0
    assert doc_default(asked, "PreferSameLine", [title], [text]) == -1.0  # a possible value, not the default
    other = doc_default("What is the default value of max_width?", "SameLineWhere", [title], [text])
    assert -1.0 < other < doc_default(asked, "SameLineWhere", [title], [text])  # another setting's default
    assert doc_default("Which option sets the brace style?", "brace_style", [title], [text]) == 0.0
    assert doc_default("What is the default of css.include?", "[]", ["css › css.include"], ["Default: []"]) > 0
