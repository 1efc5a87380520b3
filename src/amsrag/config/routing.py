"""The sections of routing and fusion: the classifier, the fusion of the retrievers' lists, the router (its
strategies, cost matrix, second hop and taxonomy of routes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from amsrag.config.base import Section
from amsrag.types import COMPLEXITIES, QUERY_CLASSES, RETRIEVERS, TASK_KINDS, Complexity, QueryClass, RouteKind

Strategy = Literal["A", "B", "C"]
STRATEGIES: tuple[Strategy, ...] = ("A", "B", "C")


class ClassifierConfig(Section):
    artifact: str = Field("", description="classifier artifact directory; empty = the one shipped in amsrag")
    embedding_cache: str = Field(
        "", description="training-embedding cache directory; empty = classifier-embeddings under the cache root"
    )
    hop_temperature: float = Field(
        0.0, ge=0.0, description="the hop head's temperature refitted on this deployment's labelled questions "
        "(`amsrag train classifier calibrate --qa FILE --index DIR`); 0 = the artifact's own")
    library: bool = Field(True, description="blend the index's query library (`amsrag train route learn`) into routing")


def _per_class(value: float) -> dict[str, float]:
    return {r: value for r in RETRIEVERS}


def _by_class(values: dict[Complexity, float]) -> dict[Complexity, dict[str, float]]:
    """Per complexity class, every retriever at that class's value."""
    return {c: _per_class(v) for c, v in values.items()}


class FusionConfig(Section):
    """Fusion (DESIGN §5): RRF, CA-RRF (eqs. 8-10), MMR (eq. 11), adaptive k.

    k_by_class: the per-retriever RRF constant k_r(c). A small k sharpens the rank discount (the
    top few hits dominate), which suits zero/one-hop questions whose answer sits in one top passage;
    a large k flattens it so deeper candidates of every retriever survive, which multi-hop questions
    need (the bridge passage is often ranked low by each retriever). Defaults 30 / 40 / 80 bracket
    the usual k = 60. A retriever missing from its class's map falls back to `rrf_k`.
    beta_by_class: the priors beta_r^(c), uniform until `amsrag train route tune` fits them (with uniform
    priors CA-RRF's weights are uniform for every alpha). Missing retrievers count as 0 before
    renormalising over the activated ones; all zero means uniform.
    """

    rrf_k: float = Field(60.0, ge=0, description="RRF constant k (ranks count from 1)")
    kappa: float = Field(2.0, ge=0, description="CA-RRF: rho(alpha) = sigmoid(kappa * (alpha - alpha0))")
    alpha0: float = Field(0.5, ge=0, le=1, description="CA-RRF: confidence at which rho = 0.5")
    k_by_class: dict[Complexity, dict[str, float]] = Field(
        default_factory=lambda: _by_class({"zero_hop": 30.0, "one_hop": 40.0, "multi_hop": 80.0}),
        description="CA-RRF: k_r(c) per complexity class and retriever",
    )
    beta_by_class: dict[Complexity, dict[str, float]] = Field(
        default_factory=lambda: _by_class({c: 1.0 / 3.0 for c in COMPLEXITIES}),
        description="CA-RRF: prior beta_r^(c) per complexity class and retriever (renormalised when used)",
    )
    mmr_lambda: float = Field(0.5, ge=0, le=1, description="MMR: redundancy penalty lambda")
    mmr_pool: int = Field(2, ge=1, le=20, description="MMR picks k among the top mmr_pool * k fused passages")
    mmr_gate: Literal["always", "redundant", "off"] = Field(
        "always", description="MMR systems: run MMR on every query (the paper's eq. 11; the default for untuned "
        "indexes), never, or only when the fused top k is redundant (mean pairwise cosine >= mmr_redundancy); "
        "`amsrag train route tune` picks the best on calibration queries")
    mmr_redundancy: float = Field(
        0.5, ge=-1, le=1, description="MMR gate 'redundant': mean pairwise cosine of the fused top k's passage "
        "vectors at or above which MMR runs")
    adaptive_k_drop: float = Field(
        0.5, ge=0, le=1, description="adaptive k: cut where the min-max normalised score falls this far below the top"
    )
    adaptive_k: bool = Field(False, description="cut the fused list adaptively instead of the strategy's fixed k")
    adaptive_k_min: int = Field(3, ge=0, description="adaptive k: floor (or all candidates if fewer)")
    adaptive_k_max: int = Field(10, ge=1, description="adaptive k: ceiling")
    learned: str = Field("", description="learned fuser artifact directory (fusion.txt, fusion.json, experts.npz: "
                         "`amsrag train fusion train`); empty = the one shipped in amsrag")
    expert_neighbours: int = Field(16, ge=1, le=512, description="expert weights: training queries consulted")
    expert_temperature: float = Field(0.05, gt=0, description="expert weights: softmax temperature over the "
                                      "neighbours' mean nDCG per retriever")
    expert_trust: float = Field(0.4, gt=0, le=1, description="expert weights: mean neighbour cosine at which the "
                                "neighbours' weights replace the class prior entirely")

    @field_validator("k_by_class", "beta_by_class")
    @classmethod
    def _non_negative(cls, value: dict[Complexity, dict[str, float]]) -> dict[Complexity, dict[str, float]]:
        for c, per_retriever in value.items():
            for r, v in per_retriever.items():
                if not (v >= 0 and v != float("inf")):
                    raise ValueError(f"{c}.{r} must be a finite number >= 0, got {v}")
        return value

    @model_validator(mode="after")
    def _k_range(self) -> FusionConfig:
        if self.adaptive_k_min > self.adaptive_k_max:
            raise ValueError(f"adaptive_k_min ({self.adaptive_k_min}) exceeds adaptive_k_max ({self.adaptive_k_max})")
        return self


