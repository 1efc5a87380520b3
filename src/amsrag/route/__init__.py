"""Router (DESIGN §4): the classifier's (c, alpha) → a retrieval plan (Strategy none/A/B/C)."""

from amsrag.route.router import RoutePlan, Router, evidence_path

__all__ = ["RoutePlan", "Router", "evidence_path"]
