"""Submissions that are valid on the wire but ask for dangerous things, written straight onto the intents
topic as an external pipeline would: each is rejected or handled safely, and the system keeps working."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from schemas.decisions import JobAdmitted, JobRejected
from schemas.status import JobStatusChanged
from schemas.topics import INTENTS_TOPIC
from tests.e2e.builders import job_spec
from tests.e2e.system import System
from tests.hostile.builders import assert_all_running, run_valid_job, submit_envelope
from tests.hostile.kafka import produce
from tests.hostile.records import HostileRecord

pytestmark = pytest.mark.e2e

# any text a process environment can hold: a NUL byte cannot, and is refused (the spec's schema; dead letter)
UNICODE = "\u202e\U0001f680 \u4e2d\u6587 \u0645\u0631\u062d\u0628\u0627 \ufeff"

TEN_YEARS = 10 * 366 * 86400  # the largest deadline the schema accepts


def _spec(name: str, **changes: Any) -> dict[str, Any]:
    spec = job_spec(name, gpus=1, duration_s=0.3)
    for key, value in changes.items():
        target = spec
        *path, last = key.split("__")
        for part in path:
            target = target[part]
        target[last] = value
    return spec


#: case -> (spec, submitting tenant, the outcome: a rejection reason, or a state the job must reach)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "huge_gang": (_spec("huge-gang", replicas=4096, template__resources__gpus=64), "team-a", "pending"),
    "huge_cpu_and_memory": (_spec("huge-res", template__resources__cpu="9" * 32,
                                  template__resources__memory="9" * 30 + "Ti"), "team-a", "pending"),
    "absurd_deadlines": (_spec("absurd-deadlines", max_runtime_s=TEN_YEARS, max_wait_s=TEN_YEARS),
                         "team-a", "succeeded"),
    "long_strings": (_spec("long-strings", template__env={f"V{i}": "\u00e9" * 32768 for i in range(8)},
                           template__args=["a" * 4096] * 64,
                           template__working_dir="/" + "d" * 4095), "team-a", "succeeded"),
    "unicode": (_spec("unicode", template__env={"GREETING": UNICODE}, template__args=[UNICODE],
                      annotations__note=UNICODE * 100), "team-a", "succeeded"),
    "another_tenants_queue": (_spec("cross-tenant", queue="team-b"), "team-a", "rejected:forbidden_queue"),
    "unconfigured_tenant": (_spec("kube-system-job"), "kube-system", "rejected:forbidden_queue"),
    "privileged": (_spec("privileged", template__security={"privileged": True}), "team-a",
                   "rejected:privileged_not_allowed"),
    "host_path": (_spec("host-path", template__security={"host_path_volumes": ["/var/run/docker.sock"]}),
                  "team-a", "rejected:privileged_not_allowed"),
    "unknown_priority_class": (_spec("no-class", priority_class="root"), "team-a",
                               "rejected:unknown_priority_class"),
}


async def test_dangerous_but_valid_submissions_are_contained(system: System) -> None:
    job_ids: dict[str, str] = {}
    records = []
    for case, (spec, tenant, _) in CASES.items():
        job_id, body = submit_envelope(spec, tenant=tenant)
        job_ids[case] = job_id
        records.append(HostileRecord(case, orjson.dumps(body), None, key=job_id.encode()))
    await produce(system.settings, INTENTS_TOPIC, records)

    for case, (_, _, outcome) in CASES.items():
        job_id = job_ids[case]
        if outcome.startswith("rejected:"):
            [rejected] = await system.log.wait_for(JobRejected, job_id=job_id, within=30)
            assert rejected.reason == outcome.removeprefix("rejected:"), case
            assert not system.log.messages(JobAdmitted, job_id=job_id), case
        elif outcome == "pending":
            await system.api.wait_job(job_id, lambda view: view["state"] == "pending" and bool(view["reason"]),
                                      within=30, what=f"{case} pending with a reason")
        else:
            view = await system.api.wait_state(job_id, "succeeded", "failed", "rejected", within=60)
            assert view["state"] == outcome, (case, view)
    assert_all_running(system)

    # the jobs that can never fit stay pending with a reason and block nothing behind them
    assert (await run_valid_job(system))["state"] == "succeeded"
    for case in ("huge_gang", "huge_cpu_and_memory"):
        view = await system.api.job(job_ids[case])
        assert (view["state"], bool(view["reason"])) == ("pending", True), view
        assert not system.log.messages(JobAdmitted, job_id=job_ids[case])
    # what reached the cluster is what was asked, in the tenant's namespace only
    [pod] = await system.first_cluster().pods(job_ids["unicode"])
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["GREETING"] == UNICODE and pod["metadata"]["namespace"] == "ns-team-a"
    statuses = system.log.messages(JobStatusChanged, job_id=job_ids["unconfigured_tenant"])
    assert statuses and statuses[-1].state == "rejected"
    assert_all_running(system)
