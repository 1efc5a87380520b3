"""The decomposer stage: a question becomes a typed plan (single, bridge, comparison, intersection, implicit)
that the chain executor (`amsrag.pipeline.chain`) answers step by step."""

from amsrag.decompose.base import Decomposer
from amsrag.decompose.plan import MULTI_STEP, PLAN_KINDS, Operator, Plan, PlanKind, Step

__all__ = ["MULTI_STEP", "PLAN_KINDS", "Decomposer", "Operator", "Plan", "PlanKind", "Step"]
