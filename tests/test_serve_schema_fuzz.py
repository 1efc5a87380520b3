"""Schema-driven fuzzing of the HTTP API (issue 39): Schemathesis generates requests for every operation of
`amsrag serve`'s OpenAPI document — valid ones (positive mode: they reach the engine, not only the validator)
and invalid ones (negative mode) — and sends them to the app over a private copy of the slice index (embedded,
and in a PostgreSQL database of its own); no
response may be a 5xx, and every response must be one the document describes: its status code listed for the
operation, its content type, and its body valid against the listed schema (errors included: one `ErrorOut`
shape). Bounded by `EXAMPLES` a operation and mode to stay under ~60 s a backend, and by `BUDGET_S`.

Hypothesis drives the strategies directly rather than through Schemathesis' pytest plugin, which reaches into
pytest internals that pytest 9.2 removed."""

from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from amsrag.config import ServeConfig
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from test_serve_api import copy_index

EXAMPLES = 8  # a operation and mode
BUDGET_S = 90.0  # past this many seconds of a backend's run, one example a operation and mode (each still probed)
BACKENDS = ["embedded", "postgres"]  # the service over an embedded index, and over PostgreSQL
CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module", params=BACKENDS)
def api_schema(request, built_index, tmp_path_factory):
    if request.param == "postgres":  # a private database holding a copy of the slice index
        from amsrag.store.open import export_index
        from pg_server import new_database

        index: str = new_database(request.getfixturevalue("pg_server"))
        export_index(built_index, index)
    else:
        index = str(copy_index(built_index, tmp_path_factory.mktemp("fuzz") / "index"))
    # keyless on loopback; any Host so the ASGI client's "testserver" reaches the endpoints, not the host check
    service = Service(Engine.open(index), ServeConfig(allowed_hosts=["*"], job_threshold=4))
    yield schemathesis.openapi.from_asgi("/openapi.json", create_app(service))
    service.close()


def _server_errors(operation, mode: GenerationMode, examples: int = EXAMPLES) -> list[str] | None:
    """The 5xx responses to generated requests and the responses the OpenAPI document does not describe; None
    when the mode has nothing to generate (an operation without parameters has no invalid request)."""
    errors: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def probe(case) -> None:
        response = case.call()
        if len(errors) >= 3:
            return
        if response.status_code >= 500:
            errors.append(f"{mode.value} {case.method} {case.formatted_path}: {response.status_code} "
                          f"{response.text[:300]}")
            return
        try:
            case.validate_response(response, checks=CONFORMANCE)
        except Exception as exc:  # Schemathesis' failure group: the first lines name the check and the response
            errors.append(f"{mode.value} {case.method} {case.formatted_path}: not as documented: {str(exc)[:400]}")

    try:
        probe()
    except Unsatisfiable:
        return None
    return errors


@pytest.mark.slow
def test_no_request_gets_a_server_error_or_an_undocumented_response(api_schema) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10, "the OpenAPI document lists fewer operations than the service has"
    failures: list[str] = []
    probed: set[GenerationMode] = set()
    started = time.monotonic()
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            errors = _server_errors(operation, mode, EXAMPLES if time.monotonic() - started < BUDGET_S else 1)
            if errors is not None:
                probed.add(mode)
                failures += errors
    assert probed == {GenerationMode.POSITIVE, GenerationMode.NEGATIVE}
    assert not failures, "\n".join(failures)
