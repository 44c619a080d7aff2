"""Who may submit non-preemptible work is configuration (the tenant's ``allow_non_preemptible``), not the
submitter's choice: 403 naming the rule at submission, on the kube-native path and on a priority change."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from schemas.config import MusterConfig, PriorityClassConfig, TenantConfig
from schemas.intents import ChangePriority, SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.gateway.kube_jobs import NotSubmittable, submission_from_job
from tests.gateway.builders import Harness, auth, feed, harness, muster_config, spec_json, status_changed


def config() -> MusterConfig:
    """team-b may run non-preemptible work; team-a may not."""
    base = muster_config()
    return base.model_copy(update={
        "priority_classes": [*base.priority_classes,
                             PriorityClassConfig(name="inference", value=10_000, preemptible=False)],
        "tenants": [TenantConfig(name="team-a", namespace="team-a"),
                    TenantConfig(name="team-b", namespace="team-b", allow_non_preemptible=True)],
    })


@pytest.fixture
def gw() -> Harness:
    return harness(config())


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"priority_class": "inference"}, "spec.priority_class",
     "priority class 'inference' is not preemptible and tenant 'team-a' may not run non-preemptible work "
     "(tenant setting allow_non_preemptible)"),
    ({"preemptible": False}, "spec.preemptible",
     "preemptible: false is not allowed: tenant 'team-a' may not run non-preemptible work "
     "(tenant setting allow_non_preemptible)"),
])
async def test_non_preemptible_work_from_a_tenant_not_allowed_is_403(
    client: httpx.AsyncClient, gw: Harness, changes: dict[str, object], field: str, message: str
) -> None:
    r = await client.post("/v1/jobs", json=spec_json(**changes), headers=auth("alice"))
    assert r.status_code == 403
    body = r.json()
    assert (body["error"], body["field"], body["detail"]) == ("non_preemptible_not_allowed", field, message)
    assert gw.publisher.on(INTENTS_TOPIC) == []
    allowed = await client.post("/v1/jobs", json=spec_json(queue="team-b", **changes), headers=auth("bob"))
    assert allowed.status_code == 202
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.tenant == "team-b"


async def test_changing_to_a_non_preemptible_class_follows_the_same_rule(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    feed(gw.ctx.status, status_changed("j1"))
    r = await client.patch("/v1/jobs/j1", json={"priority_class": "inference"}, headers=auth("alice"))
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (403, "non_preemptible_not_allowed",
                                                                     "patch.priority_class")
    high = await client.patch("/v1/jobs/j1", json={"priority_class": "high"}, headers=auth("alice"))
    assert high.status_code == 202
    feed(gw.ctx.status, status_changed("j2", tenant="team-b", queue="team-b"))
    ok = await client.patch("/v1/jobs/j2", json={"priority_class": "inference"}, headers=auth("bob"))
    assert ok.status_code == 202
    assert [m.priority_class for m in gw.publisher.on(INTENTS_TOPIC) if isinstance(m, ChangePriority)] == [
        "high", "inference"]


def test_a_kube_native_job_asking_for_non_preemptible_work_is_not_submitted(gw: Harness) -> None:
    obj = {
        "metadata": {"name": "serve", "namespace": "team-a", "labels": {"muster.dev/queue": "team-a"},
                     "annotations": {"muster.dev/preemptible": "false"}},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1,
                 "template": {"spec": {"containers": [{"name": "c", "image": "registry.example/serve:1"}]}}},
    }
    with pytest.raises(NotSubmittable, match=r"spec\.preemptible: preemptible: false is not allowed"):
        submission_from_job(obj, gw.ctx.config, datetime.now(UTC))


@pytest.mark.parametrize("changes", [{"preemptible": False}, {"priority_class": "inference"}])
async def test_non_preemptible_work_larger_than_its_queues_nominal_quota_is_refused_at_the_door(
    client: httpx.AsyncClient, gw: Harness, changes: dict[str, object]
) -> None:
    """team-b's queue has 16 a100 of nominal quota (and may borrow 8, which such work never does): 5 pods of 4
    GPUs would wait for ever; 4 pods fit; an elastic job is judged at its minimum; allow_future_capacity
    queues it anyway; preemptible work may borrow and is accepted."""
    too_big = await client.post("/v1/jobs", json=spec_json(queue="team-b", replicas=5, **changes),
                                headers=auth("bob"))
    assert too_big.status_code == 422
    body = too_big.json()
    assert (body["error"], body["field"]) == ("exceeds_nominal_quota", "spec.replicas")
    assert "queue 'team-b' has 16 a100 GPUs where the job needs 20" in body["detail"]
    assert gw.publisher.on(INTENTS_TOPIC) == []
    for accepted in ({"replicas": 4}, {"replicas": 5, "min_replicas": 4}, {"replicas": 5,
                                                                           "allow_future_capacity": True}):
        r = await client.post("/v1/jobs", json=spec_json(name=f"ok-{len(gw.publisher.on(INTENTS_TOPIC))}",
                                                         queue="team-b", **accepted, **changes),
                              headers=auth("bob"))
        assert r.status_code == 202, (accepted, r.json())
    preemptible = await client.post("/v1/jobs", json=spec_json(name="borrows", queue="team-b", replicas=6),
                                    headers=auth("bob"))
    assert preemptible.status_code == 202
