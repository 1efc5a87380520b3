"""`amsrag ask` through a running `amsrag serve`: the question goes to the warm service (`--server URL`, or the
service an index directory announces in its discovery file) and the answer comes back as `POST /v1/ask`
returns it. Standard library only, so the command needs neither the models nor the heavy libraries."""

from __future__ import annotations

import json
import os
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.errors import AmsragError, InputError
from amsrag.serve.discovery import read_discovery

KEY_ENV = "AMSRAG_API_KEY"  # the key this client sends
KEYS_ENV = "AMSRAG_API_KEYS"  # the keys a service accepts (access.settings); the first is sent when KEY_ENV is unset
TIMEOUT_S = 300.0  # a generator may take long; the service's own request timeout ends a stuck request first


class ServiceUnavailable(AmsragError):
    """The service could not answer: not reachable, refused the key, overloaded or failed."""


@dataclass(frozen=True, slots=True)
class Service:
    """A running amsrag service and the key to send it (None: the service runs without keys)."""

    url: str
    key: str | None
    discovered: bool  # found through the index's discovery file, not named with --server

    def ask(self, query: str, system: str, where: dict[str, Any] | None = None) -> dict[str, Any]:
        """The `POST /v1/ask` answer to `query` (`where`: the metadata filter's request field, sent when given).
        InputError when the service refuses the question itself (the same refusal a local answer gives);
        ServiceUnavailable for every other failure."""
        request_body: dict[str, Any] = {"query": query, "system": system}
        if where:
            request_body["where"] = where
        body = json.dumps(request_body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(self.url.rstrip("/") + "/v1/ask", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                answer = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            code, message = _error_of(exc)
            if exc.code == 422:
                raise InputError(message) from None
            raise ServiceUnavailable(f"the service at {self.url} answered {exc.code} {code}: {message}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServiceUnavailable(f"the service at {self.url} could not be reached ({reason})") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("trace"), dict):
            raise ServiceUnavailable(f"the service at {self.url} did not answer with an amsrag answer")
        return answer


def find_service(index: str | None, server: str | None, local: bool, local_options: list[str]) -> Service | None:
    """The service `ask` sends its question to: `server`, else the one announced in the index directory, else
    None (answer locally). `local_options`: the options given that only a local answer honours."""
    if server is not None:
        if local:
            raise InputError("--server and --local exclude each other")
        if local_options:
            raise InputError(f"{', '.join(local_options)}: only for a local answer; the service at {server} answers "
                             "with its own generator and query log (drop --server to answer locally)")
        if not server.startswith(("http://", "https://")):
            raise InputError(f"--server {server!r}: give the service's URL, e.g. http://127.0.0.1:8000")
        return Service(server, service_key(index), discovered=False)
    if local or local_options or index is None or "://" in index or not Path(index).is_dir():
        return None
    found = read_discovery(Path(index))
    return Service(found.url, service_key(index), discovered=True) if found is not None else None


def service_key(index: str | None) -> str | None:
    """The API key to send: $AMSRAG_API_KEY, else the first of $AMSRAG_API_KEYS (what `amsrag serve` reads),
    else the first of the index configuration's [serve] api_keys; None when none is set."""
    if os.environ.get(KEY_ENV, "").strip():
        return os.environ[KEY_ENV].strip()
    keys = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    if keys:
        return keys[0]
    if index is None or "://" in index:
        return None
    try:
        with open(Path(index) / "config.toml", "rb") as f:
            configured = tomllib.load(f).get("serve", {}).get("api_keys", [])
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return configured[0] if isinstance(configured, list) and configured and isinstance(configured[0], str) else None


def _error_of(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The stable code and message of an amsrag error response (`{"error": {"code", "message"}}`)."""
    try:
        error = json.loads(exc.read().decode("utf-8"))["error"]
        return str(error["code"]), str(error["message"])
    except (OSError, ValueError, KeyError, TypeError):
        return "http_error", str(exc.reason)