EVIDENCE_PATHS = ("none", "single", "linked")


def _default_costs() -> dict[str, dict[str, float]]:
    # rows: the true class; columns: the evidence path a route gives (none: no retrieval; single:
    # retrievers that rank passages one by one; linked: a path that reaches linked passages — the
    # entity graph or the second hop). In the proportions of seed 003's Table 1: the right path
    # costs 1.0, a wider one 1.6 (two steps 2.2), a question sent down a path that cannot reach its
    # evidence 12.0 — it fails silently. `call_cost` adds the price of each activated retriever.
    return {
        "zero_hop": {"none": 1.0, "single": 1.6, "linked": 2.2},
        "one_hop": {"none": 12.0, "single": 1.0, "linked": 1.6},
        "multi_hop": {"none": 12.0, "single": 12.0, "linked": 1.0},
    }


_LETTER_COSTS_V01 = {
    "zero_hop": {"none": 1.0, "A": 1.2, "B": 1.6, "C": 2.2},
    "one_hop": {"none": 12.0, "A": 1.0, "B": 1.6, "C": 2.2},
    "multi_hop": {"none": 12.0, "A": 12.0, "B": 12.0, "C": 1.0},
}


class SecondHopConfig(Section):
    """The multi-hop path's second hop: bridge entities of the first hop's top passages."""

    from_passages: int = Field(3, ge=1, le=20, description="first-hop passages whose entities are bridges")
    bridges: int = Field(4, ge=1, le=20, description="bridge entities expanded")
    per_bridge: int = Field(3, ge=1, le=50, description="BM25 hits per bridge query")
    weight: float = Field(0.5, ge=0, le=1, description="RRF weight of the second-hop list against the first hop's 1")
    hops: int = Field(1, ge=0, le=3, description="expansion rounds after the first hop (bounded)")


def _default_task_costs() -> dict[str, dict[str, float]]:
    # rows: what the question needs; columns: the route it took. The right route costs 1.0. A table or
    # corpus-wide question answered from a few passages fails silently, like a multi-hop question on a
    # single-passage path: 12.0. A text question sent to a table or to the themes either comes back (no
    # confident program, no matching theme: it pays the text path too, ~2.5) or is answered from the wrong
    # source (12.0); taken as even odds: 7.0.
    return {
        "text": {"retrieval": 1.0, "global": 7.0, "table": 7.0},
        "aggregation": {"retrieval": 12.0, "global": 1.0, "table": 12.0},
        "structured": {"retrieval": 12.0, "global": 12.0, "table": 1.0},
    }


_DEFAULT_ROUTES: dict[str, RouteKind] = {"zero_hop": "retrieval", "one_hop": "retrieval", "multi_hop": "retrieval",
                                          "aggregation": "global", "structured": "table"}


