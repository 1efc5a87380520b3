"""The sections of the sources beside the passages: tables (the structured route), corpus themes (the global
route) and external search sources."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from amsrag.config.base import Section


class TablesConfig(Section):
    """Tables as a source and the structured route (vectorless: a semantic parser writes guarded SQL)."""

    enabled: bool = True
    parser: str = Field("", description="semantic parser artifact directory; empty = the one shipped in amsrag")
    search_k: int = Field(3, ge=1, le=20, description="tables the parser tries, best table match first")
    min_confidence: float = Field(
        0.2, ge=0, le=1, description="a table answer below this calibrated confidence falls back to the text path")
    timeout_s: float = Field(2.0, gt=0, le=60, description="time budget of one SQL statement")
    row_limit: int = Field(1000, ge=1, le=100_000, description="rows one statement may return")
    max_rows: int = Field(1_000_000, ge=1, description="larger tables are refused at ingest")


class ThemeConfig(Section):
    """Corpus-level themes of the global route: k-means over the passage vectors, c-TF-IDF labels."""

    enabled: bool = True
    k: int = Field(0, ge=0, le=4096, description="number of themes; 0 chooses it (silhouette on a sample)")
    max_k: int = Field(64, ge=2, le=4096, description="upper bound of the automatic choice")
    min_passages: int = Field(40, ge=2, description="below this many passages a corpus has no themes")
    label_terms: int = Field(8, ge=1, le=64, description="c-TF-IDF terms that label a theme")
    representatives: int = Field(3, ge=1, le=64, description="passages closest to a theme's centroid that it cites")
    seed: int = 13
    rebuild_growth: float = Field(
        0.5, gt=0, description="an update flags a rebuild once the corpus grew by this share since the last build"
    )
    drift_tolerance: float = Field(
        0.25, gt=0,
        description="an update flags a rebuild once the added passages' mean cosine distance to their centroids "
        "exceeds the build's by this share",
    )
    search_k: int = Field(5, ge=1, le=64, description="themes the global route selects at most for a question "
                          "about one subject")


class ExternalSourceConfig(Section):
    """One external source: an `http` JSON search API or another amsrag server (`remote`, POST /v1/retrieve).

    http: `params` (GET query) or `body` (POST JSON) are templates whose string values may hold
    {query} and {k}; `results_path` is a dotted path to the result list in the response ("" = the
    response itself); `title_field` / `text_field` / `url_field` / `id_field` / `score_field` are
    dotted paths inside one result.
    """

    name: str = Field(..., min_length=1, max_length=64)
    kind: Literal["http", "remote"] = "http"
    url: str = Field(..., min_length=8, description="http(s) URL; for remote the server root or its /v1/retrieve")
    method: Literal["GET", "POST"] = "GET"
    params: dict[str, str] = Field(default_factory=lambda: {"q": "{query}", "n": "{k}"})
    body: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    api_key_env: str = Field("", description="environment variable with a bearer token (may be unset)")
    results_path: str = "results"
    title_field: str = "title"
    text_field: str = "text"
    url_field: str = "url"
    id_field: str = "id"
    score_field: str = "score"
    system: str = Field("full", description="remote: the system the other server runs")
    k: int = Field(5, ge=1, le=100)
    timeout_s: float = Field(0.6, gt=0, le=60, description="per-call timeout")
    allowed_domains: list[str] = Field(
        default_factory=list, description="result URLs must be on these domains (or subdomains); empty: no check")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {value!r}")
        return value


class ExternalConfig(Section):
    """External sources (DESIGN §6): run concurrently under a total budget with a circuit breaker."""

    sources: list[ExternalSourceConfig] = Field(default_factory=list)
    budget_ms: float = Field(800.0, gt=0, le=60_000, description="total wall-clock budget for all sources")
    breaker_failures: int = Field(3, ge=1, le=100, description="consecutive failures that open a source's breaker")
    breaker_cooldown_s: float = Field(30.0, gt=0, description="an open breaker skips its source this long")
    max_text_chars: int = Field(4000, ge=100, description="longer result texts are cut")
    neutralise_instructions: bool = True
