"""The HTTP service: `amsrag serve` (FastAPI + uvicorn), an OpenAI-compatible endpoint and the web UI.
The names below are imported on first use (`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
    from amsrag.serve.app import create_app
    from amsrag.serve.launch import run
    from amsrag.serve.service import Service

__all__ = ["Service", "create_app", "run"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "create_app": "amsrag.serve.app", "run": "amsrag.serve.launch",
    "Service": "amsrag.serve.service",
})
