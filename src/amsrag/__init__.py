"""amsrag: adaptive multi-source retrieval-augmented generation.

The Python API (docs/python-api.md): `Index` to open or build an index and ask, retrieve, search, add and sync;
the results `AnswerResult` and `RetrievalResult` with their `Trace`; `Citation`, `Route` and `route_of`. The
names below are imported on first use, so `import amsrag` stays light.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from amsrag.types import Hit, Passage, QAExample, QASet
from amsrag.version import INDEX_FORMAT_VERSION, __version__

if TYPE_CHECKING:
    from amsrag.api import Citation, Index, Route, route_of
    from amsrag.config import AmsragConfig
    from amsrag.errors import AmsragError, InputError
    from amsrag.indexing.job import JobReport
    from amsrag.pipeline.engine import Engine
    from amsrag.pipeline.results import AnswerResult, RetrievalResult
    from amsrag.pipeline.scored import ScoredPassage
    from amsrag.pipeline.trace import Trace

_LAZY = {"Index": "amsrag.api", "Citation": "amsrag.api", "Route": "amsrag.api", "route_of": "amsrag.api",
         "AnswerResult": "amsrag.pipeline.results", "RetrievalResult": "amsrag.pipeline.results",
         "Engine": "amsrag.pipeline.engine", "ScoredPassage": "amsrag.pipeline.passes",
         "Trace": "amsrag.pipeline.trace", "AmsragConfig": "amsrag.config", "JobReport": "amsrag.indexing.job",
         "AmsragError": "amsrag.errors", "InputError": "amsrag.errors"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'amsrag' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["INDEX_FORMAT_VERSION", "AmsragConfig", "AmsragError", "AnswerResult", "Citation", "Engine", "Hit",
           "Index", "InputError", "JobReport", "Passage", "QAExample", "QASet", "RetrievalResult", "Route",
           "ScoredPassage", "Trace", "__version__", "route_of"]
