"""Jobs land only in their tenant's namespace, on the running system: the admission names the namespace
configured for the tenant (never the tenant's name or one a submitter picks), and the dispatcher creates
the Job there. A queue that allows privileged pods gets them rendered; others are refused at the door."""

from __future__ import annotations

import pytest

from schemas.decisions import JobAdmitted
from schemas.runs import JobDispatched
from tests.e2e.builders import job_spec, member_token
from tests.e2e.system import System
from tests.hostile.builders import PRIVILEGED_QUEUE, namespace_of

pytestmark = pytest.mark.e2e


async def test_each_tenants_jobs_land_in_its_namespace_only(system: System) -> None:
    cluster = system.first_cluster()
    jobs = {tenant: await system.api.submit(job_spec(f"ns-{tenant}", queue=tenant, duration_s=0.3), tenant=tenant)
            for tenant in ("team-a", "team-b")}
    for tenant, job_id in jobs.items():
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"
        [admitted] = system.log.messages(JobAdmitted, job_id=job_id)
        assert admitted.namespace == namespace_of(tenant)
        assert {d.namespace for d in system.log.messages(JobDispatched, job_id=job_id)} == {namespace_of(tenant)}
        placed = await cluster.jobs(job_id)
        assert placed and {j["metadata"]["namespace"] for j in placed} == {namespace_of(tenant)}
        assert {p["metadata"]["namespace"] for p in await cluster.pods(job_id)} == {namespace_of(tenant)}
        assert await cluster.jobs(job_id, namespace=tenant) == []


async def test_elevated_pods_run_only_on_a_queue_that_allows_them(system: System) -> None:
    elevated = job_spec("ops", queue=PRIVILEGED_QUEUE, duration_s=0.3)
    elevated["template"]["security"] = {"privileged": True, "host_network": True,
                                        "host_path_volumes": ["/dev/infiniband"]}
    headers = {"Authorization": f"Bearer {member_token('team-a')}"}
    refused = await system.api.http.post("/v1/jobs", json={**elevated, "queue": "team-a"}, headers=headers)
    assert (refused.status_code, refused.json()["error"]) == (403, "privileged_not_allowed")

    job_id = await system.api.submit(elevated)
    assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"
    [job] = await system.first_cluster().jobs(job_id, namespace=namespace_of("team-a"))
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"] == {"privileged": True}
    assert pod["hostNetwork"] is True and "hostPID" not in pod
    assert [v["hostPath"]["path"] for v in pod["volumes"]] == ["/dev/infiniband"]
