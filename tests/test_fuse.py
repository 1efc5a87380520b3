"""Fusion stage: every formula against hand computation, plus hypothesis invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amsrag.config import AmsragConfig, FusionConfig
from amsrag.errors import InputError
from amsrag.fuse import (
    CARRF,
    RRF,
    CombMNZ,
    CombSUM,
    FusedItem,
    FusedList,
    Fuser,
    WeightedRRF,
    adaptive_cut,
    adaptive_k,
    ca_rrf_weights,
    make_fuser,
    mmr,
    mmr_applies,
    redundancy,
    rho,
)
from amsrag.types import Hit


def hits(retriever: str, *pairs: tuple[str, float]) -> list[Hit]:
    """Hits in the given order: rank i+1, score as given."""
    return [Hit(id=pid, score=s, rank=i + 1, title=f"T{pid}", retriever=retriever, row=ord(pid[0]))
            for i, (pid, s) in enumerate(pairs)]


# a: A, B, C   b: B, A, D
LISTS = {
    "a": hits("a", ("A", 10.0), ("B", 6.0), ("C", 2.0)),
    "b": hits("b", ("B", 0.9), ("A", 0.7), ("D", 0.1)),
}


def scores_by_id(fused: FusedList) -> dict[str, float]:
    return {it.id: it.score for it in fused.items}


# ---------------------------------------------------------------- hand-computed formulas


def test_rrf_hand_computed_k60_ranks_from_one() -> None:
    fused = RRF().fuse(LISTS)
    s = scores_by_id(fused)
    assert s["A"] == pytest.approx(1 / 61 + 1 / 62)
    assert s["B"] == pytest.approx(1 / 62 + 1 / 61)
    assert s["C"] == pytest.approx(1 / 63)
    assert s["D"] == pytest.approx(1 / 63)
    # A and B tie, C and D tie: ties by passage id
    assert fused.ids == ["A", "B", "C", "D"]
    assert fused.method == "rrf"
    assert fused.k == {"a": 60.0, "b": 60.0} and fused.weights == {"a": 1.0, "b": 1.0}
    a = fused.items[0]
    assert a.ranks == {"a": 1, "b": 2}
    assert a.contributions == pytest.approx({"a": 1 / 61, "b": 1 / 62})
    assert a.row == ord("A") and a.title == "TA"


def test_rrf_small_k() -> None:
    s = scores_by_id(RRF(k=1).fuse(LISTS))
    assert s == pytest.approx({"A": 1 / 2 + 1 / 3, "B": 1 / 3 + 1 / 2, "C": 1 / 4, "D": 1 / 4})


def test_weighted_rrf_hand_computed() -> None:
    fused = WeightedRRF({"a": 2.0, "b": 1.0}).fuse(LISTS)
    s = scores_by_id(fused)
    assert s["A"] == pytest.approx(2 / 61 + 1 / 62)
    assert s["B"] == pytest.approx(2 / 62 + 1 / 61)
    assert s["C"] == pytest.approx(2 / 63)
    assert s["D"] == pytest.approx(1 / 63)
    assert fused.ids == ["A", "B", "C", "D"]
    # per-retriever k
    s2 = scores_by_id(WeightedRRF({"a": 1.0, "b": 3.0}, k={"a": 0.0, "b": 10.0}).fuse(LISTS))
    assert s2["A"] == pytest.approx(1 / 1 + 3 / 12)
    assert s2["D"] == pytest.approx(3 / 13)


def test_weighted_rrf_needs_every_weight() -> None:
    with pytest.raises(InputError, match="no weight"):
        WeightedRRF({"a": 1.0}).fuse(LISTS)
    with pytest.raises(InputError, match=">= 0"):
        WeightedRRF({"a": 1.0, "b": -1.0}).fuse(LISTS)


def test_combsum_and_combmnz_hand_computed() -> None:
    # a: 10, 6, 2 -> 1, .5, 0     b: .9, .7, .1 -> 1, .75, 0
    s = scores_by_id(CombSUM().fuse(LISTS))
    assert s == pytest.approx({"A": 1.0 + 0.75, "B": 0.5 + 1.0, "C": 0.0, "D": 0.0})
    assert CombSUM().fuse(LISTS).ids == ["A", "B", "C", "D"]
    mnz = CombMNZ().fuse(LISTS)
    assert scores_by_id(mnz) == pytest.approx({"A": 3.5, "B": 3.0, "C": 0.0, "D": 0.0})
    assert mnz.items[0].contributions == pytest.approx({"a": 2.0, "b": 1.5})  # sum to the score


def test_comb_all_equal_list_is_all_ones() -> None:
    lists = {"x": hits("x", ("P", 5.0), ("Q", 5.0)), "y": hits("y", ("Q", 3.0))}
    assert scores_by_id(CombSUM().fuse(lists)) == pytest.approx({"P": 1.0, "Q": 2.0})
    assert scores_by_id(CombMNZ().fuse(lists)) == pytest.approx({"P": 1.0, "Q": 4.0})


def test_rho_at_alpha0_is_half_and_sigmoid() -> None:
    assert rho(0.5, 2.0, 0.5) == 0.5
    assert rho(0.3, 7.0, 0.3) == 0.5
    assert rho(1.0, 2.0, 0.5) == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert rho(0.0, 2.0, 0.5) == pytest.approx(1 / (1 + math.exp(1.0)))
    assert rho(0.0, 1e6, 0.5) == 0.0 and rho(1.0, 1e6, 0.5) == 1.0  # no overflow


BETA = {"one_hop": {"bm25": 0.5, "dense": 0.3, "graph": 0.2}}


def test_ca_rrf_weights_hand_computed() -> None:
    # alpha = alpha0 -> rho = .5 -> w = .5/3 + .5 beta
    w = ca_rrf_weights("one_hop", 0.5, ["bm25", "dense", "graph"], BETA)
    assert w == pytest.approx({"bm25": 1 / 6 + 0.25, "dense": 1 / 6 + 0.15, "graph": 1 / 6 + 0.10})
    assert sum(w.values()) == pytest.approx(1.0)
    # only bm25 and dense activated: beta renormalised to .625 / .375
    w2 = ca_rrf_weights("one_hop", 0.5, ["dense", "bm25"], BETA)
    assert w2 == pytest.approx({"bm25": 0.25 + 0.3125, "dense": 0.25 + 0.1875})
    # alpha = 1, kappa = 2 -> rho = sigmoid(1)
    p = 1 / (1 + math.exp(-1.0))
    w3 = ca_rrf_weights("one_hop", 1.0, ["bm25", "dense", "graph"], BETA)
    assert w3["bm25"] == pytest.approx((1 - p) / 3 + p * 0.5)
    assert w3["graph"] == pytest.approx((1 - p) / 3 + p * 0.2)


def test_ca_rrf_weights_missing_and_zero_beta() -> None:
    # "web" has no prior -> 0 before renormalising: beta = {bm25: .5/.8, dense: .3/.8, web: 0}
    w = ca_rrf_weights("one_hop", 0.5, ["bm25", "dense", "web"], BETA)
    assert w["web"] == pytest.approx(0.5 / 3)
    assert w["bm25"] == pytest.approx(0.5 / 3 + 0.5 * 0.625)
    # all-zero priors (and an unknown class) -> uniform
    assert ca_rrf_weights("one_hop", 0.9, ["web", "kb"], BETA) == pytest.approx({"web": 0.5, "kb": 0.5})
    assert ca_rrf_weights("zero_hop", 0.9, ["bm25", "dense"], BETA) == pytest.approx({"bm25": 0.5, "dense": 0.5})
    assert ca_rrf_weights("one_hop", 0.9, [], BETA) == {}
    with pytest.raises(InputError):
        ca_rrf_weights("two_hop", 0.5, ["bm25"], BETA)
    with pytest.raises(InputError):
        ca_rrf_weights("one_hop", 1.5, ["bm25"], BETA)
    with pytest.raises(InputError):
        ca_rrf_weights("one_hop", 0.5, ["bm25"], {"one_hop": {"bm25": -1.0}})


def test_ca_rrf_scores_hand_computed() -> None:
    cfg = FusionConfig(beta_by_class={"zero_hop": {}, "one_hop": BETA["one_hop"], "multi_hop": {}})
    lists = {
        "bm25": hits("bm25", ("A", 9.0), ("B", 8.0)),
        "dense": hits("dense", ("B", 0.8), ("C", 0.7)),
        "graph": [],  # activated but empty: still in RS*
    }
    fused = CARRF("one_hop", 0.5, cfg).fuse(lists)
    w = {"bm25": 1 / 6 + 0.25, "dense": 1 / 6 + 0.15, "graph": 1 / 6 + 0.10}
    assert fused.weights == pytest.approx(w)
    assert fused.k == {"bm25": 40.0, "dense": 40.0, "graph": 40.0}  # one_hop default k_r(c)
    s = scores_by_id(fused)
    assert s["A"] == pytest.approx(w["bm25"] / 41)
    assert s["B"] == pytest.approx(w["bm25"] / 42 + w["dense"] / 41)
    assert s["C"] == pytest.approx(w["dense"] / 42)
    assert fused.ids == ["B", "A", "C"]
    assert fused.params["rho"] == 0.5 and fused.params["complexity"] == "one_hop"
    # class-specific k and overrides; a retriever without k_r(c) falls back to rrf_k
    multi = CARRF("multi_hop", 0.5, cfg, k={"bm25": 10.0}).fuse(lists)
    assert multi.k == {"bm25": 10.0, "dense": 60.0, "graph": 60.0}
    assert multi.weights == pytest.approx({r: 1 / 3 for r in lists})
    assert scores_by_id(multi)["A"] == pytest.approx((1 / 3) / 11)


def test_make_fuser() -> None:
    assert isinstance(make_fuser("rrf"), RRF)
    assert isinstance(make_fuser("combmnz"), Fuser)
    assert make_fuser("ca_rrf", complexity="multi_hop", alpha=0.7).fuse(LISTS).method == "ca_rrf"
    assert isinstance(make_fuser("CA-RRF", complexity="one_hop", alpha=0.2), CARRF)
    assert make_fuser("weighted_rrf", weights={"a": 1, "b": 1}).fuse(LISTS).ids == RRF().fuse(LISTS).ids
    with pytest.raises(InputError):
        make_fuser("borda")
    with pytest.raises(InputError):
        make_fuser("ca_rrf")


def test_duplicate_ids_and_bad_ranks() -> None:
    dup = {"a": [Hit("A", 1.0, 1, row=-1), Hit("A", 0.5, 3, row=7), Hit("B", 0.9, 2)], "b": [Hit("A", 1.0, 1, row=4)]}
    fused = RRF().fuse(dup)
    assert fused.items[0].ranks == {"a": 1, "b": 1}
    assert fused.items[0].row == 4  # first non-negative row, retrievers in name order
    with pytest.raises(InputError, match="ranks count from 1"):
        RRF().fuse({"a": [Hit("A", 1.0, 0)]})


def test_empty_inputs() -> None:
    for fuser in (RRF(), WeightedRRF({"a": 1.0}), CombSUM(), CombMNZ(), CARRF("one_hop", 0.8)):
        assert fuser.fuse({}).items == []
        assert fuser.fuse({"a": []}).items == []
    assert mmr([], np.zeros((0, 4)), k=5).picks == []
    assert adaptive_k([]) == 0


# ---------------------------------------------------------------- MMR


def mmr_example() -> tuple[list[FusedItem], np.ndarray]:
    # fused 0.05, 0.04, 0.03, 0.0 -> normalised 1, .8, .6, 0
    items = [FusedItem(id=pid, row=i, score=s, title="", ranks={}, contributions={})
             for i, (pid, s) in enumerate([("A", 0.05), ("B", 0.04), ("C", 0.03), ("D", 0.0)])]
    # cos: AB .8, AC 0, AD .6, BC .6, BD .96, CD .8 ; scaled to test the defensive normalisation
    vecs = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]]) * np.array([[2.0], [1.0], [3.0], [0.5]])
    return items, vecs


def test_mmr_hand_computed() -> None:
    items, vecs = mmr_example()
    res = mmr(items, vecs, k=4, lam=0.5)
    # 1: A (1.0). 2: B .8-.5*.8=.4, C .6-0=.6, D 0-.5*.6=-.3 -> C.
    # 3: B .8-.5*max(.8,.6)=.4, D 0-.5*max(.6,.8)=-.4 -> B.  4: D 0-.5*max(.6,.8,.96)=-.48
    assert res.ids == ["A", "C", "B", "D"]
    assert [p.mmr_score for p in res.picks] == pytest.approx([1.0, 0.6, 0.4, -0.48])
    assert [p.max_sim for p in res.picks] == pytest.approx([0.0, 0.0, 0.8, 0.96])
    assert [p.relevance for p in res.picks] == pytest.approx([1.0, 0.6, 0.8, 0.0])
    assert mmr(items, vecs, k=2).ids == ["A", "C"]
    assert mmr(items, vecs, k=10).ids == ["A", "C", "B", "D"]  # n < k
    assert mmr(items, vecs, k=0).picks == []
    assert mmr(items, vecs, k=4, lam=0.0).ids == ["A", "B", "C", "D"]
    assert res.to_dict()["picks"][1]["id"] == "C"


def test_mmr_ties_by_id_and_shape_check() -> None:
    items = [FusedItem(id=pid, row=-1, score=1.0, title="", ranks={}, contributions={}) for pid in ("z", "m", "a")]
    vecs = np.eye(3)
    assert mmr(items, vecs, k=3).ids == ["a", "m", "z"]
    with pytest.raises(InputError, match="shape"):
        mmr(items, np.eye(2), k=2)


def test_mmr_negative_cosine_is_not_clipped() -> None:
    items = [FusedItem(id=pid, row=-1, score=s, title="", ranks={}, contributions={})
             for pid, s in [("A", 1.0), ("B", 0.5), ("C", 0.0)]]
    vecs = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    res = mmr(items, vecs, k=3, lam=1.0)
    # 2: B .5 - 0 = .5 ; C 0 - (-1) = 1 -> C
    assert res.ids == ["A", "C", "B"]
    assert res.picks[1].max_sim == pytest.approx(-1.0)


def test_redundancy_is_mean_pairwise_cosine() -> None:
    _, vecs = mmr_example()  # cos AB .8, AC 0, AD .6, BC .6, BD .96, CD .8 (rows not unit length)
    assert redundancy(vecs) == pytest.approx((0.8 + 0 + 0.6 + 0.6 + 0.96 + 0.8) / 6)
    assert redundancy(vecs[:1]) == 0.0 and redundancy(np.zeros((0, 2))) == 0.0
    assert redundancy(np.array([[1.0, 0.0], [0.0, 0.0]])) == 0.0  # a zero row: similarity 0
    assert redundancy(np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])) == pytest.approx(1.0)
    with pytest.raises(InputError, match="shape"):
        redundancy(np.zeros(3))


def test_mmr_gate_decision() -> None:
    assert mmr_applies("always", None, 0.5) and not mmr_applies("off", 0.99, 0.5)
    assert mmr_applies("redundant", 0.5, 0.5) and not mmr_applies("redundant", 0.49, 0.5)  # inclusive
    with pytest.raises(InputError, match="needs the candidates' redundancy"):
        mmr_applies("redundant", None, 0.5)
    with pytest.raises(InputError, match="unknown MMR gate"):
        mmr_applies("sometimes", 0.5, 0.5)
    with pytest.raises(ValueError):
        FusionConfig(mmr_gate="sometimes")
    assert (FusionConfig().mmr_gate, FusionConfig().mmr_redundancy) == ("always", 0.5)


class _Vectors:
    def __init__(self, vecs: np.ndarray) -> None:
        self.vecs = vecs

    def vectors_for_rows(self, rows: list[int]) -> np.ndarray:
        return self.vecs[rows]


def test_select_applies_the_gate_and_records_it() -> None:
    from amsrag.pipeline.passes import RetrievalPass
    from amsrag.pipeline.systems import system_spec

    items, vecs = mmr_example()  # rows 0..3; fused order A, B, C, D
    fused = FusedList("ca_rrf", [FusedItem(it.id, i, it.score, "", {}, {}) for i, it in enumerate(items)], {}, {})

    def select(gate: str, threshold: float) -> tuple[list[str], dict]:
        config = AmsragConfig()
        config.fusion.mmr_gate, config.fusion.mmr_redundancy = gate, threshold  # type: ignore[assignment]
        chosen, result = RetrievalPass(_Vectors(vecs), config, None).select(system_spec("A4"), fused, 2)  # type: ignore[arg-type]
        assert result is not None
        return [it.id for it in chosen], result.to_dict()

    ids, trace = select("always", 0.5)
    assert ids == ["A", "C"] and trace["gate"]["applied"] and trace["gate"]["redundancy"] == 0.8  # cos(A, B)
    ids, trace = select("redundant", 0.9)
    assert ids == ["A", "B"] and trace["gate"] == {"mode": "redundant", "applied": False, "redundancy": 0.8,
                                                   "threshold": 0.9} and "picks" not in trace
    ids, trace = select("redundant", 0.8)
    assert ids == ["A", "C"] and trace["gate"]["applied"] and len(trace["picks"]) == 2
    ids, trace = select("off", 0.5)
    assert ids == ["A", "B"] and trace["gate"]["redundancy"] is None and "picks" not in trace
    chosen, result = RetrievalPass(_Vectors(vecs), AmsragConfig(), None).select(  # type: ignore[arg-type]
        system_spec("A3"), fused, 2)
    assert [it.id for it in chosen] == ["A", "B"] and result is None  # not an MMR system


# ---------------------------------------------------------------- adaptive k


def test_adaptive_k_hand_computed() -> None:
    s = [1.0, 0.9, 0.6, 0.5, 0.2, 0.0]
    assert adaptive_k(s, drop=0.5, min_k=3, max_k=10) == 4  # threshold 0.5, kept inclusive
    assert adaptive_k(s, drop=0.2, min_k=3, max_k=10) == 3  # threshold .8 keeps 2 -> floor 3
    assert adaptive_k(s, drop=0.2, min_k=1, max_k=10) == 2
    assert adaptive_k(s, drop=0.5, min_k=1, max_k=3) == 3  # ceiling
    assert adaptive_k(s, drop=1.0, min_k=1, max_k=10) == 6
    assert adaptive_k([0.04, 0.01], drop=0.1, min_k=3, max_k=10) == 2  # fewer than the floor: all
    assert adaptive_k([0.3] * 5, drop=0.0, min_k=1, max_k=4) == 4  # all equal: all kept, then ceiling
    # unnormalised scores: top .05, bottom .01, drop .5 -> threshold .03
    assert adaptive_k([0.05, 0.04, 0.03, 0.02, 0.01], drop=0.5, min_k=1, max_k=10) == 3
    with pytest.raises(InputError, match="descending"):
        adaptive_k([0.1, 0.2])
    with pytest.raises(InputError):
        adaptive_k([0.1], min_k=5, max_k=2)


def test_adaptive_cut_keeps_fused_metadata() -> None:
    fused = RRF().fuse(LISTS)
    cut = adaptive_cut(fused, drop=0.5, min_k=1, max_k=10)
    assert cut.ids == ["A", "B"]  # A, B at 1/61+1/62; C, D at 1/63 = bottom
    assert cut.params["adaptive_k"] == 2 and cut.params["candidates"] == 4
    assert "adaptive_k" not in fused.params and len(fused) == 4
    assert fused.top(2) == cut.items and fused.top(0) == []


# ---------------------------------------------------------------- config


def test_fusion_config_defaults_and_toml_round_trip() -> None:
    cfg = AmsragConfig()
    f = cfg.fusion
    assert (f.rrf_k, f.kappa, f.alpha0, f.mmr_lambda) == (60.0, 2.0, 0.5, 0.5)
    assert f.k_by_class["zero_hop"]["bm25"] < f.k_by_class["one_hop"]["bm25"] < f.k_by_class["multi_hop"]["bm25"]
    assert all(sum(b.values()) == pytest.approx(1.0) for b in f.beta_by_class.values())
    assert AmsragConfig.from_toml(cfg.to_toml()) == cfg
    with pytest.raises(ValueError):
        FusionConfig(beta_by_class={"one_hop": {"bm25": -0.1}})
    with pytest.raises(ValueError):
        FusionConfig(adaptive_k_min=5, adaptive_k_max=2)
    with pytest.raises(ValueError):
        FusionConfig(k_by_class={"four_hop": {"bm25": 1.0}})
    with pytest.raises(ValueError):
        FusionConfig(rfr_k=3)


# ---------------------------------------------------------------- properties

NAMES = ["bm25", "dense", "graph", "web"]
IDS = [f"p{i:02d}" for i in range(12)]


@st.composite
def ranked_lists(draw: st.DrawFn, min_lists: int = 0) -> dict[str, list[Hit]]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=min_lists, max_size=4, unique=True))
    out: dict[str, list[Hit]] = {}
    for r in names:
        ids = draw(st.lists(st.sampled_from(IDS), max_size=8, unique=True))
        scores = sorted(draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=len(ids), max_size=len(ids))),
                        reverse=True)
        out[r] = [Hit(id=pid, score=s, rank=i + 1, retriever=r, row=int(pid[1:]))
                  for i, (pid, s) in enumerate(zip(ids, scores, strict=True))]
    return out


def all_fusers(alpha: float = 0.7) -> list[Fuser]:
    return [RRF(), WeightedRRF(dict.fromkeys(NAMES, 0.5) | {"web": 2.0}), CombSUM(), CombMNZ(),
            CARRF("multi_hop", alpha, FusionConfig(beta_by_class={"multi_hop": {"bm25": 0.6, "graph": 0.4}}))]


@settings(max_examples=60, deadline=None)
@given(lists=ranked_lists(), data=st.data())
def test_retriever_order_does_not_matter(lists: dict[str, list[Hit]], data: st.DataObject) -> None:
    order = data.draw(st.permutations(list(lists)))
    permuted = {r: lists[r] for r in order}
    for fuser in all_fusers():
        assert fuser.fuse(permuted) == fuser.fuse(lists)


@settings(max_examples=60, deadline=None)
@given(lists=ranked_lists())
def test_output_sorted_and_ties_by_id(lists: dict[str, list[Hit]]) -> None:
    for fuser in all_fusers():
        fused = fuser.fuse(lists)
        keys = [(-it.score, it.id) for it in fused.items]
        assert keys == sorted(keys) and len(set(fused.ids)) == len(fused.ids)
        assert set(fused.ids) == {h.id for hs in lists.values() for h in hs}
        for it in fused.items:
            assert it.score == pytest.approx(sum(it.contributions.values()))


@settings(max_examples=60, deadline=None)
@given(lists=ranked_lists(min_lists=1), alpha=st.floats(0, 1),
       weights=st.lists(st.floats(0.01, 10), min_size=4, max_size=4))
def test_passage_first_everywhere_is_fused_first(lists: dict[str, list[Hit]], alpha: float,
                                                 weights: list[float]) -> None:
    top = Hit(id="zz-top", score=99.0, rank=1)
    boosted = {r: [top] + [Hit(h.id, h.score, h.rank + 1, row=h.row) for h in hs] for r, hs in lists.items()}
    fusers: list[Fuser] = [RRF(), WeightedRRF(dict(zip(NAMES, weights, strict=True))),
                           CARRF("one_hop", alpha, FusionConfig(beta_by_class={"one_hop": {"dense": 1.0}})),
                           CARRF("zero_hop", alpha)]
    for fuser in fusers:
        fused = fuser.fuse(boosted)
        assert fused.items[0].id == "zz-top"
        assert all(it.score < fused.items[0].score for it in fused.items[1:])


@settings(max_examples=100, deadline=None)
@given(alpha=st.floats(0, 1), kappa=st.floats(0, 50), alpha0=st.floats(0, 1),
       activated=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True),
       beta=st.dictionaries(st.sampled_from(NAMES), st.floats(0, 100)))
def test_ca_rrf_weights_sum_to_one(alpha: float, kappa: float, alpha0: float, activated: list[str],
                                   beta: dict[str, float]) -> None:
    w = ca_rrf_weights("one_hop", alpha, activated, {"one_hop": beta}, kappa=kappa, alpha0=alpha0)
    assert set(w) == set(activated)
    assert sum(w.values()) == pytest.approx(1.0)
    assert all(v >= 0 for v in w.values())


@settings(max_examples=60, deadline=None)
@given(lists=ranked_lists(), seed=st.integers(0, 2**16), k=st.integers(0, 40))
def test_mmr_lambda_zero_is_fused_order(lists: dict[str, list[Hit]], seed: int, k: int) -> None:
    fused = RRF().fuse(lists)
    vecs = np.random.default_rng(seed).normal(size=(len(fused), 8))
    res = mmr(fused, vecs, k=k, lam=0.0)
    assert res.ids == fused.ids[:k]
    # with any lambda the first pick is the top fused item, and picks are distinct
    res2 = mmr(fused, vecs, k=k, lam=0.5)
    assert res2.ids[:1] == fused.ids[: min(k, 1)] and len(set(res2.ids)) == len(res2.ids) == min(k, len(fused))


@settings(max_examples=100, deadline=None)
@given(scores=st.lists(st.floats(-1e3, 1e3), max_size=30), drop=st.floats(0, 1),
       min_k=st.integers(0, 10), extra=st.integers(0, 10))
def test_adaptive_k_bounds(scores: list[float], drop: float, min_k: int, extra: int) -> None:
    s = sorted(scores, reverse=True)
    max_k = min_k + extra
    n = adaptive_k(s, drop=drop, min_k=min_k, max_k=max_k)
    assert min(min_k, len(s)) <= n <= min(max_k, len(s)) or (n == 0 and not s)
    if s and max_k >= 1:
        assert n >= 1