class TaxonomyConfig(Section):
    """The router's classes and the route each takes (seed 001: a small taxonomy calibrated on your own
    questions beats a generic larger one). The hop classes always take the retrieval strategies; the task
    head (`amsrag train taxonomy train`) gives aggregation and structured their calibrated confidence, and a
    class's own route is taken when that confidence reaches `min_confidence` (else the text path)."""

    classes: list[QueryClass] = Field(
        default_factory=lambda: list(QUERY_CLASSES),
        description="classes the router may decide; the three hop classes always, aggregation / structured optional")
    routes: dict[str, RouteKind] = Field(
        default_factory=lambda: dict(_DEFAULT_ROUTES),
        description="route per class: retrieval (the A/B/C strategies), global (corpus themes), table (SQL)")
    artifact: str = Field("", description="task head artifact directory; empty = the one shipped in amsrag")
    min_confidence: dict[str, float] = Field(
        default_factory=dict,
        description="calibrated probability at which aggregation / structured take their own route; a class "
        "left out uses the task head card's (`amsrag train taxonomy train` fits them on its calibration questions "
        "under `costs`; `amsrag train route taxonomy` on yours)")
    costs: dict[str, dict[str, float]] = Field(
        default_factory=_default_task_costs, description="C(what the question needs, route taken): rows text / "
        "aggregation / structured, columns retrieval / global / table")

    @model_validator(mode="after")
    def _consistent(self) -> TaxonomyConfig:
        missing = [c for c in COMPLEXITIES if c not in self.classes]
        if missing:
            raise ValueError(f"taxonomy.classes must hold the hop classes {', '.join(COMPLEXITIES)}; "
                             f"missing {', '.join(missing)}")
        for c in self.classes:
            if c not in self.routes:
                raise ValueError(f"taxonomy.routes has no route for class {c!r}")
        for c in COMPLEXITIES:
            if self.routes[c] != "retrieval":
                raise ValueError(f"taxonomy.routes.{c} must be 'retrieval' (hop classes take the A/B/C strategies)")
        for name, v in self.min_confidence.items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"taxonomy.min_confidence.{name} must lie in [0, 1], got {v}")
        if set(self.costs) != set(TASK_KINDS) or any(set(r) != {"retrieval", "global", "table"}
                                                     for r in self.costs.values()):
            raise ValueError("taxonomy.costs must have rows text/aggregation/structured and columns "
                             "retrieval/global/table")
        return self

    @property
    def task_classes(self) -> tuple[str, ...]:
        """The non-hop classes in use (empty: the three-class taxonomy, no task head runs)."""
        return tuple(c for c in self.classes if c not in COMPLEXITIES)


class RouterConfig(Section):
    theta_high: float = Field(0.90, gt=0, le=1, description="alpha >= theta_high -> Strategy A")
    theta_low: float = Field(0.60, ge=0, lt=1, description="alpha < theta_low -> Strategy C (reject option)")
    best_retriever: dict[str, str] = Field(
        default_factory=lambda: {"zero_hop": "dense", "one_hop": "dense", "multi_hop": "graph"},
        description="Strategy A's single retriever per class",
    )
    strategy_b: dict[str, list[str]] = Field(
        default_factory=lambda: {"zero_hop": ["dense", "bm25"], "one_hop": ["dense", "bm25"],
                                 "multi_hop": ["dense", "graph"]},
        description="Strategy B's two complementary retrievers per class (the graph reaches bridge passages)",
    )
    strategy_c: list[str] = Field(default_factory=lambda: ["dense", "bm25", "graph"])
    depth: dict[str, int] = Field(default_factory=lambda: {"A": 50, "B": 50, "C": 100, "fixed": 100},
                                  description="candidates fetched per retriever")
    k: dict[str, int] = Field(default_factory=lambda: {"A": 5, "B": 5, "C": 5, "fixed": 5},
                              description="passages kept after fusion")
    retriever_timeout_s: float = Field(2.0, gt=0, description="per-query budget for the activated retrievers")
    cost_matrix: dict[str, dict[str, float]] = Field(
        default_factory=_default_costs, description="C(true class, evidence path): rows zero_hop/one_hop/multi_hop, "
        "columns none/single/linked")
    call_cost: float = Field(0.2, ge=0, description="cost of each activated retriever, added to the path's cost")
    decision: Literal["thresholds", "bayes"] = Field(
        "thresholds", description="route by (theta_high, theta_low), or by the Bayes decision under the cost matrix")
    blind_strategy: Literal["B", "A"] = Field(
        "B", description="a question the classifier cannot read (its language: Chinese on the English encoder) that "
        "it routes to Strategy A goes to B instead (A: no override)")
    expand_strategies: list[Strategy] = Field(
        default_factory=lambda: list(STRATEGIES),
        description="strategies whose multi_hop route runs the second hop (Strategy C only in the paper; every "
        "multi_hop route here: see docs/benchmarks/pipeline.md)")
    second_hop: SecondHopConfig = Field(default_factory=lambda: SecondHopConfig())
    taxonomy: TaxonomyConfig = Field(default_factory=lambda: TaxonomyConfig())

    @field_validator("cost_matrix", mode="before")
    @classmethod
    def _upgrade_costs(cls, value: Any) -> Any:
        # indexes written by amsrag 0.1 priced strategy letters; their matrix was always the default
        if value == _LETTER_COSTS_V01:
            return _default_costs()
        return value

    @field_validator("cost_matrix")
    @classmethod
    def _cost_shape(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        classes = ("zero_hop", "one_hop", "multi_hop")
        if set(value) != set(classes):
            raise ValueError(f"cost_matrix rows must be exactly {', '.join(classes)}; got {', '.join(sorted(value))}")
        for c, row in value.items():
            if set(row) != set(EVIDENCE_PATHS):
                raise ValueError(f"cost_matrix.{c} columns must be exactly {', '.join(EVIDENCE_PATHS)} "
                                 f"(evidence paths); got {', '.join(sorted(row))}")
            for path, cost in row.items():
                if not (cost >= 0 and cost != float("inf")):
                    raise ValueError(f"cost_matrix.{c}.{path} must be a finite number >= 0, got {cost}")
        return value
