"""The dispatcher and the node-state watcher with workload objects, on Apache Kafka and kubesim.

kubesim stores JobSets but runs no JobSet controller, so each test plays it: it creates the pods a JobSet
controller would (its labels, the template's gate). What is checked is Muster's part: the release of the
object, each gated pod released onto a planned node of its role, the run observed from the pods and the
object's status, and the preemption (suspension, pods gone, JobStopped). The real controllers are checked
on the real control plane (tests/e2e/test_workload_kinds.py).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
from schemas.jobspec import JobSpec
from schemas.kube import ADMISSION_GATE, HOSTNAME_LABEL, JOB_ID, ROLE
from schemas.runs import JobDispatched, JobStopped, RunAllPodsReady, RunStarted, RunSucceeded
from services.runtime.kafka import KafkaSettings
from services.runtime.kube import PODS, KubeObject, Resource
from services.spec.workload_spec import spec_from_workload
from tests.dispatcher.builders import CLUSTER, DURATION, preempt
from tests.dispatcher.harness import Cluster, eventually_true, running

pytestmark = pytest.mark.integration

JOBSETS = Resource("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", namespaced=True)
NAMESPACE = "team-a"


def jobset(name: str, *, suspend: bool = True, seconds: float = 2.0) -> KubeObject:
    def rjob(rj: str, replicas: int, gpus: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "registry.example/train:1",
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        if gpus:
            container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
        pod = {"metadata": {"annotations": {DURATION: str(seconds)}},
               "spec": {"containers": [container], "restartPolicy": "Never",
                        "nodeSelector": {"muster.dev/gpu-type": "a100"} if gpus else {}}}
        return {"name": rj, "replicas": replicas, "template": {"spec": {"parallelism": 1, "template": pod}}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"muster.dev/queue": "team-a"}},
            "spec": {"suspend": suspend, "replicatedJobs": [rjob("launcher", 1, 0), rjob("workers", 2, 4)]}}


def plan() -> PlacementPlan:
    return PlacementPlan(cluster=CLUSTER, nodes=[
        NodePods(node="east-a100-2", pods=1, role="workers"), NodePods(node="east-a100-3", pods=1, role="workers"),
        NodePods(node="east-a100-2", pods=1, role="launcher")])


def admission(job_id: str, spec: JobSpec, attempt: int = 0) -> JobAdmitted:
    return JobAdmitted(job_id=job_id, attempt=attempt, tenant="team-a", queue="team-a", namespace=NAMESPACE,
                       priority=100, replicas=2, placement=plan(), spec=spec)


async def play_controller(cluster: Cluster, obj: KubeObject) -> list[str]:
    """Create the pods a JobSet controller would for ``obj``: each replicated Job's pod template, labelled."""
    name = obj["metadata"]["name"]
    created = []
    for rj in obj["spec"]["replicatedJobs"]:
        template = copy.deepcopy(rj["template"]["spec"]["template"])
        for i in range(rj["replicas"]):
            pod_name = f"{name}-{rj['name']}-{i}-0"
            meta = template.get("metadata") or {}
            labels = {**(meta.get("labels") or {}), "jobset.sigs.k8s.io/jobset-name": name,
                      "jobset.sigs.k8s.io/replicatedjob-name": rj["name"]}
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "name": pod_name, "labels": labels},
                   "spec": copy.deepcopy(template["spec"])}
            await cluster.rest.create(PODS, pod, NAMESPACE)
            created.append(pod_name)
    return created


async def pods_of(cluster: Cluster, names: list[str]) -> list[KubeObject]:
    items, _ = await cluster.rest.list(PODS, NAMESPACE)
    return [p for p in items if p["metadata"]["name"] in names]


async def test_a_kube_native_jobset_is_released_and_its_pods_go_to_their_roles_nodes(
        registry_settings: KafkaSettings) -> None:
    jid = f"js-{uuid.uuid4().hex[:6]}"
    async with running(registry_settings) as cluster:
        obj = await cluster.rest.create(JOBSETS, jobset(jid), NAMESPACE)
        spec = spec_from_workload(obj, kube_native=True)
        await cluster.decide(admission(jid, spec))
        dispatched = (await cluster.outputs.wait_for(JobDispatched, job_id=jid))[0]
        assert (dispatched.namespace, dispatched.object_name) == (NAMESPACE, jid)
        released = await cluster.rest.get(JOBSETS, jid, NAMESPACE)
        assert released["spec"]["suspend"] is False and released["metadata"]["labels"][JOB_ID] == jid
        for rj in released["spec"]["replicatedJobs"]:  # the next pods of every role come gated and labelled
            pod = rj["template"]["spec"]["template"]
            assert {"name": ADMISSION_GATE} in pod["spec"]["schedulingGates"]
            assert pod["metadata"]["labels"][ROLE] == rj["name"]
        names = await play_controller(cluster, released)

        async def placed() -> bool:
            pods = await pods_of(cluster, names)
            return len(pods) == 3 and all(not p["spec"].get("schedulingGates") for p in pods)

        await eventually_true(placed)
        by_role: dict[str, list[str]] = {}
        for p in await pods_of(cluster, names):
            by_role.setdefault(p["metadata"]["labels"][ROLE], []).append(p["spec"]["nodeSelector"][HOSTNAME_LABEL])
        assert sorted(by_role["workers"]) == ["east-a100-2", "east-a100-3"] and by_role["launcher"] == ["east-a100-2"]
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        await cluster.outputs.wait_for(RunStarted, job_id=jid)
        done = {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                "lastTransitionTime": "2026-11-26T00:00:00Z", "message": "done"}]}
        await cluster.rest.patch(JOBSETS, jid, {"status": done}, NAMESPACE, subresource="status")
        await cluster.outputs.wait_for(RunSucceeded, job_id=jid)


