"""Schema-driven fuzzing of the HTTP API (issue 39): Schemathesis generates requests for every operation of
`amsrag serve`'s OpenAPI document and sends them to the app over a private copy of the slice index; no
response may be a 5xx. Bounded by `max_examples` a operation to stay under ~30 s."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from amsrag.config import ServeConfig
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from test_serve_api import copy_index

EXAMPLES = 8  # a operation


@pytest.fixture(scope="module")
def api_schema(built_index, tmp_path_factory):
    index_dir = copy_index(built_index, tmp_path_factory.mktemp("fuzz") / "index")
    # keyless on loopback; any Host so the ASGI client's "testserver" reaches the endpoints, not the host check
    service = Service(Engine.open(index_dir), ServeConfig(allowed_hosts=["*"], job_threshold=4))
    yield schemathesis.openapi.from_asgi("/openapi.json", create_app(service))
    service.close()


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case) -> None:
    response = case.call()
    assert response.status_code < 500, (f"{case.method} {case.formatted_path}: {response.status_code} "
                                        f"{response.text[:500]}")
