"""Property-based testing of the API against its own OpenAPI schema (schemathesis).

Every operation gets generated requests, valid and invalid; every response must be a
documented status code with a body that matches the schema, and never a 5xx. Writes carry
a valid token so that they reach validation, not just the 401. Bounded: a fixed number of
examples per operation, derandomised, so the run is the same every time.
"""

from __future__ import annotations

import pytest

from tests.optional import require

schemathesis = require("schemathesis")  # skipped (or, in CI, failed) without it

from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ktune.server import Settings, create_app
from ktune.testing.recordings import CONV
from tests.server.client import AUTH, TOKEN, finished, make_client, submit, wait_until

pytestmark = pytest.mark.both_databases  # fuzzed API writes meet each backend's types and limits

EXAMPLES = 25
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def test_api_conforms_to_its_schema(db_url: str) -> None:
    # A log with a finished job, so that reads of jobs, trials and best configs find data.
    for client in make_client(db_url):
        wait_until(client, submit(client, space=CONV, budget={"trials": 5})["id"], finished)
    app = create_app(Settings.load(database_url=db_url, api_tokens=TOKEN, runner_concurrency=0))
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = []
        for result in schema.get_all_operations():
            # Each result is Ok(operation) or Err(InvalidSchema); an Err has no .ok().
            assert isinstance(result, Ok), result.err()
            operations.append(result.ok())
        assert len(operations) >= 9
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(headers=AUTH, checks=CHECKS)

            try:
                check()
            except Exception as exc:  # noqa: BLE001 - any failure: name the operation
                pytest.fail(f"{operation.label}: {exc}")
    finally:
        app.state.tlog.close()
