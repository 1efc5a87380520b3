"""One query log row: `QueryLogEntry`, built from an answer and its trace by `entry_from_answer`.

The columns are what the monitor report and the review queue read: the route (the classifier's label and
alpha, the routing label and alpha, the strategy), the retrievers, escalations and corrective action, the
answer, its citations and flags, the timings, an open `signals` object and the citation-support `audit`.
Nothing from the request itself (headers, API keys, the client's address) ever reaches an entry, and
`Redactor` removes known secrets and secret-looking tokens from every string that does.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from amsrag.version import __version__

if TYPE_CHECKING:
    from amsrag.config import AmsragConfig, QueryLogConfig, ServeConfig

REDACTED = "[redacted]"
# What may follow a secret word without being the secret ("the password is", "token expired").
_NOT_SECRETS = frozenset({"is", "was", "are", "were", "of", "for", "and", "or", "the", "a", "an", "to", "in", "on",
                          "not", "that", "this", "it", "with", "from", "field", "reset", "expired", "redacted"})


def _keep_key(match: re.Match[str]) -> str:
    """A secret word and its value: the value is redacted unless it is a common word."""
    value = match.group(0)[len(match.group(1)) + len(match.group(2)) + len(match.group(3)):]
    if value.lower().strip("[]") in _NOT_SECRETS or REDACTED in value:
        return match.group(0)
    return match.group(1) + match.group(2) + match.group(3) + REDACTED
SOURCES = ("api", "openai", "cli")

# Secret-looking tokens, whoever's they are: bearer credentials, provider-style keys (any case), JWTs, AWS
# access key ids and secret keys, "password: X" / "password is X", URL passwords.
_SECRET_WORDS = r"pass(?:word|phrase|wd)s?|pwd|api[_ -]?keys?|access[_ -]?keys?|secret(?:[_ -]?keys?)?|tokens?"
_PATTERNS = (
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1\2" + REDACTED),
    (re.compile(r"(?i)\b(?:sk|pk|rk|ghp|gho|ghs|ghu|glpat|xox[abpr])[-_][A-Za-z0-9_-]{12,}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), REDACTED),  # JWT: header.payload.sig
    (re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|AGPA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), REDACTED),  # AWS key ids
    # a bare AWS secret key: 40 base64 characters with upper, lower case and a digit (not a hex digest)
    (re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
                r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), REDACTED),
    (re.compile(rf"(?i)\b({_SECRET_WORDS})(\s*[:=]\s*|\s+(?:is|was|are|were)\s+)([\"']?)[^\s,;\"']{{3,}}"),
     _keep_key),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+):[^\s@/]+@"), r"\1:" + REDACTED + "@"),  # URL passwords
)
MIN_SECRET_CHARS = 6  # shorter configured values are not searched for (they would redact common words)


class Redactor:
    """Replaces `secrets` (API keys, tokens from the configuration and its environment variables) and
    secret-looking tokens with "[redacted]" in strings; drops NUL characters (PostgreSQL text refuses them)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def text(self, value: str) -> str:
        value = value.replace("\x00", "")
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        for pattern, replacement in _PATTERNS:
            value = pattern.sub(replacement, value)
        return value

    def value(self, value: Any) -> Any:
        """`value` (JSON-like) with every string redacted and non-finite floats as None (JSON has neither)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


def secrets_of(config: AmsragConfig | None = None, serve: ServeConfig | None = None,
               env: Mapping[str, str] | None = None) -> list[str]:
    """The secrets this installation knows: the service's API keys ($AMSRAG_API_KEYS too), and the values of
    the environment variables and headers the generator and the external sources authenticate with."""
    env = os.environ if env is None else env
    found = [k.strip() for k in env.get("AMSRAG_API_KEYS", "").split(",") if k.strip()]
    if serve is not None:
        found += serve.api_keys
    if config is not None:
        found += config.serve.api_keys
        names = [config.generator.api_key_env] + [s.api_key_env for s in config.external.sources]
        found += [env[n] for n in names if n and env.get(n)]
        for source in config.external.sources:
            found += list(source.headers.values())
            found += [v.split(None, 1)[-1] for v in source.headers.values()]  # "Bearer TOKEN": the token alone
    return found


@dataclass(frozen=True, slots=True)
class QueryLogEntry:
    """One answered question. `id` is set by the log (None before it is stored); `ts` is UTC."""

    ts: datetime
    source: str  # api | openai | cli
    system: str
    query: str
    language: str | None
    label: str | None  # the classifier's class and confidence
    alpha: float | None
    route_label: str | None  # the class and confidence routing acted on
    route_alpha: float | None
    strategy: str
    retrievers: list[str]  # distinct retrievers run, in run order
    retriever_calls: int
    escalations: int
    corrective_action: str | None
    abstained: bool
    answer: str | None  # None: not stored (`store_answers = false`)
    citations: list[str]
    generator: str | None
    confidence: float | None
    total_ms: float | None
    timings: dict[str, Any] = field(default_factory=dict)  # the trace's timings_ms: stage -> ms
    signals: dict[str, Any] = field(default_factory=dict)  # open: class probabilities, scores, errors...
    audit: dict[str, Any] | None = None  # the citation-support audit, when one ran
    flagged: bool = False  # the audit flagged the answer, or its evidence and confidence disagree
    version: str = __version__
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ts"] = iso(self.ts)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryLogEntry:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        if isinstance(values.get("ts"), str):
            values["ts"] = parse_time(values["ts"])
        return cls(**values)

    def with_id(self, id_: int) -> QueryLogEntry:
        return replace(self, id=id_)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(QueryLogEntry) if f.name != "id")
JSON_COLUMNS = frozenset({"retrievers", "citations", "timings", "signals", "audit"})


def utc(ts: datetime) -> datetime:
    """`ts` as an aware UTC datetime (a naive one is taken as UTC)."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def iso(ts: datetime) -> str:
    """Fixed-width ISO 8601 in UTC: sorts as text in the order of time (the SQLite column)."""
    return utc(ts).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or time; without an offset it is UTC."""
    try:
        return utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00")))
    except ValueError:
        from amsrag.errors import InputError

        raise InputError(f"not an ISO 8601 date or time: {text!r} (e.g. 2025-01-31 or 2025-01-31T12:00:00Z)") \
            from None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _signals(trace: Mapping[str, Any], query: str, truncated: bool) -> dict[str, Any]:
    """What the monitor may chart beyond the columns; keys are present only when the trace has them."""
    cx = trace.get("complexity") or {}
    out: dict[str, Any] = {}
    if cx.get("probs"):
        out["probs"] = dict(cx["probs"])
    if cx.get("decided_by"):
        out["decided_by"] = cx["decided_by"]
    if cx.get("embedding") is False:
        out["embedding"] = False
    vote = cx.get("library")
    if vote:
        out["library"] = {k: vote.get(k) for k in ("n_close", "p_multi", "weight")}
    out["reason"] = trace.get("reason")
    fusion = trace.get("fusion") or {}
    out["fusion"] = {"method": fusion.get("method"), "weights": fusion.get("weights") or {}}
    out["searches"] = trace.get("searches")
    errors = {r["name"]: r["error"] for r in trace.get("retrievers") or [] if r.get("error")}
    if errors:
        out["retriever_errors"] = errors
    corr = trace.get("corrective") or {}
    for key in ("score", "confidence", "gate", "insufficient_evidence"):
        if corr.get(key) is not None:
            out[f"corrective_{key}"] = corr[key]
    tax = trace.get("taxonomy")
    if tax:
        out["taxonomy"] = {"label": tax.get("label"), "alpha": tax.get("alpha"), "route": tax.get("route")}
    structured = trace.get("structured")
    if structured:
        out["structured"] = {k: structured.get(k) for k in ("table", "confidence", "fallback") if k in structured}
    side = trace.get("global")
    if side:
        out["global"] = {"selection": side.get("selection"), "fallback": side.get("fallback")}
    targ = trace.get("targ")
    if targ:
        out["targ"] = {"fired": targ.get("fired"), "confidence": targ.get("confidence")}
    gen = trace.get("generator") or {}
    if gen.get("error"):
        out["generator_error"] = str(gen["error"])
    lang = trace.get("language") or {}
    if lang.get("mixed"):
        out["language_mixed"] = True
    proxy = trace.get("signals")
    if isinstance(proxy, Mapping):
        out["proxy"] = dict(proxy)  # the five proxy signals (`amsrag.audit.signals.ProxySignals`)
    out["query_chars"] = len(query)
    if truncated:
        out["query_truncated"] = True
    return out


def entry_from_answer(answer: Any, config: QueryLogConfig | None = None, source: str = "api",
                      redactor: Redactor | None = None, now: datetime | None = None) -> QueryLogEntry:
    """The log entry of one answer: an `AnswerResult` or its `to_dict()` (the /v1/ask body: query, answer,
    citations, abstained, trace). The trace's `audit` ({"support", "flagged", ...}) is kept when present."""
    from amsrag.config import QueryLogConfig

    config = config or QueryLogConfig()
    redactor = redactor or Redactor()
    data: Mapping[str, Any] = answer.to_dict() if hasattr(answer, "to_dict") else answer
    trace: Mapping[str, Any] = data.get("trace") or {}
    query = str(data.get("query", ""))
    redacted_query = redactor.text(query)  # before the cut: a cut secret would escape its pattern
    stored_query = redacted_query[:config.max_query_chars]
    cx = trace.get("complexity") or {}
    runs = trace.get("retrievers") or []
    gen = trace.get("generator") or {}
    timings = dict(trace.get("timings_ms") or {})
    audit = trace.get("audit")
    audit = dict(audit) if isinstance(audit, Mapping) else None
    lang = trace.get("language") or {}
    corrective = trace.get("corrective") or {}
    proxy = trace.get("signals")
    flagged = bool(audit is not None and audit.get("flagged")) or \
        bool(isinstance(proxy, Mapping) and proxy.get("flagged"))
    text = redactor.text
    return QueryLogEntry(
        ts=utc(now) if now is not None else datetime.now(UTC),
        source=source,
        system=str(trace.get("system", "")),
        query=stored_query,
        language=lang.get("code"),
        label=cx.get("label"),
        alpha=_float(cx.get("alpha")),
        route_label=cx.get("route_label"),
        route_alpha=_float(cx.get("route_alpha")),
        strategy=str(trace.get("strategy", "")),
        retrievers=list(dict.fromkeys(str(r.get("name", "")) for r in runs)),
        retriever_calls=int(trace.get("retriever_calls", len(runs))),
        escalations=len(trace.get("escalations") or []),
        corrective_action=corrective.get("action"),
        abstained=bool(data.get("abstained")),
        answer=text(str(data.get("answer", ""))) if config.store_answers else None,
        citations=[str(c) for c in data.get("citations") or []],
        generator=gen.get("name"),
        confidence=_float(gen.get("confidence")),
        total_ms=_float(timings.get("total")),
        timings=redactor.value(timings),
        signals=redactor.value(_signals(trace, query, len(stored_query) < len(redacted_query))),
        audit=redactor.value(audit) if audit is not None else None,
        flagged=flagged,
    )
