"""One job through the whole system: submitted over HTTP, queued, admitted, run on kubesim, finished."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from schemas.decisions import JobAdmitted
from schemas.runs import DispatchFailed, JobDispatched, RunAllPodsReady, RunFailed, RunStarted, RunSucceeded
from services.dispatcher.plans import object_name
from services.runtime.kube import EVENTS, JOBS, PODS
from services.spec.ids import kube_job_id
from tests.e2e.builders import ADMIN_TOKEN, job_spec, suspended_kube_job
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


async def test_single_job_runs_to_success(system: System) -> None:
    job_id = await system.api.submit(job_spec("single", gpus=2, duration_s=1.0))

    done = await system.api.wait_state(job_id, "succeeded", "failed", within=60)
    assert done["state"] == "succeeded"
    assert done["cluster"] == "east"
    states = system.log.states(job_id)
    assert states[0] == "pending" and states[-1] == "succeeded"
    assert states.index("pending") < states.index("running") < states.index("succeeded")

    [admitted] = system.log.messages(JobAdmitted, job_id=job_id)
    assert admitted.attempt == 0 and admitted.placement.cluster == "east"
    assert system.log.messages(RunStarted, job_id=job_id)
    assert system.log.messages(RunSucceeded, job_id=job_id, attempt=0)
    pods = await system.first_cluster().pods(job_id, "team-a")
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    assert pods[0]["spec"]["nodeName"] in {n["node"] for n in admitted.placement.model_dump()["nodes"]}


async def test_gang_waits_until_it_fits_whole_then_starts_all_pods(system: System) -> None:
    cluster = system.first_cluster()
    blocker = await system.api.submit(job_spec("blocker", queue="team-b", gpus=1, duration_s=4.0), tenant="team-b")
    await system.api.wait_state(blocker, "running", within=30)
    gang = await system.api.submit(job_spec("gang", gpus=8, replicas=2, duration_s=1.0))

    # while the blocker holds a node, the 16-GPU gang stays pending and nothing of it reaches the cluster
    pending = await system.api.wait_job(gang, lambda j: j["state"] == "pending" and j["reason"] != "", within=20)
    assert pending["reason"] in {"insufficient_capacity", "waiting_for_reservation"}, pending
    assert not system.log.messages(RunSucceeded, job_id=blocker)
    assert not system.log.messages(JobAdmitted, job_id=gang)
    assert await cluster.pods(gang) == []

    await system.api.wait_state(gang, "succeeded", within=60)
    assert (await system.api.job(blocker))["state"] == "succeeded"
    [admitted] = system.log.messages(JobAdmitted, job_id=gang)
    assert admitted.replicas == 2 and admitted.placement.pods == 2
    assert sorted(n.pods for n in admitted.placement.nodes) == [1, 1]
    # the gang was admitted only once the blocker had finished
    blocker_done = system.log.messages(RunSucceeded, job_id=blocker)[0].observed_at
    gang_started = system.log.messages(RunStarted, job_id=gang)
    assert min(s.observed_at for s in gang_started) >= blocker_done
    [ready] = system.log.messages(RunAllPodsReady, job_id=gang)
    assert ready.pods_total == 2
    # one Job of two pods, each on its own planned node, both run to the end
    [kube_job] = await cluster.jobs(gang)
    assert kube_job["spec"]["parallelism"] == 2
    pods = await cluster.pods(gang)
    assert len(pods) == 2 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert {p["spec"]["nodeName"] for p in pods} == {n.node for n in admitted.placement.nodes}


async def test_failing_pod_restarts_whole_gang_then_gives_up(system: System) -> None:
    job_id = await system.api.submit(job_spec("crashy", gpus=1, replicas=2, duration_s=0.5, exit_code=3,
                                              max_restarts=1))

    failed = await system.api.wait_state(job_id, "failed", "succeeded", within=60)
    assert failed["state"] == "failed"
    # the gang ran twice under the same attempt: the first Job, then one whole-gang restart
    names = [d.object_name for d in system.log.messages(JobDispatched, job_id=job_id)]
    assert list(dict.fromkeys(names)) == [object_name(job_id, 0), object_name(job_id, 0, 1)]
    failures = system.log.messages(RunFailed, job_id=job_id, attempt=0)
    assert {f.exit_code for f in failures} == {3}
    failed_jobs = {f.pod.rsplit("-", 2)[0] for f in failures if f.pod}
    assert failed_jobs == {object_name(job_id, 0), object_name(job_id, 0, 1)}
    assert {(f.classification, tuple(f.nodes)) for f in failures} == {("job", ())}  # its own fault: no node blamed
    [gave_up] = system.log.messages(DispatchFailed, job_id=job_id)
    assert gave_up.reason == "restarts_exhausted" and not gave_up.retryable
    assert len(system.log.messages(JobAdmitted, job_id=job_id)) == 1
    await system.first_cluster().wait_no_jobs(job_id)


async def test_a_gang_failed_by_its_node_restarts_elsewhere_without_spending_a_restart(system: System) -> None:
    cluster = system.first_cluster()
    # max_restarts=0: a failure of the job's own would end it; an infrastructure failure must not
    job_id = await system.api.submit(job_spec("flaky-node", gpus=1, replicas=2, duration_s=6.0, max_restarts=0))
    await system.api.wait_state(job_id, "running", within=60)
    [first] = system.log.messages(JobAdmitted, job_id=job_id)
    bad = {n.node for n in first.placement.nodes}
    assert len(bad) == 1  # best fit packs both pods onto one node
    pod = next(p for p in await cluster.pods(job_id) if p["status"].get("phase") == "Running")
    # the node's GPU device plugin fails: the kubelet fails the pod with a node-level reason
    await cluster.rest.patch(PODS, pod["metadata"]["name"], {"status": device_failure(pod)},
                             pod["metadata"]["namespace"], subresource="status")

    done = await system.api.wait_state(job_id, "succeeded", "failed", within=90)
    assert done["state"] == "succeeded", done
    [failure] = system.log.messages(RunFailed, job_id=job_id, attempt=0)
    assert (failure.classification, set(failure.nodes), failure.reason) == (
        "infrastructure", bad, "UnexpectedAdmissionError")
    assert not system.log.messages(DispatchFailed, job_id=job_id)
    admissions = system.log.messages(JobAdmitted, job_id=job_id)
    assert [a.attempt for a in admissions] == [0, 1]
    retry = admissions[1]
    assert retry.restarts == 0 and not bad & {n.node for n in retry.placement.nodes}
    pods = [p for p in await cluster.pods(job_id) if p["metadata"]["name"].startswith(object_name(job_id, 1))]
    assert len(pods) == 2 and not bad & {p["spec"]["nodeName"] for p in pods}
    # describe's history tells the infrastructure failure apart
    r = await system.api.http.get(f"/v1/jobs/{job_id}/explain", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    history = [f"{h['state']} {h.get('reason') or ''} {h.get('message') or ''}" for h in r.json()["history"]]
    assert any("infrastructure failure on" in h and "UnexpectedAdmissionError" in h for h in history), history


def device_failure(pod: dict[str, Any]) -> dict[str, Any]:
    """The status the kubelet writes when the GPU device plugin fails a pod's devices."""
    message = "Allocate failed due to rpc error: device plugin reports the GPU unhealthy, which is unexpected"
    containers = [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 128, "reason": "ContainerCannotRun", "message": message,
                                            "startedAt": pod["status"].get("startTime"),
                                            "finishedAt": pod["status"].get("startTime")}}}
                  for c in pod["spec"]["containers"]]
    return {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message,
            "containerStatuses": containers}


