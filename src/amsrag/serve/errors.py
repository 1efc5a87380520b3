"""The HTTP service's error responses as its OpenAPI document lists them (the error itself, and the body every
failure leaves the server as: `amsrag.access.errors`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(description="a stable machine-readable code, e.g. `invalid_input`, `not_found`, `overloaded`")
    message: str = Field(description="what went wrong, for a person")


class ErrorOut(BaseModel):
    """Every error response's body."""

    error: ErrorDetail


def _documented(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


# What any endpoint may answer besides its success (the OpenAPI document lists them for every operation).
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _documented("invalid input (a malformed filter, an empty batch, a bad id), or a Host not served here"),
    401: _documented("a missing or invalid API key (when the server has keys)"),
    404: _documented("no such passage, document, job, review item or model"),
    413: _documented("the request body is larger than `serve.max_body_mb`"),
    422: _documented("the request does not match the schema, or the question is empty or too long"),
    429: _documented("the server is at its concurrency limit: retry later"),
    500: _documented("the server failed (the index is damaged, or a bug): see its log"),
    503: _documented("the index is busy with another writer: retry after `Retry-After` seconds"),
    504: _documented("the request did not finish within `serve.request_timeout_s`"),
}
REVIEW_ERRORS: dict[int | str, dict[str, Any]] = {
    403: _documented("reviews need an API key when the server listens off loopback"),
}
