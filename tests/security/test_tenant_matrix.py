"""The tenant-isolation matrix in one table: a member of team-a against everything of team-b, and a member
against the configuration. Another tenant's job or recurring job answers 404 (its existence is not
revealed, as the API description says); naming another tenant's queue or tenant answers 403; configuration
changes answer 403 ``admin_required``. No cell publishes anything.

The tenant administrator of team-a (role ``tenant-admin``) has the member's cells, and changes team-a's
queues within team-a's ``queue_quota`` and ``queue_cohorts``; anything else of the configuration, or
another tenant's queue, answers 403, and more quota than the tenant's answers 422."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from schemas.config import (
    CohortConfig,
    MusterConfig,
    QueueConfig,
    RecurringJobDefined,
    ResourceQuotaConfig,
    TenantConfig,
)
from tests.gateway.builders import (
    Harness,
    auth,
    feed,
    harness,
    muster_config,
    recurring_job,
    spec_json,
    status_changed,
)

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


# ---------------------------------------------------------------- the tenant administrator (role tenant-admin)

def _tenant_admin_config() -> MusterConfig:
    """The test configuration, team-a with 24 A100s for its queues (team-a already takes 16) and the cohort
    research allowed; team-b with an idle queue, an unused tenant team-c, and a cohort team-a may not use."""
    base = muster_config()
    a100 = {"gpu:a100": ResourceQuotaConfig(nominal=16, borrowing_limit=8)}
    return base.model_copy(update={
        "cohorts": [*base.cohorts, CohortConfig(name="shared")],
        "queues": [*base.queues, QueueConfig(name="team-b-idle", tenant="team-b", quotas=a100)],
        "tenants": [TenantConfig(name="team-a", namespace="team-a", queue_quota={"gpu:a100": 24},
                                 queue_cohorts=["research"]),
                    TenantConfig(name="team-b", namespace="team-b", queue_quota={"gpu:a100": 64}),
                    TenantConfig(name="team-c", namespace="team-c")],
    })


def _queue(name: str, tenant: str = "team-a", nominal: int = 0, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "tenant": tenant, **fields}
    if nominal:
        body["quotas"] = {"gpu:a100": {"nominal": nominal}}
    return body


#: (cell, method, path, body, expected status, expected error code or None when allowed)
TENANT_ADMIN_MATRIX: list[tuple[str, str, str, dict[str, Any] | None, int, str | None]] = [
    # allowed: its own tenant's queues, within the tenant's quota and allowed cohorts
    ("create a queue of a", "PUT", "/v1/config/queues/team-a-dev", _queue("team-a-dev", nominal=8), 202, None),
    ("create a queue of a in an allowed cohort", "PUT", "/v1/config/queues/team-a-dev",
     _queue("team-a-dev", nominal=4, cohort="research"), 202, None),
    ("lower a's queue", "PUT", "/v1/config/queues/team-a",
     _queue("team-a", nominal=8, cohort="research"), 202, None),
    ("take a's queue out of its cohort", "PUT", "/v1/config/queues/team-a", _queue("team-a", nominal=16), 202, None),
    ("keep a privileged queue privileged", "PUT", "/v1/config/queues/team-a-ops",
     _queue("team-a-ops", allow_privileged=True, user_limit_gpus=4), 202, None),
    ("delete a's idle queue", "DELETE", "/v1/config/queues/team-a-ops", None, 202, None),
    ("submit to a's queue", "POST", "/v1/jobs", spec_json(queue="team-a"), 202, None),
    ("read the configuration", "GET", "/v1/config", None, 200, None),
    # forbidden: another tenant's queues
    ("create a queue of b", "PUT", "/v1/config/queues/team-b-new", _queue("team-b-new", "team-b"), 403,
     "other_tenant"),
    ("change b's queue", "PUT", "/v1/config/queues/team-b-idle", _queue("team-b-idle", "team-b", nominal=1), 403,
     "other_tenant"),
    ("move b's queue to a", "PUT", "/v1/config/queues/team-b-idle", _queue("team-b-idle"), 403, "other_tenant"),
    ("move a's queue to b", "PUT", "/v1/config/queues/team-a-ops",
     _queue("team-a-ops", "team-b", allow_privileged=True), 403, "other_tenant"),
    ("delete b's queue", "DELETE", "/v1/config/queues/team-b-idle", None, 403, "other_tenant"),
    ("submit to b's queue", "POST", "/v1/jobs", spec_json(queue="team-b"), 403, "forbidden"),
    ("read b's job", "GET", f"/v1/jobs/{JOB_OF_B}", None, 404, "not_found"),
    ("cancel b's job", "POST", f"/v1/jobs/{JOB_OF_B}/cancel", {"reason": "x"}, 404, "not_found"),
    ("read b's queue", "GET", "/v1/queues/team-b", None, 404, "not_found"),
    # forbidden: more than the tenant's quota, and what an administrator decides
    ("exceed a's quota", "PUT", "/v1/config/queues/team-a-dev", _queue("team-a-dev", nominal=9), 422,
     "tenant_quota_exceeded"),
    ("raise a's queue over a's quota", "PUT", "/v1/config/queues/team-a",
     _queue("team-a", nominal=25, cohort="research"), 422, "tenant_quota_exceeded"),
    ("a resource a has no quota of", "PUT", "/v1/config/queues/team-a-dev",
     {"name": "team-a-dev", "tenant": "team-a", "quotas": {"gpu:h100": {"nominal": 1}}}, 422,
     "tenant_quota_exceeded"),
    ("a cohort a may not use", "PUT", "/v1/config/queues/team-a-dev", _queue("team-a-dev", cohort="shared"), 403,
     "cohort_not_allowed"),
    ("make a queue privileged", "PUT", "/v1/config/queues/team-a-dev", _queue("team-a-dev", allow_privileged=True),
     403, "reserved_field"),
    ("raise a queue's fair-share weight", "PUT", "/v1/config/queues/team-a",
     _queue("team-a", nominal=16, cohort="research", weight=10), 403, "reserved_field"),
    ("move a queue to a pool", "PUT", "/v1/config/queues/team-a-dev", _queue("team-a-dev", pool="default"), 403,
     "reserved_field"),
    # forbidden: every other kind of configuration
    ("raise a's own quota", "PUT", "/v1/config/tenants/team-a",
     {"name": "team-a", "namespace": "team-a", "queue_quota": {"gpu:a100": 1000}}, 403, "admin_required"),
    ("allow a cohort to a", "PUT", "/v1/config/tenants/team-a",
     {"name": "team-a", "namespace": "team-a", "queue_quota": {"gpu:a100": 24}, "queue_cohorts": ["shared"]},
     403, "admin_required"),
    ("define a cohort", "PUT", "/v1/config/cohorts/c2", {"name": "c2"}, 403, "admin_required"),
    ("define a priority class", "PUT", "/v1/config/priority-classes/top", {"name": "top", "value": 10**6}, 403,
     "admin_required"),
    ("define a gpu type", "PUT", "/v1/config/gpu-types/h100", {"name": "h100"}, 403, "admin_required"),
    ("define a pool", "PUT", "/v1/config/pools/p1", {"name": "p1"}, 403, "admin_required"),
    ("delete a cohort", "DELETE", "/v1/config/cohorts/shared", None, 403, "admin_required"),
    ("delete a priority class", "DELETE", "/v1/config/priority-classes/high", None, 403, "admin_required"),
    ("delete a tenant", "DELETE", "/v1/config/tenants/team-c", None, 403, "admin_required"),
]


@pytest.mark.parametrize(("cell", "method", "path", "body", "status", "error"), TENANT_ADMIN_MATRIX,
                         ids=[row[0] for row in TENANT_ADMIN_MATRIX])
async def test_tenant_admin_of_a(cell: str, method: str, path: str, body: dict[str, Any] | None, status: int,
                                 error: str | None) -> None:
    gw = _with_team_b(harness(_tenant_admin_config()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as client:
        answer = await client.request(method, path, json=body, headers=auth("tara"))
        assert answer.status_code == status, (cell, answer.text)
        if error is not None:
            assert answer.json()["error"] == error, answer.text
            assert gw.publisher.sent == []
            # an administrator may do it: the cell tests the role, not the request's validity
            allowed = await client.request(method, path, json=body, headers=auth("root"))
            assert allowed.status_code < 300, (cell, allowed.text)
        elif method != "GET":
            assert len(gw.publisher.sent) == 1


@pytest.mark.parametrize(("cell", "method", "path", "body", "status"),
                         [row[:5] for row in TENANT_ADMIN_MATRIX if row[5] is None and row[1] != "GET"],
                         ids=[row[0] for row in TENANT_ADMIN_MATRIX if row[5] is None and row[1] != "GET"])
async def test_what_a_tenant_admin_may_do_a_member_may_not(cell: str, method: str, path: str,
                                                           body: dict[str, Any] | None, status: int) -> None:
    gw = _with_team_b(harness(_tenant_admin_config()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as client:
        answer = await client.request(method, path, json=body, headers=auth("alice"))
    if path.startswith("/v1/config/"):
        assert (answer.status_code, answer.json()["error"]) == (403, "admin_required"), (cell, answer.text)
        assert gw.publisher.sent == []
    else:
        assert answer.status_code == status, (cell, answer.text)
