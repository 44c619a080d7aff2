"""Muster's planned nodes win with the default scheduler running: every pod of a Muster gang names
``schedulerName: muster``, which kube-scheduler leaves alone, so it never binds one pod of a gang, let
alone half of it; the dispatcher's binder binds each pod to the node planned for its completion index."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.dispatcher.binder import Binder
from services.dispatcher.plans import DispatchSettings, admission_manifest
from services.runtime.kube import EVENTS, JOBS, PODS, KubeObject, KubeRest
from tests.builders.jobspecs import job_spec
from tests.dispatcher.builders import TRAINING, admitted, placement
from tests.realkube.conftest import NAMESPACE

pytestmark = pytest.mark.realkube

PLAN = placement("east-a100-2", "east-a100-0", "east-a100-3", pods_per_node=2)


async def gang_pods(rest: KubeRest, job: str) -> list[KubeObject]:
    pods, _ = await rest.list(PODS, NAMESPACE, label_selector=f"muster.dev/job-id={job}")
    return pods


async def wait_pods(rest: KubeRest, job: str, count: int, condition: str, check: object) -> list[KubeObject]:
    pods: list[KubeObject] = []
    try:
        async with asyncio.timeout(60):
            while True:
                pods = await gang_pods(rest, job)
                if len(pods) == count and all(check(p) for p in pods):  # type: ignore[operator]
                    return pods
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"pods of {job} not {condition} within 60s: {pods}") from None


WITNESS = "kube-scheduler-witness"


async def kube_scheduler_has_caught_up(rest: KubeRest) -> None:
    """Return once kube-scheduler has bound a pod of its own created now, which it can put on any node:
    it takes pods in the order they come (at one priority), so by then it has bound, or failed to
    schedule, every pod of its created before (a Muster gang's pods among them, were they its)."""
    witness = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": WITNESS},
               "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "main", "image": "busybox"}]}}
    await rest.create(PODS, witness, NAMESPACE)
    pod: KubeObject = {}
    try:
        async with asyncio.timeout(60):
            while not pod.get("spec", {}).get("nodeName"):
                await asyncio.sleep(0.2)
                pod = await rest.get(PODS, WITNESS, NAMESPACE)
    except TimeoutError:
        raise AssertionError(f"kube-scheduler did not bind {WITNESS} within 60s: {pod.get('status')}") from None
    finally:
        await rest.delete(PODS, WITNESS, NAMESPACE, grace_period_seconds=0)


async def test_the_default_scheduler_never_binds_a_muster_pod_and_the_binder_follows_the_plan(
        admin: KubeRest) -> None:
    decision = admitted("placed", plan=PLAN, job_spec=job_spec(replicas=PLAN.pods, gpus=4, **TRAINING))
    manifest = admission_manifest(decision, "event-1", "corr-1", DispatchSettings())
    assert manifest["spec"]["template"]["spec"]["schedulerName"] == "muster"
    await admin.create(JOBS, manifest, NAMESPACE)
    pods = await wait_pods(admin, "placed", PLAN.pods, "created", lambda p: True)
    await kube_scheduler_has_caught_up(admin)  # the Job controller has made every pod; kube-scheduler, seen them
    pods = await gang_pods(admin, "placed")
    assert [p["spec"].get("nodeName") for p in pods] == [None] * PLAN.pods, "kube-scheduler bound a Muster pod"
    events, _ = await admin.list(EVENTS, NAMESPACE)
    names = {p["metadata"]["name"] for p in pods}
    by_scheduler = [e for e in events if (e.get("involvedObject") or {}).get("name") in names
                    and "default-scheduler" in (e.get("reportingComponent"), (e.get("source") or {}).get("component"))]
    assert by_scheduler == [], by_scheduler

    binder = Binder(admin)
    stop = asyncio.Event()
    task = asyncio.create_task(binder.run(stop))
    try:
        pods = await wait_pods(admin, "placed", PLAN.pods, "bound and running",
                               lambda p: p["spec"].get("nodeName") and p["status"].get("phase") == "Running")
    finally:
        stop.set()
        await task
    plan = json.loads(manifest["metadata"]["annotations"]["muster.dev/placement"])
    for pod in pods:
        index = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        assert pod["spec"]["nodeName"] == plan[index], (index, pod["spec"]["nodeName"], plan)
