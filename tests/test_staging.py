"""Staged vectors are committed by size (`ingest.stage_every`) or time (`ingest.stage_seconds`), whichever comes
first: the decision function, and a real build whose stages follow a clock on which embedding is slow."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from amsrag.config import AmsragConfig, IngestConfig
from amsrag.embed.encoder import passage_text_for_embedding
from amsrag.indexing import ingest_inputs
from amsrag.indexing.job import FIRST_STAGE, stage_size
from amsrag.store import EmbeddedIndex


def test_stage_size_by_size_or_time_whichever_first() -> None:
    assert stage_size(1024, 20, 0, 0.0) == FIRST_STAGE  # nothing measured yet: a small first stage
    assert stage_size(16, 20, 0, 0.0) == 16
    assert stage_size(1024, 20, 64, 0.5) == 1024  # 128 a second: 20 s would be 2560, size comes first
    assert stage_size(1024, 20, 64, 8.0) == 160  # 8 a second: 20 s hold 160, time comes first
    assert stage_size(1024, 20, 10, 400.0) == 1  # slower than one per stage_seconds: one at a time
    assert stage_size(1024, 20, 64, 0.0) == 1024  # a stage too quick to time


def test_stage_seconds_default_and_bounds() -> None:
    assert IngestConfig().stage_seconds == 20
    with pytest.raises(ValidationError):
        IngestConfig(stage_seconds=0.5)


def test_a_build_on_a_slow_clock_stages_by_time(tmp_path: Path) -> None:
    passages = [{"id": f"p{i}", "title": f"Item {i}", "text": f"Item {i} costs {i * 3} euros in the shop."}
                for i in range(FIRST_STAGE + 6)]
    corpus = tmp_path / "items.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in passages), encoding="utf-8")
    config = AmsragConfig()
    config.ingest.stage_seconds = 1
    ticks = itertools.count(step=100.0)  # every reading of the clock 100 s later: each stage "takes" 100 s
    with EmbeddedIndex.create(tmp_path / "idx", config) as idx:
        report = ingest_inputs(idx, [corpus], clock=lambda: next(ticks))
        # the first stage measures 64 passages in 100 s; 1 s then holds less than one: one a stage
        assert (report.stages, report.embedded, report.added) == (1 + 6, FIRST_STAGE + 6, FIRST_STAGE + 6)
        assert report.to_dict()["stages"] == 7
        rows = idx.rows_for_ids([p["id"] for p in passages])
        stored = idx.vectors_for_rows([rows[p["id"]] for p in passages])
        at_once = idx.encoder.encode([passage_text_for_embedding(p["title"], p["text"]) for p in passages])
        np.testing.assert_array_equal(stored, at_once)  # staging in pieces changes no vector
        assert idx.check().ok
