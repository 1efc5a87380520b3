"""The pipeline that composes the stages (DESIGN §2)."""

from amsrag.pipeline.engine import AnswerResult, Engine, RetrievalResult, ScoredPassage
from amsrag.pipeline.systems import SYSTEMS, SystemSpec, system_spec

__all__ = ["SYSTEMS", "AnswerResult", "Engine", "RetrievalResult", "ScoredPassage", "SystemSpec", "system_spec"]
