"""The HTTP API fuzzed from its own OpenAPI document (schemathesis strategies driven by hypothesis): no
answer is a server error, for an administrator and for a tenant member, on the app wired to in-memory
fakes. Every documented operation is exercised with a bounded number of examples."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import APIOperation
from schemathesis.core.result import Ok

from schemas.config import RecurringJobDefined
from tests.gateway.builders import auth, feed, harness, recurring_job, status_changed

EXAMPLES_PER_OPERATION = 40
FUZZ = settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def api_schema() -> schemathesis.BaseSchema:
    """The gateway's schema as it serves it, with a job and a recurring job of each tenant to find."""
    gw = harness()
    for tenant in ("team-a", "team-b"):
        feed(gw.ctx.status, status_changed(f"train-{tenant}", tenant=tenant, queue=tenant, state="pending"))
        feed(gw.ctx.config, RecurringJobDefined(item=recurring_job("nightly", tenant=tenant, queue=tenant)))
    gw.ctx.dashboard.hub.close()  # a live stream (/v1/stream) then ends after its first event
    return schemathesis.openapi.from_asgi("/openapi.json", gw.app)


@pytest.mark.parametrize("user", ["root", "alice"], ids=["administrator", "member"])
def test_no_server_error_on_any_operation(user: str) -> None:
    schema = api_schema()
    answers: Counter[tuple[str, int]] = Counter()
    operations: list[APIOperation[Any, Any, Any, Any]] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the gateway's own schema does not load: {result}"
        operations.append(result.ok())
    for operation in operations:
        @FUZZ
        @given(case=operation.as_strategy())
        def call(case: schemathesis.Case[Any]) -> None:
            response = case.call(headers=auth(user))
            answers[(f"{case.method} {case.path}", response.status_code)] += 1
            assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text)

        call()
    assert {f"{op.method.upper()} {op.path}" for op in operations} == {name for name, _ in answers}
    assert len(operations) >= 24 and sum(answers.values()) >= 10 * len(operations)
