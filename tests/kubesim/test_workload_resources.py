"""The workload kinds' resources on kubesim (JobSet, TrainJob and its runtimes, RayJob, RayCluster,
LeaderWorkerSet, Deployment, StatefulSet): served, stored, listed, watched and patched as on a real API
server, storage only (no controller makes anything of them)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.kubesim.resources import lookup
from services.spec.kinds import CLUSTER_TRAINING_RUNTIME, KINDS, TRAINING_RUNTIME
from tests.kubesim.builders import Api

KUBE = Path(__file__).resolve().parents[2] / "examples" / "kube"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets"


def example(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((KUBE / name).read_text(encoding="utf-8"))
    return obj


def test_every_workload_kind_muster_queues_is_served() -> None:
    for identity in [k.identity for k in KINDS] + [CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME]:
        rt = lookup(identity.group, identity.version, identity.plural)
        assert rt is not None, identity
        assert (rt.kind, rt.namespaced) == (identity.kind, identity.namespaced)


async def test_discovery_lists_the_workload_resources(api: Api) -> None:
    _, groups = await api.get("/apis")
    versions = {g["name"]: g["preferredVersion"]["groupVersion"] for g in groups["groups"]}
    assert versions["jobset.x-k8s.io"] == "jobset.x-k8s.io/v1alpha2"
    assert versions["trainer.kubeflow.org"] == "trainer.kubeflow.org/v1alpha1"
    _, jobset = await api.get("/apis/jobset.x-k8s.io/v1alpha2")
    assert [r["name"] for r in jobset["resources"]] == ["jobsets", "jobsets/status"]
    _, trainer = await api.get("/apis/trainer.kubeflow.org/v1alpha1")
    scopes = {r["name"]: r["namespaced"] for r in trainer["resources"]}
    assert scopes["clustertrainingruntimes"] is False and scopes["trainjobs"] is True
    _, apps = await api.get("/apis/apps/v1")
    assert {"deployments", "statefulsets"} <= {r["name"] for r in apps["resources"]}
    status, _ = await api.get("/apis/example.com/v1/namespaces/team-a/widgets")
    assert status == 404  # an API group nobody installed


@pytest.mark.parametrize(("name", "path"), [
    ("jobset.yaml", JOBSETS),
    ("trainjob.yaml", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"),
    ("rayjob.yaml", "/apis/ray.io/v1/namespaces/team-a/rayjobs"),
    ("raycluster.yaml", "/apis/ray.io/v1/namespaces/team-a/rayclusters"),
    ("leaderworkerset.yaml", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/team-a/leaderworkersets"),
    ("deployment.yaml", "/apis/apps/v1/namespaces/team-a/deployments"),
    ("notebook-statefulset.yaml", "/apis/apps/v1/namespaces/team-a/statefulsets"),
    ("torch-distributed-runtime.yaml", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"),
])
async def test_each_example_is_stored_as_written(api: Api, name: str, path: str) -> None:
    obj = example(name)
    status, created = await api.post(path, obj)
    assert status == 201, created
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    assert created["spec"] == obj["spec"]  # no defaulting of custom resources
    status, listed = await api.get(path, labelSelector="muster.dev/queue")
    assert status == 200 and listed["kind"] == f"{obj['kind']}List"
    if obj["kind"] != "ClusterTrainingRuntime":
        assert [o["metadata"]["name"] for o in listed["items"]] == [obj["metadata"]["name"]]


async def test_patches_status_and_watch_of_a_jobset(api: Api) -> None:
    _, created = await api.post(JOBSETS, example("jobset.yaml"))
    one = f"{JOBSETS}/llm-pretrain"
    status, _ = await api.patch(one, {"spec": {"suspend": False}}, "application/strategic-merge-patch+json")
    assert status == 415  # a custom resource takes no strategic merge patch, as on a real server
    ops = [{"op": "test", "path": "/spec/replicatedJobs/1/name", "value": "workers"},
           {"op": "add", "path": "/spec/replicatedJobs/1/template/spec/template/spec/schedulingGates",
            "value": [{"name": "muster.dev/admission"}]},
           {"op": "replace", "path": "/spec/suspend", "value": False}]
    status, patched = await api.patch(one, ops, "application/json-patch+json")
    assert status == 200 and patched["spec"]["suspend"] is False
    assert patched["metadata"]["generation"] == 2
    status, merged = await api.patch(one, {"metadata": {"labels": {"muster.dev/job-id": "llm-1"}}},
                                     "application/merge-patch+json")
    assert status == 200 and merged["metadata"]["generation"] == 2
    conditions = {"status": {"conditions": [{"type": "Completed", "status": "True"}]},
                  "spec": {"suspend": True}}
    status, after = await api.patch(f"{one}/status", conditions, "application/merge-patch+json")
    assert status == 200 and after["status"]["conditions"][0]["type"] == "Completed"
    assert after["spec"]["suspend"] is False  # the status subresource leaves the spec alone
    events = await api.watch(JOBSETS, 1, resourceVersion=created["metadata"]["resourceVersion"])
    assert events[0]["type"] == "MODIFIED" and events[0]["object"]["kind"] == "JobSet"
    status, _ = await api.delete(one)
    assert status == 200
    status, _ = await api.get(one)
    assert status == 404


async def test_no_controller_acts_on_them(api: Api) -> None:
    """A Deployment whose pods are not gated would be scaled up by the real controller: kubesim makes nothing."""
    deployment = example("deployment.yaml")
    del deployment["spec"]["template"]["spec"]["schedulingGates"]
    status, _ = await api.post("/apis/apps/v1/namespaces/team-a/deployments", deployment)
    assert status == 201
    status, _ = await api.post(JOBSETS, {**example("jobset.yaml"), "spec": {
        **example("jobset.yaml")["spec"], "suspend": False}})
    assert status == 201
    await asyncio.sleep(0.3)
    _, pods = await api.get("/api/v1/namespaces/team-a/pods")
    _, jobs = await api.get("/apis/batch/v1/namespaces/team-a/jobs")
    assert pods["items"] == [] and jobs["items"] == []


async def test_deployments_and_statefulsets_are_validated_as_built_in_kinds(api: Api) -> None:
    path = "/apis/apps/v1/namespaces/team-a/deployments"
    no_selector = example("deployment.yaml")
    del no_selector["spec"]["selector"]
    status, body = await api.post(path, no_selector)
    assert status == 422 and "spec.selector" in str(body)
    mismatched = example("deployment.yaml")
    mismatched["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    status, body = await api.post(path, mismatched)
    assert status == 422 and "does not match" in str(body)
    never = copy.deepcopy(example("notebook-statefulset.yaml"))
    never["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    status, body = await api.post("/apis/apps/v1/namespaces/team-a/statefulsets", never)
    assert status == 422 and "restartPolicy" in str(body)