async def test_cancel_pending_and_running_jobs(system: System) -> None:
    cluster = system.first_cluster()
    running = await system.api.submit(job_spec("long", gpus=8, replicas=2, duration_s=60.0))
    await system.api.wait_state(running, "running", within=30)
    waiting = await system.api.submit(job_spec("waiting", gpus=1, duration_s=1.0))
    await system.api.wait_state(waiting, "pending", within=20)

    await system.api.cancel(waiting)
    assert (await system.api.wait_state(waiting, "cancelled", within=20))["state"] == "cancelled"
    assert not system.log.messages(JobAdmitted, job_id=waiting)

    assert len(await cluster.jobs(running)) == 1
    # a request the queue manager refuses is told at once, with its reason, through the whole system
    refused = await system.api.request(running, "suspend", wait=20)
    assert (refused.status_code, refused.json()["error"]) == (409, "not_waiting"), refused.text
    assert (await system.api.job(running))["last_action"]["outcome"] == "refused"
    answered = await system.api.request(running, "cancel", wait=20)
    assert (answered.status_code, answered.json()["outcome"]) == (200, "applied"), answered.text
    await system.api.wait_state(running, "cancelled", within=30)
    await cluster.wait_no_jobs(running)
    assert not system.log.messages(RunSucceeded, job_id=running)
    # the freed GPUs are not handed to the cancelled pending job
    assert not system.log.messages(JobAdmitted, job_id=waiting)