async def test_a_jobset_given_as_a_manifest_is_created_held_and_taken_back_on_preemption(
        registry_settings: KafkaSettings) -> None:
    jid = f"jm-{uuid.uuid4().hex[:6]}"
    async with running(registry_settings) as cluster:
        spec = spec_from_workload(jobset("train", suspend=False, seconds=600), kube_native=False)
        await cluster.decide(admission(jid, spec))
        await cluster.outputs.wait_for(JobDispatched, job_id=jid)
        created = await cluster.rest.get(JOBSETS, f"{jid}-a0", NAMESPACE)
        assert created["metadata"]["annotations"]["muster.dev/owned"] == "true"
        names = await play_controller(cluster, created)
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        await cluster.decide(preempt(jid, 0, grace_s=0.5))
        (stopped,) = await cluster.outputs.wait_for(JobStopped, job_id=jid, within=60)
        assert stopped.requeue and stopped.reason == "higher_priority"
        assert await pods_of(cluster, names) == []  # no controller here: the dispatcher removed the pods itself
        items, _ = await cluster.rest.list(JOBSETS, NAMESPACE)
        assert f"{jid}-a0" not in [i["metadata"]["name"] for i in items]  # Muster's own object is deleted


def plain_pods(*roles: tuple[str, int, int], seconds: float = 2.0) -> KubeObject:
    """A group of plain Pods as a user submits it through Muster: ``(container, pods, gpus)`` per shape."""
    items = []
    for container, count, gpus in roles:
        resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
        if gpus:
            resources["limits"] = {"nvidia.com/gpu": str(gpus)}
        for i in range(count):
            items.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"{container}-{i}", "labels": {"muster.dev/queue": "team-a"},
                                       "annotations": {DURATION: str(seconds)}},
                          "spec": {"restartPolicy": "Never",
                                   "nodeSelector": {"muster.dev/gpu-type": "a100"} if gpus else {},
                                   "containers": [{"name": container, "image": "registry.example/train:1",
                                                   "resources": resources}]}})
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


async def test_a_pod_group_muster_creates_comes_released_onto_its_planned_nodes_and_runs(
        registry_settings: KafkaSettings) -> None:
    jid = f"pg-{uuid.uuid4().hex[:6]}"
    async with running(registry_settings) as cluster:
        spec = spec_from_workload(plain_pods(("launcher", 1, 0), ("workers", 2, 4)), queue="team-a",
                                  kube_native=False)
        assert sorted(r.name for r in spec.roles) == ["launcher", "workers"]
        await cluster.decide(admission(jid, spec))
        await cluster.outputs.wait_for(JobDispatched, job_id=jid)
        items, _ = await cluster.rest.list(PODS, NAMESPACE)
        pods = [p for p in items if p["metadata"]["labels"].get(JOB_ID) == jid]
        assert len(pods) == 3
        # created released: no gate to lift, each on a planned node of its role, tolerating the GPU taint
        assert all(not p["spec"].get("schedulingGates") for p in pods)
        by_role: dict[str, list[str]] = {}
        for p in pods:
            by_role.setdefault(p["metadata"]["labels"][ROLE], []).append(p["spec"]["nodeSelector"][HOSTNAME_LABEL])
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in p["spec"]["tolerations"]
        assert sorted(by_role["workers"]) == ["east-a100-2", "east-a100-3"] and by_role["launcher"] == ["east-a100-2"]
        await cluster.outputs.wait_for(RunStarted, job_id=jid)
        # on the node each names, placed there at creation or bound by Muster's binder, never by the default scheduler
        items, _ = await cluster.rest.list(PODS, NAMESPACE)
        pods = [p for p in items if p["metadata"]["labels"].get(JOB_ID) == jid]
        assert {p["spec"]["schedulerName"] for p in pods} == {"muster"}
        assert all(p["spec"]["nodeName"] == p["spec"]["nodeSelector"][HOSTNAME_LABEL] for p in pods)
        await cluster.outputs.wait_for(RunSucceeded, job_id=jid, within=60)
