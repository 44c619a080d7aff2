"""The tenant-isolation matrix in one table: a member of team-a against everything of team-b, and a member
against the configuration. Another tenant's job or recurring job answers 404 (its existence is not
revealed, as the API description says); naming another tenant's queue or tenant answers 403; configuration
changes answer 403 ``admin_required``. No cell publishes anything."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from schemas.config import RecurringJobDefined
from tests.gateway.builders import Harness, auth, feed, harness, recurring_job, spec_json, status_changed

JOB_OF_B = "train-of-b"
RECURRING_OF_B = "team-b.nightly"

#: (cell, method, path, body, query, expected status, expected error code)
MATRIX: list[tuple[str, str, str, dict[str, Any] | None, dict[str, str] | None, int, str]] = [
    ("submit to b's queue", "POST", "/v1/jobs", spec_json(queue="team-b"), None, 403, "forbidden"),
    ("read b's job", "GET", f"/v1/jobs/{JOB_OF_B}", None, None, 404, "not_found"),
    ("explain b's job", "GET", f"/v1/jobs/{JOB_OF_B}/explain", None, None, 404, "not_found"),
    ("read b's job's events", "GET", f"/v1/jobs/{JOB_OF_B}/events", None, None, 404, "not_found"),
    ("list b's jobs", "GET", "/v1/jobs", None, {"tenant": "team-b"}, 403, "forbidden"),
    ("cancel b's job", "POST", f"/v1/jobs/{JOB_OF_B}/cancel", {"reason": "x"}, None, 404, "not_found"),
    ("suspend b's job", "POST", f"/v1/jobs/{JOB_OF_B}/suspend", None, None, 404, "not_found"),
    ("resume b's job", "POST", f"/v1/jobs/{JOB_OF_B}/resume", None, None, 404, "not_found"),
    ("re-prioritise b's job", "PATCH", f"/v1/jobs/{JOB_OF_B}", {"priority_class": "high"}, None, 404, "not_found"),
    ("scale b's job", "POST", f"/v1/jobs/{JOB_OF_B}/scale", {"replicas": 1}, None, 404, "not_found"),
    ("read b's queue", "GET", "/v1/queues/team-b", None, None, 404, "not_found"),
    ("define recurring on b's queue", "POST", "/v1/jobs", spec_json("nightly", queue="team-b",
                                                                    schedule="0 2 * * *"), None, 403, "forbidden"),
    ("read b's recurring job", "GET", f"/v1/recurring/{RECURRING_OF_B}", None, None, 404, "not_found"),
    ("list b's recurring jobs", "GET", "/v1/recurring", None, {"tenant": "team-b"}, 403, "forbidden"),
    ("suspend b's recurring job", "POST", f"/v1/recurring/{RECURRING_OF_B}/suspend", None, None, 404,
     "not_found"),
    ("resume b's recurring job", "POST", f"/v1/recurring/{RECURRING_OF_B}/resume", None, None, 404, "not_found"),
    ("delete b's recurring job", "DELETE", f"/v1/recurring/{RECURRING_OF_B}", None, None, 404, "not_found"),
    ("define a queue", "PUT", "/v1/config/queues/team-a",
     {"name": "team-a", "tenant": "team-a", "allow_privileged": True}, None, 403, "admin_required"),
    ("move b's queue to a", "PUT", "/v1/config/queues/team-b", {"name": "team-b", "tenant": "team-a"}, None, 403,
     "admin_required"),
    ("define a cohort", "PUT", "/v1/config/cohorts/c2", {"name": "c2"}, None, 403, "admin_required"),
    ("define a priority class", "PUT", "/v1/config/priority-classes/top", {"name": "top", "value": 10**6}, None,
     403, "admin_required"),
    ("change a tenant's namespace", "PUT", "/v1/config/tenants/team-a",
     {"name": "team-a", "namespace": "kube-system"}, None, 403, "admin_required"),
    ("define a gpu type", "PUT", "/v1/config/gpu-types/h100", {"name": "h100"}, None, 403, "admin_required"),
    ("define a pool", "PUT", "/v1/config/pools/p1", {"name": "p1"}, None, 403, "admin_required"),
    # team-b's queue holds b's pending job and recurring job, so an administrator could not delete it either
    # (409): a member is refused any queue's deletion, its own tenant's idle one included
    ("delete a queue", "DELETE", "/v1/config/queues/team-a-ops", None, None, 403, "admin_required"),
    ("delete a priority class", "DELETE", "/v1/config/priority-classes/high", None, None, 403, "admin_required"),
]


def _with_team_b(gw: Harness) -> Harness:
    feed(gw.ctx.status, status_changed(JOB_OF_B, tenant="team-b", queue="team-b", state="pending"))
    feed(gw.ctx.config, RecurringJobDefined(item=recurring_job("nightly", "0 2 * * *", tenant="team-b",
                                                               queue="team-b")))
    return gw


@pytest.mark.parametrize(("cell", "method", "path", "body", "query", "status", "error"), MATRIX,
                         ids=[row[0] for row in MATRIX])
async def test_member_of_a_against_team_b_and_configuration(cell: str, method: str, path: str,
                                                            body: dict[str, Any] | None, query: dict[str, str] | None,
                                                            status: int, error: str) -> None:
    gw = _with_team_b(harness())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as client:
        denied = await client.request(method, path, json=body, params=query, headers=auth("alice"))
        assert (denied.status_code, denied.json()["error"]) == (status, error), denied.text
        assert gw.publisher.sent == []
        # the same request is allowed to the owner or an administrator: the cell tests tenancy, not validity
        owner = "root" if error == "admin_required" else "bob"
        allowed = await client.request(method, path, json=body, params=query, headers=auth(owner))
    assert allowed.status_code < 300, (cell, owner, allowed.text)
