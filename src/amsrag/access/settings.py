"""The [serve] section a front door runs with: the index's, overridden by flags and by $AMSRAG_API_KEYS, and
refused when it would listen off loopback without keys (`amsrag serve` and `amsrag serve --mcp` alike)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from amsrag.access.limits import is_loopback
from amsrag.config import ServeConfig
from amsrag.errors import InputError

KEYS_ENV = "AMSRAG_API_KEYS"


def serve_config(base: ServeConfig, host: str | None = None, port: int | None = None,
                 env: Mapping[str, str] | None = None) -> ServeConfig:
    """The index's [serve] section, overridden by flags and by $AMSRAG_API_KEYS (comma-separated);
    refuses to run without keys anywhere but on loopback."""
    env = os.environ if env is None else env
    cfg = base.model_copy(deep=True)
    if host is not None:
        cfg.host = host
    if port is not None:
        cfg.port = port
    from_env = [k.strip() for k in env.get(KEYS_ENV, "").split(",") if k.strip()]
    if from_env:
        cfg.api_keys = from_env
    if not cfg.api_keys and not is_loopback(cfg.host):
        raise InputError(f"refusing to serve on {cfg.host} without API keys: set {KEYS_ENV}=key1,key2 (or "
                         f"[serve] api_keys in the configuration), or bind to 127.0.0.1")
    if any(len(k) < 16 for k in cfg.api_keys):
        raise InputError("API keys must be at least 16 characters long")
    return cfg
