"""The HTTP service: `amsrag serve` (FastAPI + uvicorn), an OpenAI-compatible endpoint and the web UI."""

from amsrag.serve.app import create_app
from amsrag.serve.run import run, serve_config
from amsrag.serve.service import Service

__all__ = ["Service", "create_app", "run", "serve_config"]
