"""External sources (DESIGN §6): any JSON search API (`HttpRetriever`) and other amsrag servers
(`RemoteRetriever`, POST /v1/retrieve), run concurrently by `ExternalSources` under a strict per-call
timeout and a total budget, with a circuit breaker per source.

What comes back is untrusted: HTML is stripped (script / style content dropped), instruction-like text
("ignore previous instructions", "you are now", "system prompt", chat-template markers...) is replaced
by a marker and flagged, and results whose URL is outside the source's domain allowlist are dropped and
flagged. A source that times out yields an explicit empty result with error "timeout" (the caller turns
it into "insufficient evidence"); nothing here waits past the budget.
"""
from amsrag.retrieve.external.fanout import CircuitBreaker, ExternalSources
from amsrag.retrieve.external.sanitise import INJECTION_MARK, domain_allowed, neutralise, strip_html
from amsrag.retrieve.external.sources import (
    MAX_RESPONSE_BYTES,
    ExternalPassage,
    ExternalResult,
    ExternalRetriever,
    HttpRetriever,
    RemoteRetriever,
    SourceError,
    json_path,
    make_retriever,
)

__all__ = [
    "INJECTION_MARK",
    "MAX_RESPONSE_BYTES",
    "CircuitBreaker",
    "ExternalPassage",
    "ExternalResult",
    "ExternalRetriever",
    "ExternalSources",
    "HttpRetriever",
    "RemoteRetriever",
    "SourceError",
    "domain_allowed",
    "json_path",
    "make_retriever",
    "neutralise",
    "strip_html",
]
