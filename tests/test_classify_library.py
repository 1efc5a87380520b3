"""The query library: the neighbour vote worked by hand on tiny vectors, dedup and relabelling,
storage arrays, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from amsrag.classify.library import (
    HOP_LABELS,
    LibraryAddReport,
    LibrarySettings,
    LibraryVote,
    QueryLibrary,
    blend,
)
from amsrag.errors import InputError
from amsrag.store import query_library as ql

QA, QB, QC = "Who directed Jaws?", "Which studio released the film its director made next?", "Where is Tulsa?"


def tiny() -> QueryLibrary:
    """a = (1, 0) one_hop, b = (0.8, 0.6) multi_hop, c = (0, 1) multi_hop."""
    return QueryLibrary([QA, QB, QC], np.asarray(["one_hop", "multi_hop", "multi_hop"]),
                        np.asarray([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], np.float32), ["t", "t", "u"])


def test_the_vote_by_hand() -> None:
    vote = tiny().vote(np.asarray([2.0, 0.0]), LibrarySettings(threshold=0.75, k=10, strength=2.0))
    assert vote is not None
    # close: a (cosine 1.0) and b (0.8); c (0.0) is not. S = 1.8
    assert vote.n_close == 2 and vote.max_similarity == pytest.approx(1.0)
    assert vote.p_multi == pytest.approx(0.8 / 1.8, abs=1e-6)  # b's share of S
    assert vote.weight == pytest.approx(1.8 / 3.8, abs=1e-6)  # S / (S + strength)
    assert [(q, h) for q, h, _ in vote.neighbours] == [(QA, "one_hop"), (QB, "multi_hop")]
    assert [s for _, _, s in vote.neighbours] == pytest.approx([1.0, 0.8])
    # blend: (1 - w) p + w p_lib
    assert blend(0.9, vote) == pytest.approx((2.0 / 3.8) * 0.9 + (1.8 / 3.8) * (0.8 / 1.8), abs=1e-6)
    assert blend(0.9, None) == 0.9
    assert vote.to_dict() == {"p_multi": 0.4444, "weight": 0.4737, "n_close": 2, "max_similarity": 1.0,
                              "neighbours": [{"question": QA, "hop": "one_hop", "similarity": 1.0},
                                             {"question": QB, "hop": "multi_hop", "similarity": 0.8}]}


def test_k_and_strength_and_only_three_neighbours_shown() -> None:
    lib = tiny()
    only_a = lib.vote(np.asarray([1.0, 0.0]), LibrarySettings(threshold=0.75, k=1))
    assert only_a is not None and (only_a.n_close, only_a.p_multi) == (1, 0.0)
    assert only_a.weight == pytest.approx(1.0 / 3.0)
    strong = lib.vote(np.asarray([1.0, 0.0]), LibrarySettings(threshold=0.75, strength=0.2))
    assert strong is not None and strong.weight == pytest.approx(1.8 / 2.0, abs=1e-6)
    # query (1, 1)/sqrt2: cosines a 0.707, b 0.990, c 0.707 -> all close, b first
    everyone = lib.vote(np.asarray([1.0, 1.0]), LibrarySettings(threshold=0.7))
    assert everyone is not None and everyone.n_close == 3
    r = math.sqrt(0.5)
    assert everyone.p_multi == pytest.approx((1.4 * r + r) / (1.4 * r + 2 * r), abs=1e-6)
    assert [q for q, _, _ in everyone.neighbours] == [QB, QA, QC]  # ties by library order
    many = QueryLibrary([f"Question {i}?" for i in range(5)], np.ones(5, np.int8), np.ones((5, 2), np.float32),
                        ["t"] * 5)
    vote = many.vote(np.asarray([1.0, 1.0]), LibrarySettings())
    assert vote is not None and vote.n_close == 5 and len(vote.neighbours) == 3 and vote.p_multi == 1.0


def test_threshold_boundary() -> None:
    lib = tiny()
    q = np.asarray([1.0, 0.0])
    at = float(np.float32(0.8))  # b's cosine as float32 computes it
    assert lib.vote(q, LibrarySettings(threshold=at, k=10)).n_close == 2  # a cosine equal to the threshold counts
    assert lib.vote(q, LibrarySettings(threshold=at + 5e-7)).n_close == 2  # within float32 noise: still at it
    assert lib.vote(q, LibrarySettings(threshold=at + 1e-5)).n_close == 1
    assert lib.vote(np.asarray([-1.0, -1.0]), LibrarySettings()) is None  # nothing close: no vote
    assert QueryLibrary.empty().vote(np.ones(384), LibrarySettings()) is None


def test_dedup_and_relabel_latest_wins() -> None:
    lib = QueryLibrary.empty(dim=2)
    v = np.asarray([[1.0, 0.0], [0.0, 3.0]])
    assert lib.add([QA, QC], ["one_hop", "one_hop"], v, "first") == LibraryAddReport(2, 0, 0)
    assert lib.add(["who directed JAWS"], ["one_hop"], v[1:], "again") == LibraryAddReport(0, 0, 1)
    assert lib.questions == [QA, QC] and lib.sources == ["first", "first"]  # unchanged: left as it is
    np.testing.assert_array_equal(lib.vectors[0], [1.0, 0.0])
    report = lib.add(["who directed JAWS", "A new one?"], ["multi_hop", "multi_hop"], v, "second")
    assert report == LibraryAddReport(added=1, relabelled=1, unchanged=0)
    assert len(lib) == 3 and lib.hop_of(QA) == "multi_hop" and lib.hop_of("where is tulsa") == "one_hop"
    assert lib.questions[0] == "who directed JAWS" and lib.sources == ["second", "first", "second"]
    np.testing.assert_array_equal(lib.vectors, [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # the relabel's vector
    # within one batch too, in order: added, then relabelled, then unchanged
    report = lib.add(["Brand new?", "brand new", "BRAND NEW!"], ["one_hop", "multi_hop", "multi_hop"],
                     np.ones((3, 2)), "batch")
    assert report == LibraryAddReport(1, 1, 1) and lib.hop_of("brand new") == "multi_hop" and len(lib) == 4
    assert lib.counts() == {"one_hop": 1, "multi_hop": 3, "source:batch": 1, "source:first": 1, "source:second": 2}
    assert lib.hop_of("never stored") is None


def test_arrays_round_trip() -> None:
    lib = tiny()
    lib.add(["Ünïcode question — with dashes?"], ["one_hop"], np.asarray([[3.0, 4.0]]), "src")
    arrays = lib.to_arrays()
    assert set(arrays) == {"questions", "hops", "vectors", "sources"}
    assert arrays["vectors"].dtype == np.float32 and arrays["vectors"].shape == (4, 2)
    assert arrays["hops"].tolist() == ["one_hop", "multi_hop", "multi_hop", "one_hop"]
    np.testing.assert_allclose(arrays["vectors"][3], [0.6, 0.8], rtol=1e-6)  # stored unit-normalised
    back = QueryLibrary.from_arrays(arrays)
    assert back == lib and back.to_arrays()["vectors"].tobytes() == arrays["vectors"].tobytes()
    assert back.questions == lib.questions and back.keys == lib.keys
    assert QueryLibrary.from_arrays(QueryLibrary.empty().to_arrays()) == QueryLibrary.empty()
    assert QueryLibrary.empty().dim == 384 and back.copy() == back and back.copy() is not back
    with pytest.raises(ValueError):
        back.vectors[0, 0] = 2.0  # read-only


def test_vote_batch_matches_vote(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(60, 8)).astype(np.float32)
    lib = QueryLibrary([f"Question number {i}?" for i in range(60)], rng.integers(0, 2, 60), vecs, ["r"] * 60)
    queries = np.concatenate([vecs[:10] + 0.2 * rng.normal(size=(10, 8)), rng.normal(size=(15, 8))])
    settings = LibrarySettings(threshold=0.8, k=4, strength=1.5)
    monkeypatch.setattr(ql, "BATCH_CELLS", 7 * 60)  # chunks of 7 queries
    batch = lib.vote_batch(queries, settings)
    assert len(batch) == 25
    p = rng.uniform(size=25)
    blended = batch.blend(p)
    voted = 0
    for i, q in enumerate(queries):
        vote = lib.vote(q, settings)
        if vote is None:
            assert batch.n_close[i] == 0 and batch.weight[i] == 0 and np.isnan(batch.p_multi[i])
            assert batch.max_similarity[i] < 0.8 and blended[i] == p[i]
            continue
        voted += 1
        assert batch.n_close[i] == vote.n_close
        assert batch.p_multi[i] == pytest.approx(vote.p_multi, abs=1e-5)
        assert batch.weight[i] == pytest.approx(vote.weight, abs=1e-5)
        assert batch.max_similarity[i] == pytest.approx(vote.max_similarity, abs=1e-5)
        assert blended[i] == pytest.approx(blend(p[i], vote), abs=1e-5)
    assert 0 < voted < 25
    empty = QueryLibrary.empty(dim=8).vote_batch(queries, settings)
    assert (empty.n_close == 0).all() and np.isnan(empty.max_similarity).all()


def test_errors_are_clear_and_change_nothing() -> None:
    lib = tiny()
    before = lib.copy()
    with pytest.raises(InputError, match=r"unknown hop label 'zero_hop' for question 'Is it\?'"):
        lib.add(["Fine?", "Is it?"], ["one_hop", "zero_hop"], np.ones((2, 2)), "s")
    with pytest.raises(InputError, match=r"shape \(2, 2\), got \(2, 3\)"):
        lib.add(["Fine?", "Is it?"], ["one_hop", "one_hop"], np.ones((2, 3)), "s")
    with pytest.raises(InputError, match=r"shape \(2, 2\), got \(1, 2\)"):
        lib.add(["Fine?", "Is it?"], ["one_hop", "one_hop"], np.ones((1, 2)), "s")
    with pytest.raises(InputError, match="2 questions but 1 hop labels"):
        lib.add(["Fine?", "Is it?"], ["one_hop"], np.ones((2, 2)), "s")
    for blank in ("   ", "?!", ""):
        with pytest.raises(InputError, match="is empty"):
            lib.add(["Fine?", blank], ["one_hop", "one_hop"], np.ones((2, 2)), "s")
    with pytest.raises(InputError, match=r"vector of question 'Is it\?' holds NaN"):
        lib.add(["Fine?", "Is it?"], ["one_hop", "one_hop"], np.asarray([[1.0, 0.0], [np.nan, 1.0]]), "s")
    with pytest.raises(InputError, match="all zeros"):
        lib.add(["Fine?"], ["one_hop"], np.zeros((1, 2)), "s")
    with pytest.raises(InputError, match="non-empty name"):
        lib.add(["Fine?"], ["one_hop"], np.ones((1, 2)), " ")
    assert lib == before and len(lib) == 3

    with pytest.raises(InputError, match=r"query vector must have shape \(2,\)"):
        lib.vote(np.ones(3), LibrarySettings())
    with pytest.raises(InputError, match="NaN"):
        lib.vote(np.asarray([np.nan, 1.0]), LibrarySettings())
    with pytest.raises(InputError, match=r"\(m, 2\)"):
        lib.vote_batch(np.ones(2), LibrarySettings())
    with pytest.raises(InputError, match="twice"):
        QueryLibrary([QA, "who directed jaws"], np.zeros(2, np.int8), np.ones((2, 2)), ["s", "s"])
    with pytest.raises(InputError, match="unknown hop code 2"):
        QueryLibrary([QA], np.asarray([2]), np.ones((1, 2)), ["s"])
    with pytest.raises(InputError, match="2 sources"):
        QueryLibrary([QA], np.zeros(1, np.int8), np.ones((1, 2)), ["s", "t"])
    with pytest.raises(InputError, match="lack vectors"):
        QueryLibrary.from_arrays({"questions": np.asarray([QA]), "hops": np.asarray(["one_hop"]),
                                  "sources": np.asarray(["s"])})
    for bad in ({"threshold": 0.0}, {"threshold": 1.5}, {"k": 0}, {"k": 2.5}, {"strength": 0.0}):
        with pytest.raises(InputError, match="library"):
            LibrarySettings(**bad)
    vote = LibraryVote(p_multi=1.0, weight=0.5, n_close=1, max_similarity=0.9, neighbours=())
    for p in (-0.1, 1.1, float("nan")):
        with pytest.raises(InputError, match="probability"):
            blend(p, vote)
    assert HOP_LABELS == ("one_hop", "multi_hop")


def test_margin_weighting_by_hand() -> None:
    settings = LibrarySettings(threshold=0.75, k=10, strength=2.0, weighting="margin")
    vote = tiny().vote(np.asarray([2.0, 0.0]), settings)
    assert vote is not None and vote.n_close == 2
    # weights: a (1.0 - 0.75) / 0.25 = 1, b (0.8 - 0.75) / 0.25 = 0.2; S = 1.2
    assert vote.p_multi == pytest.approx(0.2 / 1.2, abs=1e-5)
    assert vote.weight == pytest.approx(1.2 / 3.2, abs=1e-5)
    # one neighbour just over a loose threshold barely moves the route; an exact duplicate moves it fully
    loose = LibrarySettings(threshold=0.3, k=10, strength=0.5, weighting="margin")
    lib = QueryLibrary([QB], np.asarray(["multi_hop"]), np.asarray([[0.8, 0.6]], np.float32), ["t"])
    far = lib.vote(np.asarray([0.0, 1.0]), loose)  # cosine 0.6
    near = lib.vote(np.asarray([0.8, 0.6]), loose)  # cosine 1.0
    assert far is not None and near is not None
    assert far.weight == pytest.approx((0.3 / 0.7) / (0.3 / 0.7 + 0.5), abs=1e-5)
    assert near.weight == pytest.approx(1.0 / 1.5, abs=1e-5) and far.weight < near.weight
    batch = lib.vote_batch(np.asarray([[0.0, 1.0], [0.8, 0.6]]), loose)
    assert batch.weight == pytest.approx([far.weight, near.weight], abs=1e-6)
    with pytest.raises(InputError, match="weighting"):
        LibrarySettings(weighting="softmax")  # type: ignore[arg-type]
