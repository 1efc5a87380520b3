"""External sources (DESIGN §6): any JSON search API (`HttpRetriever`) and other amsrag servers
(`RemoteRetriever`, POST /v1/retrieve), run concurrently by `ExternalSources` under a strict per-call
timeout and a total budget, with a circuit breaker per source.

What comes back is untrusted: HTML is stripped (script / style content dropped), instruction-like text
("ignore previous instructions", "you are now", "system prompt", chat-template markers...) is replaced
by a marker and flagged, and results whose URL is outside the source's domain allowlist are dropped and
flagged. A source that times out yields an explicit empty result with error "timeout" (the caller turns
it into "insufficient evidence"); nothing here waits past the budget.
"""

from __future__ import annotations

import html
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx

from amsrag.config import ExternalConfig, ExternalSourceConfig
from amsrag.errors import InputError
from amsrag.types import passage_id_for

MAX_RESPONSE_BYTES = 4 * 1024 * 1024
INJECTION_MARK = "[removed: instruction-like text]"
_DROP_TAGS = frozenset({"script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "head"})
_BLOCK_TAGS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                         "td", "th", "blockquote", "pre", "ul", "ol", "table"})
_INJECTION = re.compile(
    r"(?is)"
    r"(?:\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|all|any|your|"
    r"the)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|context)\b[^.\n]*)"
    r"|(?:\byou\s+are\s+now\b[^.\n]*)"
    r"|(?:\b(?:system|developer)\s+(?:prompt|message|instructions?)\b[^.\n]*)"
    r"|(?:\bnew\s+instructions?\s*:[^\n]*)"
    r"|(?:\b(?:act|pretend|behave)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?(?:unrestricted|jailbroken|dan|"
    r"different|evil)\b[^.\n]*)"
    r"|(?:\bjailbreak\w*\b[^.\n]*)"
    r"|(?:\bdo\s+anything\s+now\b[^.\n]*)"
    r"|(?:<\|?(?:im_start|im_end|system|assistant|user|endoftext)\|?>)"
    r"|(?:\[/?INST\]|<</?SYS>>)"
    r"|(?:^\s*#{2,}\s*(?:instruction|system|response)s?\s*:?[^\n]*)"
    r"|(?:^\s*(?:system|assistant)\s*:[^\n]*)"
    r"|(?:\b(?:reveal|print|output|repeat)\b[^.\n]{0,30}\b(?:system\s+prompt|your\s+instructions|hidden\s+prompt)"
    r"[^.\n]*)",
    re.MULTILINE,
)


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
        out = {"source": self.source, "passages": [p.to_dict() for p in self.passages], "error": self.error,
               "flags": list(self.flags), "ms": round(self.ms, 3)}
        if self.per_source:
            out["per_source"] = self.per_source
        return out


# ---------------------------------------------------------------- sanitising


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self.dropped: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP_TAGS:
            self._skip += 1
            self.dropped.add(tag)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def strip_html(text: str) -> tuple[str, list[str]]:
    """Visible text of an HTML fragment (script/style/... content dropped); flags name what was removed."""
    flags: list[str] = []
    if "<" in text and ">" in text:
        parser = _TextExtractor()
        parser.feed(text)
        parser.close()
        out = "".join(parser.parts)
        if out != text:
            flags.append("html_stripped")
        flags += [f"removed_{t}" for t in sorted(parser.dropped)]
        text = out
    else:
        text = html.unescape(text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line), flags


def neutralise(text: str) -> tuple[str, bool]:
    """Instruction-like spans replaced by a marker; True when any was found."""
    out, n = _INJECTION.subn(INJECTION_MARK, text)
    return out, n > 0


def domain_allowed(url: str, allowed: Sequence[str]) -> bool:
    """True when `url`'s host is one of `allowed` or a subdomain of one (always True for an empty list)."""
    if not allowed:
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        return False
    return any(host == d.lower().strip(".") or host.endswith("." + d.lower().strip(".")) for d in allowed)


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


# ---------------------------------------------------------------- coordinator


