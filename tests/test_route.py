"""Router thresholds (paper eq. 6), reject option, Bayes decision under the asymmetric cost matrix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amsrag.config import RouterConfig
from amsrag.errors import InputError
from amsrag.route import Router
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


def test_evidence_paths() -> None:
    router = Router()
    assert router.route("one_hop", 0.95).evidence_path == "single"  # dense alone
    assert router.route("one_hop", 0.75).evidence_path == "single"  # dense + bm25
    assert router.route("one_hop", 0.3).evidence_path == "linked"  # C includes the graph
    assert router.route("multi_hop", 0.95).evidence_path == "linked"  # the graph alone reaches linked passages
    assert router.route("zero_hop", 0.97, generator_knows=True).evidence_path == "none"


def test_expected_cost_by_hand() -> None:
    router = Router()
    probs = {"zero_hop": 0.1, "one_hop": 0.6, "multi_hop": 0.3}
    # predicted one_hop: A = dense (single, 1 call), B = dense+bm25 (single, 2), C = all three (linked, 3)
    a = router.expected_cost(router.plan("A", "one_hop"), probs)
    assert a == pytest.approx(0.1 * (1.6 + 0.2) + 0.6 * (1.0 + 0.2) + 0.3 * (12.0 + 0.2))
    c = router.expected_cost(router.plan("C", "one_hop"), probs)
    assert c == pytest.approx(0.1 * (2.2 + 0.6) + 0.6 * (1.6 + 0.6) + 0.3 * (1.0 + 0.6))
    # 30% multi_hop makes every path without linked evidence too expensive: the Bayes route is C
    assert router.bayes_route("one_hop", probs).strategy == "C"
    assert router.bayes_route("one_hop", {"one_hop": 1.0}).strategy == "A"
    # a sure multi_hop: the graph alone already reaches linked passages, at one call
    plan = router.bayes_route("multi_hop", {"multi_hop": 1.0})
    assert (plan.strategy, plan.retrievers) == ("A", ("graph",))
    assert router.bayes_route("zero_hop", {"zero_hop": 1.0}, generator_knows=True).strategy == "none"


def test_escalation_goes_wider_then_to_the_multi_hop_path() -> None:
    router = Router()
    plan = router.route("one_hop", 0.95)
    steps = []
    while plan is not None:
        steps.append((plan.strategy, plan.complexity, plan.multi_hop))
        plan = router.wider(plan)
    assert steps == [("A", "one_hop", False), ("B", "one_hop", False), ("C", "one_hop", False),
                     ("C", "multi_hop", True)]


def test_cost_matrix_must_price_evidence_paths() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="evidence paths"):
        RouterConfig(cost_matrix={c: {"none": 1, "A": 1, "B": 1, "C": 1} for c in ("zero_hop", "one_hop",
                                                                                  "multi_hop")})


@given(st.floats(0, 1), st.floats(0, 1))
def test_more_multi_hop_mass_never_routes_cheaper(p_multi, shift) -> None:
    router = Router()
    rest = 1 - p_multi
    low = router.bayes_route("one_hop", {"zero_hop": rest / 2, "one_hop": rest / 2, "multi_hop": p_multi})
    more = min(1.0, p_multi + shift * (1 - p_multi))
    rest2 = 1 - more
    high = router.bayes_route("one_hop", {"zero_hop": rest2 / 2, "one_hop": rest2 / 2, "multi_hop": more})
    assert ROUTE_ORDER[high.strategy] >= ROUTE_ORDER[low.strategy]


def test_zero_hop_for_a_generator_without_knowledge_is_routed_by_hop_structure() -> None:
    from amsrag.route.router import retrieval_class

    probs = {"zero_hop": 0.7, "one_hop": 0.06, "multi_hop": 0.24}
    label, alpha = retrieval_class("zero_hop", probs, 0.7, generator_knows=False)
    assert label == "multi_hop" and alpha == pytest.approx(0.24 / 0.30)
    assert retrieval_class("zero_hop", probs, 0.7, generator_knows=True) == ("zero_hop", 0.7)
    assert retrieval_class("one_hop", {"one_hop": 0.8}, 0.8, generator_knows=False) == ("one_hop", 0.8)