async def test_labelled_suspended_kube_job_becomes_a_muster_job(system: System) -> None:
    cluster = system.first_cluster()
    created = await cluster.rest.create(JOBS, suspended_kube_job("resnet-sweep-7", gang=2, gpus=4), "team-a")
    meta = created["metadata"]
    job_id = kube_job_id(meta["namespace"], meta["name"], meta["uid"], tenant="team-a")  # the namespace's tenant

    done = await system.api.wait_state(job_id, "succeeded", "failed", within=60)
    assert done["state"] == "succeeded" and done["replicas"] == 2 and done["gpus"] == 8
    [admitted] = system.log.messages(JobAdmitted, job_id=job_id)
    assert admitted.placement.pods == 2
    kube_job = await cluster.rest.get(JOBS, "resnet-sweep-7", "team-a")
    assert kube_job["metadata"]["uid"] == meta["uid"]  # the user's own object ran, not a copy
    assert kube_job["spec"]["suspend"] is False
    assert kube_job["status"].get("succeeded") == 2
    pods = await cluster.pods(job_id, "team-a")
    assert len(pods) == 2 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    # what `kubectl describe job` shows of Muster: its Events and conditions on the user's own Job
    async with asyncio.timeout(20):
        while True:
            kube_job = await cluster.rest.get(JOBS, "resnet-sweep-7", "team-a")
            conditions = {c["type"]: c for c in kube_job["status"].get("conditions") or []}
            if conditions.get("muster.dev/Admitted", {}).get("reason") == "Succeeded":
                break
            await asyncio.sleep(0.2)
    assert conditions["muster.dev/Admitted"]["status"] == "True"
    assert conditions["muster.dev/Queued"]["status"] == "False"
    assert conditions["Complete"]["status"] == "True"  # the Job controller's own conditions are kept
    events, _ = await cluster.rest.list(EVENTS, "team-a")
    told = [e for e in events if e["involvedObject"].get("uid") == meta["uid"] and
            e.get("reportingComponent") == "muster-gateway"]
    assert "Admitted" in [e["reason"] for e in told]
    assert all(e["involvedObject"]["kind"] == "Job" for e in told)



async def test_job_events_name_its_kubernetes_objects_and_survive_a_gateway_restart(system: System) -> None:
    import httpx

    from tests.e2e.builders import member_token

    job_id = await system.api.submit(job_spec("traced", gpus=2, replicas=2, duration_s=1.0))
    await system.api.wait_state(job_id, "succeeded", within=60)
    [dispatched] = system.log.messages(JobDispatched, job_id=job_id)
    pods = {(p["metadata"]["name"], p["spec"]["nodeName"]) for p in await system.first_cluster().pods(job_id)}

    async def events_once_succeeded() -> dict[str, Any]:
        assert system.gateway_url is not None
        async with httpx.AsyncClient(base_url=system.gateway_url, timeout=10) as http, asyncio.timeout(20):
            while True:
                r = await http.get(f"/v1/jobs/{job_id}/events",
                                   headers={"Authorization": f"Bearer {member_token('team-a')}"})
                body: dict[str, Any] = r.json()
                if {"dispatched", "succeeded"} <= {e["kind"] for e in body["events"]}:  # both topics read
                    return body
                await asyncio.sleep(0.1)

    seen = await events_once_succeeded()
    [attempt] = seen["attempts"]
    assert (attempt["cluster"], attempt["namespace"], attempt["job_name"], attempt["pods_source"]) == (
        "east", dispatched.namespace, dispatched.object_name, "observed")
    assert {(p["name"], p["node"]) for p in attempt["pods"]} == pods and len(pods) == 2
    reports = [(e["source"], e["kind"]) for e in seen["events"] if e["source"] != "queue_manager"]
    assert reports == [("dispatcher", "dispatched"), ("node_watcher", "started"), ("node_watcher", "pods_ready"),
                       ("node_watcher", "succeeded")]

    # a new gateway reads the run and dispatch reports again from the topics
    await system.stop("gateway")
    await system.start_gateway()
    again = await events_once_succeeded()
    assert again["attempts"] == seen["attempts"]
    assert [e for e in again["events"] if e["source"] != "queue_manager"] == [
        e for e in seen["events"] if e["source"] != "queue_manager"]
