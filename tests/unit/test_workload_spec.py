"""``spec_from_workload``: the job spec each example object of ``examples/kube`` describes, kube-native and
through Muster; readable refusals; a declared role list checked against a manifest."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.jobspec import JobSpec, TopologySpec
from services.spec.kinds import GroupIncomplete, NotQueueable, UnknownKind, kind_of
from services.spec.kube_annotations import parse_runtime_estimate, submission_annotations
from services.spec.workload_spec import (
    ROLES_DO_NOT_MATCH_WORKLOAD,
    WORKLOAD_NOT_QUEUEABLE,
    is_kube_object,
    manifest_of,
    roles_mismatch,
    spec_from_workload,
)
from tests.unit.kinds.builders import example, runtime

Roles = list[tuple[str, int, int]]  # name, pods, GPUs per pod

EXAMPLES: list[tuple[str, str, str, str, Roles, float | None]] = [
    # file, apiVersion, kind, name, roles, runtime estimate
    ("jobset.yaml", "jobset.x-k8s.io/v1alpha2", "JobSet", "llm-pretrain", [("coordinator", 1, 0), ("workers", 4, 4)],
     6 * 3600),
    ("trainjob.yaml", "trainer.kubeflow.org/v1alpha1", "TrainJob", "llama-finetune", [("node", 2, 8)], 3 * 3600),
    ("rayjob.yaml", "ray.io/v1", "RayJob", "batch-inference",
     [("head", 1, 0), ("gpu-workers", 2, 2), ("cpu-workers", 3, 0), ("submitter", 1, 0)], None),
    ("raycluster.yaml", "ray.io/v1", "RayCluster", "interactive-ray", [("head", 1, 0), ("workers", 2, 1)], None),
    ("leaderworkerset.yaml", "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm-serve",
     [("leader", 2, 4), ("worker", 2, 4)], None),
    ("deployment.yaml", "apps/v1", "Deployment", "embeddings", [("main", 2, 1)], None),
    ("notebook-statefulset.yaml", "apps/v1", "StatefulSet", "alice-notebook", [("main", 1, 1)], None),
    ("pod-group.yaml", "v1", "Pod", "mpi-bench", [("launcher", 1, 0), ("worker", 2, 4)], None),
]


def _roles(spec: JobSpec) -> Roles:
    return [(r.name, r.replicas, r.template.resources.gpus) for r in spec.roles]


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    """As the API server sends it: server-owned metadata and a status."""
    if obj.get("kind") != "List":
        obj["metadata"].update(uid="0f3c-uid", resourceVersion="42", generation=3,
                               creationTimestamp="2026-11-25T12:00:00Z", managedFields=[{"manager": "kubectl"}])
        obj["status"] = {"conditions": []}
    return obj


@pytest.mark.parametrize(("file", "api_version", "kind", "name", "roles", "estimate"), EXAMPLES)
def test_kube_native_specs_name_the_object(file: str, api_version: str, kind: str, name: str, roles: Roles,
                                           estimate: float | None) -> None:
    obj = _stored(example(file))
    spec = spec_from_workload(obj, [runtime()], kube_native=True)
    assert (spec.name, spec.queue, spec.priority_class, spec.preemptible) == (name, "team-a", "normal", True)
    assert spec.runtime_estimate_s == estimate
    assert _roles(spec) == roles
    assert spec.workload is not None and spec.workload.manifest is None
    uid = None if kind == "Pod" else "0f3c-uid"  # a pod group has no uid of its own
    w = spec.workload
    assert (w.api_version, w.kind, w.name, w.namespace, w.uid) == (api_version, kind, name, "team-a", uid)


@pytest.mark.parametrize(("file", "api_version", "kind", "name", "roles", "estimate"), EXAMPLES)
def test_specs_through_muster_carry_the_object_without_what_the_server_owns(
        file: str, api_version: str, kind: str, name: str, roles: Roles, estimate: float | None) -> None:
    obj = _stored(example(file))
    spec = spec_from_workload(obj, [runtime()], queue="team-a-ops", kube_native=False)
    assert (spec.name, spec.queue, _roles(spec)) == (name, "team-a-ops", roles)  # the given queue wins
    workload = spec.workload
    assert workload is not None and (workload.api_version, workload.kind, workload.name) == (api_version, kind, None)
    manifest = workload.manifest
    assert manifest is not None and "status" not in manifest
    if kind != "Pod":
        assert set(manifest["metadata"]) <= {"name", "namespace", "labels", "annotations"}
        assert manifest["spec"] == example(file)["spec"]
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec  # it travels on the wire as it is


def test_annotations_set_the_jobs_own_fields() -> None:
    obj = example("leaderworkerset.yaml")
    obj["metadata"]["annotations"] = {"muster.dev/priority-class": "high", "muster.dev/runtime-estimate": "90m",
                                      "muster.dev/preemptible": "False", "muster.dev/plain-env": "SORT_KEY"}
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "SORT_KEY", "value": "name"}]
    spec = spec_from_workload(obj, kube_native=True)
    assert (spec.priority_class, spec.runtime_estimate_s, spec.preemptible) == ("high", 5400, False)
    worker = spec.roles[1].template.env["SORT_KEY"]
    assert not isinstance(worker, str) and worker.not_secret
    assert submission_annotations({}).preemptible is True
    assert parse_runtime_estimate("2d") == 2 * 86400


def _long_name(o: dict[str, Any]) -> None:
    o["metadata"]["name"] = "a" * 80


def _bad_estimate(o: dict[str, Any]) -> None:
    o["metadata"]["annotations"]["muster.dev/runtime-estimate"] = "soon"


def _no_queue(o: dict[str, Any]) -> None:
    del o["metadata"]["labels"]["muster.dev/queue"]


def _bad_priority(o: dict[str, Any]) -> None:
    o["metadata"]["annotations"]["muster.dev/priority-class"] = "Very High!"


@pytest.mark.parametrize(("change", "message"), [
    (_long_name, "JobSet team-a/aaaa"),
    (_long_name, "name (metadata.name): String should have at most 63 characters"),
    (_bad_estimate, "muster.dev/runtime-estimate: not a duration: 'soon'"),
    (_no_queue, "names no queue: label it muster.dev/queue"),
    (_bad_priority, "priority_class (annotation muster.dev/priority-class): String should match pattern"),
    (lambda o: o["spec"].update(replicatedJobs=[]), "makes no pods"),
    (lambda o: o.update(kind="CronJob"), "Muster does not queue jobset.x-k8s.io/v1alpha2 CronJob"),
])
def test_refusals_are_one_readable_line(change: Any, message: str) -> None:
    obj = example("jobset.yaml")
    change(obj)
    with pytest.raises(NotQueueable) as caught:
        spec_from_workload(obj, kube_native=True)
    assert message in caught.value.reason and "\n" not in caught.value.reason


def test_unknown_kinds_and_incomplete_groups_are_told_apart() -> None:
    with pytest.raises(UnknownKind):
        spec_from_workload({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, kube_native=True)
    group = example("pod-group.yaml")
    group["items"] = group["items"][:2]
    with pytest.raises(GroupIncomplete):
        spec_from_workload(group, kube_native=True)
    with pytest.raises(NotQueueable, match="runtime ClusterTrainingRuntime torch-distributed was not found"):
        spec_from_workload(example("trainjob.yaml"), kube_native=True)


def test_a_list_of_pods_through_muster_needs_no_group_label() -> None:
    pods = example("pod-group.yaml")
    for pod in pods["items"]:
        del pod["metadata"]["labels"]["muster.dev/pod-group"]
        del pod["metadata"]["annotations"]["muster.dev/pod-group-size"]
    spec = spec_from_workload(pods, kube_native=False)
    assert (spec.name, _roles(spec)) == ("mpi-launcher", [("launcher", 1, 0), ("worker", 2, 4)])
    manifest = spec.workload.manifest if spec.workload is not None else None
    assert manifest is not None and manifest != manifest_of(pods)
    for pod in manifest["items"]:  # grouped, so that the dispatcher and the queue manager read the same roles
        assert pod["metadata"]["labels"]["muster.dev/pod-group"] == "mpi-launcher"
        assert pod["metadata"]["annotations"]["muster.dev/pod-group-size"] == "3"
    assert _roles(spec) == [(r.name, r.replicas, r.template.resources.gpus)
                            for r in kind_of(manifest).roles(manifest).roles]


def test_a_pod_group_names_one_queue() -> None:
    group = example("pod-group.yaml")
    group["items"][2]["metadata"]["labels"]["muster.dev/queue"] = "team-b"
    with pytest.raises(NotQueueable, match="different queues"):
        spec_from_workload(group, kube_native=True)


def test_a_kubernetes_object_is_told_from_a_job_spec() -> None:
    assert is_kube_object(example("jobset.yaml")) and is_kube_object(example("pod-group.yaml"))
    assert not is_kube_object({"name": "train", "queue": "team-a", "kind": "x"})
    assert not is_kube_object(["apiVersion", "kind"])


# -- declared roles against the manifest ------------------------------------------------------------------

def _through_muster(file: str = "jobset.yaml") -> JobSpec:
    return spec_from_workload(example(file), [runtime()], kube_native=False)


def test_the_manifests_own_roles_match_and_topology_may_be_added() -> None:
    spec = _through_muster()
    assert roles_mismatch(spec) is None
    racked = [r.model_copy(update={"topology": TopologySpec(level="rack")}) if r.name == "workers" else r
              for r in spec.roles]
    assert roles_mismatch(spec.model_copy(update={"roles": racked})) is None
    kube_native = spec_from_workload(example("jobset.yaml"), kube_native=True)
    assert roles_mismatch(kube_native) is None  # nothing to compare with


def test_under_declared_roles_are_refused_with_what_differs() -> None:
    spec = _through_muster()
    workers = spec.roles[1]
    fewer = workers.model_copy(update={"replicas": 1, "template": workers.template.model_copy(update={
        "resources": workers.template.resources.model_copy(update={"gpus": 1})})})
    refusal = roles_mismatch(spec.model_copy(update={"roles": [spec.roles[0], fewer]}))
    assert refusal is not None and refusal[0] == ROLES_DO_NOT_MATCH_WORKLOAD
    assert "workers.replicas: 1 given, the manifest says 4" in refusal[1]
    assert "workers.template.resources.gpus: 1 given, the manifest says 4" in refusal[1]
    missing = roles_mismatch(spec.model_copy(update={"roles": [spec.roles[0]]}))
    assert missing is not None and "makes coordinator, workers" in missing[1]


def test_an_unreadable_manifest_is_refused_and_a_trainjob_without_its_runtime_is_left_to_the_dispatcher() -> None:
    spec = _through_muster()
    assert spec.workload is not None and spec.workload.manifest is not None
    broken = {**spec.workload.manifest, "spec": {"replicatedJobs": []}}
    refusal = roles_mismatch(spec.model_copy(update={"workload": spec.workload.model_copy(
        update={"manifest": broken})}))
    assert refusal is not None and refusal[0] == WORKLOAD_NOT_QUEUEABLE
    trainjob = _through_muster("trainjob.yaml")
    assert roles_mismatch(trainjob) is None  # its runtime is in the cluster: not checked here
    assert roles_mismatch(trainjob, [runtime()]) is None
