"""``POST /v1/jobs`` with a workload manifest: roles left out are read from the manifest; roles that are not
the manifest's are refused (a tenant cannot under-declare GPUs); a manifest Muster cannot queue is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.gateway.errors import ApiError
from services.gateway.job_requests import with_workload_roles
from services.spec.workload_spec import spec_from_workload
from tests.gateway.builders import Harness, auth

KUBE = Path(__file__).resolve().parents[2] / "examples" / "kube"


def example(file: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((KUBE / file).read_text(encoding="utf-8"))
    return obj


def declared(file: str, related: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The body the client sends: the spec with the roles it read from the object."""
    spec = spec_from_workload(example(file), related or [], kube_native=False)
    return spec.model_dump(mode="json", exclude_unset=True)


async def test_a_manifest_without_roles_is_filled_from_it(client: httpx.AsyncClient, gw: Harness) -> None:
    body = {"queue": "team-a", "workload": {"manifest": example("jobset.yaml")}}
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.spec.name == "llm-pretrain"  # the manifest's name
    assert [(x.name, x.replicas, x.template.resources.gpus) for x in sent.spec.roles] == [
        ("coordinator", 1, 0), ("workers", 4, 4)]
    workload = sent.spec.workload
    assert workload is not None and (workload.api_version, workload.kind) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert workload.manifest is not None and workload.manifest["spec"]["replicatedJobs"][1]["name"] == "workers"


async def test_a_list_of_pods_is_grouped_for_every_reader(client: httpx.AsyncClient, gw: Harness) -> None:
    pods = example("pod-group.yaml")
    for pod in pods["items"]:
        del pod["metadata"]["labels"]["muster.dev/pod-group"]
        del pod["metadata"]["annotations"]["muster.dev/pod-group-size"]
    r = await client.post("/v1/jobs", json={"queue": "team-a", "workload": {"manifest": pods}}, headers=auth("alice"))
    assert r.status_code == 202, r.text
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and [x.name for x in sent.spec.roles] == ["launcher", "worker"]
    workload = sent.spec.workload
    assert workload is not None and (workload.api_version, workload.kind) == ("v1", "Pod")
    assert workload.manifest is not None
    assert {p["metadata"]["labels"]["muster.dev/pod-group"] for p in workload.manifest["items"]} == {"mpi-launcher"}


async def test_the_manifests_own_roles_pass_and_a_topology_may_be_added(client: httpx.AsyncClient) -> None:
    body = declared("leaderworkerset.yaml")
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text
    body["roles"][1]["topology"] = {"level": "rack"}
    body["name"] = "llm-serve-racked"
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(("change", "detail"), [
    (lambda b: b["roles"][1].update(replicas=1), "workers.replicas: 1 given, the manifest says 4"),
    (lambda b: b["roles"][1]["template"]["resources"].update(gpus=1),
     "workers.template.resources.gpus: 1 given, the manifest says 4"),
    (lambda b: b["roles"][1]["template"]["resources"].update(gpu_type="t4"), "gpu_type"),
    (lambda b: b["roles"][1]["template"].update(env={}), "workers.template.env"),
    (lambda b: b.update(roles=b["roles"][:1]), "makes coordinator, workers"),
])
async def test_roles_that_are_not_the_manifests_are_refused(client: httpx.AsyncClient, gw: Harness, change: Any,
                                                            detail: str) -> None:
    body = declared("jobset.yaml")
    change(body)
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 422, r.text
    error = r.json()
    assert (error["error"], error["field"]) == ("roles_do_not_match_workload", "spec.roles")
    assert detail in error["detail"]
    assert gw.publisher.sent == []


@pytest.mark.parametrize(("manifest", "detail"), [
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, "Muster does not queue v1 ConfigMap"),
    ({**example("jobset.yaml"), "spec": {"replicatedJobs": []}}, "makes no pods"),
    (example("trainjob.yaml"), "the roles of TrainJob come from ClusterTrainingRuntime torch-distributed"),
])
async def test_manifests_muster_cannot_read_are_refused(client: httpx.AsyncClient, manifest: dict[str, Any],
                                                        detail: str) -> None:
    r = await client.post("/v1/jobs", json={"queue": "team-a", "workload": {"manifest": manifest}},
                          headers=auth("alice"))
    assert r.status_code == 422, r.text
    error = r.json()
    assert (error["error"], error["field"]) == ("workload_not_queueable", "spec.workload.manifest")
    assert detail in error["detail"]


async def test_a_trainjob_comes_with_the_roles_its_runtime_gives(client: httpx.AsyncClient) -> None:
    """The gateway does not read runtimes: it takes the declared roles (the dispatcher compares them with the
    object it creates)."""
    body = declared("trainjob.yaml", [example("torch-distributed-runtime.yaml")])
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text


async def test_a_bare_kubernetes_object_is_not_a_job_spec(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", json=example("jobset.yaml"), headers=auth("alice"))
    assert r.status_code == 422 and r.json()["error"] == "validation_failed"


async def test_other_tenants_rules_still_apply(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", json={"queue": "team-b", "workload": {"manifest": example("jobset.yaml")}},
                          headers=auth("alice"))
    assert r.status_code == 403


def test_the_request_layer_leaves_other_bodies_alone() -> None:
    plain = {"name": "train", "queue": "team-a", "template": {"image": "x"}}
    assert with_workload_roles(plain) is plain
    kube_native = {"name": "x", "queue": "team-a", "roles": [],
                   "workload": {"api_version": "ray.io/v1", "kind": "RayJob", "name": "x"}}
    assert with_workload_roles(kube_native) is kube_native
    mismatched = {"queue": "team-a", "workload": {"api_version": "ray.io/v1", "kind": "RayJob",
                                                  "manifest": example("jobset.yaml")}}
    assert "roles" not in with_workload_roles(mismatched)  # WorkloadObject's validation says it is a JobSet
    with pytest.raises(ApiError) as caught:
        with_workload_roles({"queue": "team-a", "workload": {"manifest": {"apiVersion": "v1", "kind": "Secret"}}})
    assert caught.value.error == "workload_not_queueable"