class CircuitBreaker:
    """Opens after `failures` consecutive failures; while open the source is skipped for `cooldown_s`, then
    one trial call is let through (half-open): success closes it, failure opens it again."""

    def __init__(self, failures: int, cooldown_s: float) -> None:
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._count = 0
        self._open_until = 0.0
        self._trial = False
        self._lock = threading.Lock()

    def allow(self) -> bool:
        with self._lock:
            if self._count < self.failures:
                return True
            if time.monotonic() >= self._open_until and not self._trial:
                self._trial = True
                return True
            return False

    def record(self, ok: bool) -> None:
        with self._lock:
            self._trial = False
            if ok:
                self._count = 0
            else:
                self._count += 1
                if self._count >= self.failures:
                    self._open_until = time.monotonic() + self.cooldown_s

    @property
    def state(self) -> str:
        with self._lock:
            if self._count < self.failures:
                return "closed"
            return "half_open" if time.monotonic() >= self._open_until else "open"


class ExternalSources:
    """Runs the configured sources concurrently; returns within `budget_ms` whatever happens."""

    def __init__(self, config: ExternalConfig, retrievers: Sequence[HttpRetriever] | None = None) -> None:
        self.config = config
        self.retrievers = list(retrievers) if retrievers is not None else [
            make_retriever(s, config.max_text_chars, config.neutralise_instructions) for s in config.sources]
        names = [r.name for r in self.retrievers]
        if len(set(names)) != len(names):
            raise InputError(f"external source names must be unique, got {names}")
        self.breakers = {r.name: CircuitBreaker(config.breaker_failures, config.breaker_cooldown_s)
                         for r in self.retrievers}
        self._pool = ThreadPoolExecutor(max_workers=max(1, 2 * len(self.retrievers)),
                                        thread_name_prefix="amsrag-external")
        self._client = httpx.Client(follow_redirects=False, trust_env=False,
                                    limits=httpx.Limits(max_connections=max(4, 4 * len(self.retrievers))))

    def __bool__(self) -> bool:
        return bool(self.retrievers)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def __enter__(self) -> ExternalSources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, r: HttpRetriever, query: str, k: int | None, timeout_s: float) -> ExternalResult:
        result = r.search(query, k, client=self._client, timeout_s=timeout_s)
        self.breakers[r.name].record(result.error is None)
        return result

    def search(self, query: str, k: int | None = None, budget_ms: float | None = None) -> ExternalResult:
        """All sources at once; merged passages (sources in configuration order, each by its own rank).

        `error` is None when at least one source answered, else "timeout" when any timed out (or the
        budget ran out), else the first error. `per_source` records each source's outcome.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("empty query: external sources need a non-empty query")
        budget = (budget_ms if budget_ms is not None else self.config.budget_ms) / 1000.0
        t = time.perf_counter()
        deadline = time.monotonic() + budget
        results: dict[str, ExternalResult] = {}
        futures: dict[Future[ExternalResult], HttpRetriever] = {}
        for r in self.retrievers:
            if not self.breakers[r.name].allow():
                results[r.name] = ExternalResult([], "circuit_open", [f"circuit_open:{r.name}"], 0.0, r.name)
                continue
            futures[self._pool.submit(self._call, r, query, k, min(r.config.timeout_s, budget))] = r
        pending = set(futures)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            for f in done:
                r = futures[f]
                try:
                    results[r.name] = f.result()
                except Exception as exc:  # a bug in one source must not sink the others
                    self.breakers[r.name].record(False)
                    results[r.name] = ExternalResult([], f"error: {type(exc).__name__}",
                                                     [f"error:{r.name}:{type(exc).__name__}"], 0.0, r.name)
        for f in pending:  # still running at the budget: an explicit timeout (the call ends on its own timeout)
            r = futures[f]
            results[r.name] = ExternalResult([], "timeout", [f"budget_exceeded:{r.name}"],
                                             (time.perf_counter() - t) * 1000, r.name)
        ordered = [results[r.name] for r in self.retrievers if r.name in results]
        passages = [p for res in ordered for p in res.passages]
        flags = [f for res in ordered for f in res.flags]
        errors = [res.error for res in ordered if res.error]
        if any(res.error is None for res in ordered):
            error = None
        elif "timeout" in errors:
            error = "timeout"
        else:
            error = errors[0] if errors else "no_sources"
        per = {res.source: {"n": len(res.passages), "error": res.error, "ms": round(res.ms, 3),
                            "breaker": self.breakers[res.source].state} for res in ordered}
        return ExternalResult(passages, error, flags, (time.perf_counter() - t) * 1000, "external", per)
