"""The external source backends: any JSON search API (`HttpRetriever`) and other amsrag servers
(`RemoteRetriever`, POST /v1/retrieve), and the results they return (`ExternalPassage`,
`ExternalResult`). A call never raises for a source failure: the result carries the error."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx

from amsrag.config import ExternalSourceConfig
from amsrag.errors import InputError
from amsrag.retrieve.external.sanitise import domain_allowed, neutralise, strip_html
from amsrag.types import passage_id_for

MAX_RESPONSE_BYTES = 4 * 1024 * 1024


# ---------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ExternalPassage:
    id: str
    title: str
    text: str
    url: str
    source: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "text": self.text, "url": self.url, "source": self.source,
                "score": self.score}


@dataclass(slots=True)
class ExternalResult:
    passages: list[ExternalPassage]
    error: str | None  # None | "timeout" | "circuit_open" | "http <status>" | "connection" | "bad_response: ..."
    flags: list[str]
    ms: float
    source: str = ""
    per_source: dict[str, dict[str, Any]] = field(default_factory=dict)  # coordinator only

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "passages": [p.to_dict() for p in self.passages],
                               "error": self.error, "flags": list(self.flags), "ms": round(self.ms, 3)}
        if self.per_source:
            out["per_source"] = self.per_source
        return out


# ---------------------------------------------------------------- retrievers


def json_path(value: Any, path: str) -> Any:
    """Follow a dotted path ("data.items", "results.0.doc"); "" is the value itself; None when missing."""
    if not path:
        return value
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _fill(template: Any, query: str, k: int) -> Any:
    """Substitute {query} and {k} in every string of a template; a string that is exactly "{k}" becomes an int."""
    if isinstance(template, str):
        if template == "{k}":
            return k
        return template.replace("{query}", query).replace("{k}", str(k))
    if isinstance(template, dict):
        return {key: _fill(v, query, k) for key, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, query, k) for v in template]
    return template


@runtime_checkable
class ExternalRetriever(Protocol):
    """One external source."""

    name: str

    def search(self, query: str, k: int | None = None, client: httpx.Client | None = None,
               timeout_s: float | None = None) -> ExternalResult: ...


class SourceError(Exception):
    """A failed call; `code` goes into ExternalResult.error."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class HttpRetriever:
    """Any JSON search API: a request template and a response field mapping (ExternalSourceConfig)."""

    kind = "http"

    def __init__(self, config: ExternalSourceConfig, max_text_chars: int = 4000,
                 neutralise_instructions: bool = True) -> None:
        self.config = config
        self.name = config.name
        self.max_text_chars = max_text_chars
        self.neutralise_instructions = neutralise_instructions

    # request / response mapping -------------------------------------------------
    def request(self, query: str, k: int) -> dict[str, Any]:
        c = self.config
        headers = {"Accept": "application/json", **c.headers}
        if c.api_key_env and os.environ.get(c.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[c.api_key_env]}"
        req: dict[str, Any] = {"method": c.method, "url": c.url, "headers": headers}
        if c.method == "GET":
            req["params"] = _fill(c.params, query, k)
        else:
            req["json"] = _fill(c.body or {"query": "{query}", "k": "{k}"}, query, k)
        return req

    def records(self, payload: Any) -> list[dict[str, Any]]:
        items = json_path(payload, self.config.results_path)
        if not isinstance(items, list):
            raise SourceError(f"bad_response: no list at {self.config.results_path or '<root>'!r}")
        c = self.config
        out = []
        for rank, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                continue

            def get(path: str, item: dict[str, Any] = item) -> Any:
                return json_path(item, path) if path else None

            out.append({"id": get(c.id_field), "title": get(c.title_field), "text": get(c.text_field),
                        "url": get(c.url_field), "score": get(c.score_field), "rank": rank})
        return out

    def clean(self, records: list[dict[str, Any]], k: int) -> tuple[list[ExternalPassage], list[str]]:
        """Sanitise, apply the allowlist, keep the first k usable results."""
        flags: list[str] = []
        passages: list[ExternalPassage] = []
        allowed = self.config.allowed_domains
        for r in records:
            url = str(r["url"] or "").strip()
            if allowed and not domain_allowed(url, allowed):
                flags.append(f"dropped_domain:{self.name}:{urlsplit(url).hostname or url or '<no url>'}")
                continue
            title, tf = strip_html(str(r["title"] or ""))
            text, xf = strip_html(str(r["text"] or ""))
            if len(text) > self.max_text_chars:
                text = text[: self.max_text_chars]
                flags.append(f"truncated:{self.name}")
            if self.neutralise_instructions:
                title, hit_t = neutralise(title)
                text, hit_x = neutralise(text)
                if hit_t or hit_x:
                    flags.append(f"instructions_neutralised:{self.name}:{r['rank']}")
            flags += [f"{f}:{self.name}" for f in sorted(set(tf + xf))]
            if not text.strip():
                continue
            rid = str(r["id"]).strip() if r["id"] is not None and str(r["id"]).strip() else passage_id_for(title, text)
            try:
                score = float(r["score"]) if r["score"] is not None else 1.0 / r["rank"]
            except (TypeError, ValueError):
                score = 1.0 / r["rank"]
            passages.append(ExternalPassage(f"ext:{self.name}:{rid}", title, text, url, self.name, score))
            if len(passages) == k:
                break
        return passages, list(dict.fromkeys(flags))

    # calls --------------------------------------------------------------------
    def fetch(self, client: httpx.Client, query: str, k: int, timeout_s: float) -> Any:
        req = self.request(query, k)
        try:
            with client.stream(req.pop("method"), req.pop("url"), timeout=httpx.Timeout(timeout_s), **req) as resp:
                if resp.status_code >= 400:
                    raise SourceError(f"http {resp.status_code}")
                body = bytearray()
                deadline = time.monotonic() + timeout_s
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > MAX_RESPONSE_BYTES:
                        raise SourceError("bad_response: larger than 4 MiB")
                    if time.monotonic() > deadline:  # a server dripping bytes must not outlive the timeout
                        raise SourceError("timeout")
        except httpx.TimeoutException:
            raise SourceError("timeout") from None
        except httpx.HTTPError as exc:
            raise SourceError(f"connection: {type(exc).__name__}") from None
        try:
            import json

            return json.loads(bytes(body).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise SourceError("bad_response: not JSON") from None

    def search(self, query: str, k: int | None = None, client: httpx.Client | None = None,
               timeout_s: float | None = None) -> ExternalResult:
        """One call; never raises for a source failure (the result carries the error)."""
        if not isinstance(query, str) or not query.strip():
            raise InputError("empty query: an external source needs a non-empty query")
        k = k or self.config.k
        timeout_s = min(timeout_s, self.config.timeout_s) if timeout_s is not None else self.config.timeout_s
        t = time.perf_counter()
        own = client is None
        client = client or httpx.Client(follow_redirects=False, trust_env=False)
        try:
            payload = self.fetch(client, query.strip(), k, timeout_s)
            passages, flags = self.clean(self.records(payload), k)
            return ExternalResult(passages, None, flags, (time.perf_counter() - t) * 1000, self.name)
        except SourceError as exc:
            return ExternalResult([], exc.code, [f"error:{self.name}:{exc.code}"], (time.perf_counter() - t) * 1000,
                                  self.name)
        finally:
            if own:
                client.close()


class RemoteRetriever(HttpRetriever):
    """Another amsrag server: POST {root}/v1/retrieve {"query", "k", "system"} -> {"passages": [...]}."""

    kind = "remote"

    def request(self, query: str, k: int) -> dict[str, Any]:
        c = self.config
        url = c.url.rstrip("/")
        if not url.endswith("/v1/retrieve"):
            url += "/v1/retrieve"
        headers = {"Accept": "application/json", **c.headers}
        if c.api_key_env and os.environ.get(c.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[c.api_key_env]}"
        return {"method": "POST", "url": url, "headers": headers, "json": {"query": query, "k": k, "system": c.system}}

    def records(self, payload: Any) -> list[dict[str, Any]]:
        items = payload.get("passages") if isinstance(payload, dict) else None
        if not isinstance(items, list):
            raise SourceError("bad_response: no `passages` list")
        return [{"id": p.get("id"), "title": p.get("title"), "text": p.get("text"), "url": p.get("url"),
                 "score": p.get("score"), "rank": n} for n, p in enumerate(items, start=1) if isinstance(p, dict)]


def make_retriever(config: ExternalSourceConfig, max_text_chars: int = 4000,
                   neutralise_instructions: bool = True) -> HttpRetriever:
    cls = RemoteRetriever if config.kind == "remote" else HttpRetriever
    return cls(config, max_text_chars, neutralise_instructions)
