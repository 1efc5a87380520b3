"""Ingest speed settings: token-budget batches, the bulk session, NER worker processes.

Every setting must leave the output unchanged: bulk vectors equal the one-by-one ones, and NER with worker
processes equals NER in one process."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from amsrag.config import EmbeddingConfig, GraphConfig
from amsrag.embed.encoder import MiniLMEncoder, model_id_for, passage_text_for_embedding, token_batches
from amsrag.indexes.entities import extract_ner
from amsrag.indexes.entity_graph import ner_workers


def test_token_batches_respect_the_budget_and_cover_every_text() -> None:
    rng = np.random.default_rng(3)
    lengths = [*rng.integers(3, 257, size=500).tolist(), 300, 3]  # one longer than a budget of 256 rows x 1
    budget, max_rows = 2048, 64
    batches = token_batches(lengths, budget, max_rows)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(len(lengths)))
    widths = []
    for b in batches:
        width = max(lengths[i] for i in b)
        widths.append(width)
        assert len(b) <= max_rows
        assert len(b) * width <= budget or len(b) == 1
        # sorted by token count: a batch never holds a text shorter than the previous batch's longest
    assert widths == sorted(widths)
    # short texts get big batches, long ones small
    assert len(batches[0]) >= 50 and len(batches[-1]) <= 8
    # greedy: adding the next text to a batch would have broken a limit
    for b, nxt in itertools.pairwise(batches):
        w = lengths[nxt[0]]
        assert len(b) + 1 > max_rows or (len(b) + 1) * w > budget
    assert token_batches([], budget, max_rows) == []


def test_token_batches_with_a_budget_smaller_than_a_text() -> None:
    assert [b.tolist() for b in token_batches([10, 10, 10], 5, 8)] == [[0], [1], [2]]


@pytest.fixture(scope="module")
def texts(slice_passages) -> list[str]:
    out = [passage_text_for_embedding(p.title, p.text) for p in slice_passages[:70]]
    return [*out, "a", "Who directed Ed Wood?", "x " * 400]  # one word, a question, a truncated long text


def test_bulk_vectors_equal_one_by_one(texts) -> None:
    config = EmbeddingConfig(batch_tokens=2048, max_batch_rows=16, bulk_threads=2, bulk_min_texts=8,
                             bulk_mode="intra_op")
    enc = MiniLMEncoder(config)
    one_by_one = np.stack([enc.encode_query(t) for t in texts])
    seen: list[int] = []
    bulk = enc.encode(texts, progress=seen.append)
    assert enc.bulk_session() is not enc.session  # the 2-thread session did the work
    assert sum(seen) == len(texts) and len(seen) > len(texts) // 16  # one call per token-budget batch
    assert seen[0] <= seen[-1]  # longest (fewest-row) batches first
    assert bulk.shape == (len(texts), 384) and bulk.dtype == np.float32
    assert np.abs(bulk - one_by_one).max() <= 1e-6
    # two batches at once on the 1-thread session: the same vectors, progress told once per batch, in order
    par = MiniLMEncoder(config.model_copy(update={"bulk_mode": "batches", "bulk_mem_arena": False}))
    par_seen: list[int] = []
    assert np.abs(par.encode(texts, progress=par_seen.append) - one_by_one).max() <= 1e-6
    assert par_seen == seen and par.bulk_session() is not par.session  # 1 thread, no arena
    # the old scheme (batch_size rows by character length, one thread) agrees too
    old = MiniLMEncoder(EmbeddingConfig(batch_tokens=0, bulk_threads=1, batch_size=32)).encode(texts)
    assert np.abs(old - one_by_one).max() <= 1e-6


def test_small_calls_use_the_query_session(texts) -> None:
    enc = MiniLMEncoder(EmbeddingConfig(bulk_min_texts=64, bulk_mode="intra_op"))
    enc.encode(texts[:3])
    assert enc._bulk_session is None  # never created for a few texts
    # the defaults: see docs/benchmarks/ingest-speed.md (1.4x the batches mode on idle cores)
    assert EmbeddingConfig().bulk_mode == "intra_op" and EmbeddingConfig().bulk_mem_arena
    assert enc.encode([]).shape == (0, 384)
    same = MiniLMEncoder(EmbeddingConfig(threads=2, bulk_threads=2, bulk_mode="intra_op", bulk_mem_arena=True))
    assert same.bulk_session() is same.session  # nothing to differ in: no second session


def test_speed_settings_do_not_change_the_model_id() -> None:
    # an index records the model id; speed settings must not make existing indexes incompatible
    assert model_id_for(EmbeddingConfig(batch_tokens=0, bulk_threads=1)) == model_id_for(EmbeddingConfig())
    assert MiniLMEncoder().model_id == model_id_for(EmbeddingConfig())


def test_ner_with_worker_processes_equals_one_process(slice_passages) -> None:
    texts = [p.text for p in slice_passages[:24]]
    labels = GraphConfig().ner_labels
    one = extract_ner(texts, labels, batch_size=8)
    calls: list[int] = []
    two = extract_ner(texts, labels, batch_size=4, chunk=10, progress=calls.append, n_process=2)
    assert two == one
    assert calls == [10, 10, 4]
    assert any(one)  # real passages have named entities
    assert extract_ner([], labels, n_process=2) == []


def test_ner_workers_only_for_bulk_jobs(monkeypatch) -> None:
    config = GraphConfig(ner_processes=2, ner_bulk_min_texts=500)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert ner_workers(config, 499) == 1  # an incremental add: starting workers costs more than it gains
    assert ner_workers(config, 500) == 2
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert ner_workers(config, 10_000) == 1  # never more processes than CPUs
    assert ner_workers(GraphConfig(ner_processes=1), 10_000) == 1
