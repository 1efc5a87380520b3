"""The pipeline that composes the stages (DESIGN §2): `Engine` over a `PassageIndex`, the `QueryContext` of each
question, one `RetrievalPass` per route plan, the `CorrectiveLoop`, and the typed `Trace` of every decision."""

from amsrag.pipeline.context import QueryContext
from amsrag.pipeline.engine import Engine
from amsrag.pipeline.results import AnswerResult, RetrievalResult
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.systems import SYSTEMS, SystemSpec, system_spec
from amsrag.pipeline.trace import Trace

__all__ = ["SYSTEMS", "AnswerResult", "Engine", "QueryContext", "RetrievalResult", "ScoredPassage", "SystemSpec",
           "Trace", "system_spec"]
