"""Router thresholds (paper eq. 6), reject option, Bayes decision under the asymmetric cost matrix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amsrag.config import RouterConfig
from amsrag.errors import InputError
from amsrag.route import Router, bayes_route, expected_costs
from amsrag.route.router import ROUTE_ORDER


def test_thresholds_pick_the_strategy() -> None:
    router = Router(RouterConfig(theta_high=0.90, theta_low=0.60))
    plan = router.route("one_hop", 0.95)
    assert (plan.strategy, plan.retrievers, plan.multi_hop) == ("A", ("dense",), False)
    assert router.route("one_hop", 0.90).strategy == "A"  # alpha >= theta_high
    assert router.route("one_hop", 0.899).strategy == "B"
    assert router.route("one_hop", 0.60).strategy == "B"  # theta_low <= alpha
    plan = router.route("multi_hop", 0.59)
    assert (plan.strategy, plan.retrievers, plan.multi_hop) == ("C", ("dense", "bm25", "graph"), True)
    assert router.route("one_hop", 0.3).multi_hop is False  # C for an unsure one_hop: wide, one hop


def test_zero_hop_skips_retrieval_only_for_a_knowing_generator() -> None:
    router = Router()
    assert router.route("zero_hop", 0.97, generator_knows=True).strategy == "none"
    plan = router.route("zero_hop", 0.97, generator_knows=False)
    assert plan.strategy == "A" and plan.retrievers == (RouterConfig().best_retriever["zero_hop"],)
    assert router.route("zero_hop", 0.7, generator_knows=True).strategy == "B"


def test_bad_router_input() -> None:
    with pytest.raises(InputError, match="theta_low < theta_high"):
        Router(RouterConfig(theta_high=0.5, theta_low=0.6))
    with pytest.raises(InputError, match="unknown complexity"):
        Router().route("two_hop", 0.9)
    with pytest.raises(InputError, match="alpha"):
        Router().route("one_hop", 1.5)


def test_expected_cost_by_hand() -> None:
    costs = RouterConfig().cost_matrix
    probs = {"zero_hop": 0.1, "one_hop": 0.6, "multi_hop": 0.3}
    exp = expected_costs(probs, costs)
    by_hand_a = 0.1 * costs["zero_hop"]["A"] + 0.6 * costs["one_hop"]["A"] + 0.3 * costs["multi_hop"]["A"]
    assert exp["A"] == pytest.approx(by_hand_a)
    # 30% multi_hop makes every cheaper path too expensive: the Bayes route is the widest
    assert bayes_route(probs, costs) == "C"
    assert bayes_route({"one_hop": 1.0}, costs) == "A"
    assert bayes_route({"zero_hop": 1.0}, costs) == "none"


@given(st.floats(0, 1), st.floats(0, 1))
def test_more_multi_hop_mass_never_routes_cheaper(p_multi, shift) -> None:
    costs = RouterConfig().cost_matrix
    rest = 1 - p_multi
    low = bayes_route({"zero_hop": rest / 2, "one_hop": rest / 2, "multi_hop": p_multi}, costs)
    more = min(1.0, p_multi + shift * (1 - p_multi))
    rest2 = 1 - more
    high = bayes_route({"zero_hop": rest2 / 2, "one_hop": rest2 / 2, "multi_hop": more}, costs)
    assert ROUTE_ORDER[high] >= ROUTE_ORDER[low]
