"""Objects Muster cannot queue: ``NotQueueable`` with a reason a person can act on."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from services.spec.kinds import GroupIncomplete, NotQueueable, UnknownKind, kind_for, kind_of
from tests.unit.kinds.builders import example, runtime


def _changed(name: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    obj = example(name)
    change(obj)
    return obj


def _many_replicated_jobs(obj: dict[str, Any]) -> None:
    rj = obj["spec"]["replicatedJobs"][0]
    obj["spec"]["replicatedJobs"] = [copy.deepcopy(rj) | {"name": f"part-{i}"} for i in range(9)]


def _many_worker_groups(obj: dict[str, Any]) -> None:
    group = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [copy.deepcopy(group) | {"groupName": f"g{i}"}
                                                         for i in range(7)]


def _jobset_h100(obj: dict[str, Any]) -> None:
    coordinator = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    coordinator["nodeSelector"] = {"muster.dev/gpu-type": "h100"}
    coordinator["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}


CASES: list[tuple[str, dict[str, Any], str]] = [
    ("no containers",
     _changed("jobset.yaml", lambda o: o["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
              .update(containers=[])),
     "JobSet team-a/llm-pretrain: replicatedJob workers: the pod template has no containers"),
    ("more than 8 roles", _changed("jobset.yaml", _many_replicated_jobs),
     "JobSet team-a/llm-pretrain has 9 pod sets (part-0, part-1, part-2, part-3, part-4, part-5, part-6, part-7, "
     "part-8); a Muster job has at most 8 roles"),
    ("head + 7 worker groups + submitter", _changed("rayjob.yaml", _many_worker_groups),
     "RayJob team-a/batch-inference has 9 pod sets"),
    ("GPU roles of different types", _changed("jobset.yaml", _jobset_h100),
     "the roles that ask for GPUs ask for different GPU types (coordinator: h100, workers: a100)"),
    ("no pods", _changed("deployment.yaml", lambda o: o["spec"].update(replicas=0)),
     "Deployment team-a/embeddings makes no pods: nothing to queue"),
    ("too many pods in a role", _changed("deployment.yaml", lambda o: o["spec"].update(replicas=5000)),
     "the pod template makes 5000 pods; a role has at most 4096"),
    ("a bad quantity", _changed("deployment.yaml", lambda o: o["spec"]["template"]["spec"]["containers"][0]
                                ["resources"]["requests"].update(cpu="lots")),
     "Deployment team-a/embeddings: the pod template: quantities must match the regular expression"),
    ("no image", _changed("deployment.yaml", lambda o: o["spec"]["template"]["spec"]["containers"][0].pop("image")),
     "Deployment team-a/embeddings: the pod template: image: String should have at least 1 character"),
    ("clusterSelector", _changed("rayjob.yaml", lambda o: o["spec"].update(clusterSelector={"ray.io/cluster": "x"})),
     "runs on an existing cluster (spec.clusterSelector), which Muster neither holds nor places"),
    ("no rayClusterSpec", _changed("rayjob.yaml", lambda o: o["spec"].pop("rayClusterSpec")),
     "RayJob team-a/batch-inference has no spec.rayClusterSpec"),
    ("no shutdownAfterJobFinishes", _changed("rayjob.yaml", lambda o: o["spec"].pop("shutdownAfterJobFinishes")),
     "spec.shutdownAfterJobFinishes must be true: KubeRay refuses to suspend a RayJob otherwise"),
    ("autoscaling", _changed("raycluster.yaml", lambda o: o["spec"].update(enableInTreeAutoscaling=True)),
     "spec.enableInTreeAutoscaling is true; the Ray autoscaler would change worker counts outside Muster's quota"),
    ("a worker group named head",
     _changed("raycluster.yaml", lambda o: o["spec"]["workerGroupSpecs"][0].update(groupName="head")),
     "a worker group is named 'head', the name of another role of the job"),
    ("a worker group named submitter",
     _changed("rayjob.yaml",
              lambda o: o["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(groupName="submitter")),
     "a worker group is named 'submitter'"),
    ("unknown runtime kind",
     _changed("trainjob.yaml", lambda o: o["spec"]["runtimeRef"].update(kind="MyRuntime")),
     "spec.runtimeRef.kind 'MyRuntime' is not a training runtime"),
    ("two pod sets, one role name",
     _changed("jobset.yaml", lambda o: o["spec"]["replicatedJobs"][0].update(name="workers")),
     "replicatedJob workers and replicatedJob workers would both be role 'workers'"),
]


@pytest.mark.parametrize(("obj", "reason"), [(o, r) for _, o, r in CASES], ids=[c[0] for c in CASES])
def test_refused_with_a_reason(obj: dict[str, Any], reason: str) -> None:
    with pytest.raises(NotQueueable) as caught:
        kind_of(obj).roles(obj, [runtime()])
    assert reason in caught.value.reason


def test_a_trainjob_whose_runtime_is_missing() -> None:
    obj = example("trainjob.yaml")
    with pytest.raises(NotQueueable, match=r"TrainJob team-a/llama-finetune: its runtime ClusterTrainingRuntime "
                                           r"torch-distributed was not found"):
        kind_of(obj).roles(obj)
    other = runtime()
    other["metadata"]["name"] = "deepspeed-distributed"
    with pytest.raises(NotQueueable, match="was not found"):
        kind_of(obj).roles(obj, [other])


def _group(size: str | None, drop: int = 0, extra: bool = False) -> dict[str, Any]:
    obj = example("pod-group.yaml")
    for p in obj["items"]:
        if size is None:
            p["metadata"]["annotations"].pop("muster.dev/pod-group-size")
        else:
            p["metadata"]["annotations"]["muster.dev/pod-group-size"] = size
    obj["items"] = obj["items"][drop:]
    if extra:
        obj["items"].append(copy.deepcopy(obj["items"][-1]) | {"metadata": {**obj["items"][-1]["metadata"],
                                                                            "name": "mpi-worker-2"}})
    return obj


@pytest.mark.parametrize(("obj", "error", "reason"), [
    (_group("3", drop=1), GroupIncomplete, "pod group team-a/mpi-bench has 2 of its 3 pods; waiting for the rest"),
    (_group("3", extra=True), NotQueueable, "pod group team-a/mpi-bench has 4 pods, more than its "
                                            "muster.dev/pod-group-size 3"),
    (_group(None), NotQueueable, "its pods must all carry the same annotation muster.dev/pod-group-size (found: none)"),
    (_group("zero"), NotQueueable, "annotation muster.dev/pod-group-size must be a positive count, not 'zero'"),
])
def test_pod_groups_refused_or_waiting(obj: dict[str, Any], error: type[NotQueueable], reason: str) -> None:
    with pytest.raises(error) as caught:
        kind_of(obj).roles(obj)
    assert reason in caught.value.reason


def test_pods_of_a_group_must_agree_on_its_size() -> None:
    obj = example("pod-group.yaml")
    obj["items"][0]["metadata"]["annotations"]["muster.dev/pod-group-size"] = "4"
    with pytest.raises(NotQueueable, match=r"the same annotation muster.dev/pod-group-size \(found: 3, 4\)"):
        kind_of(obj).roles(obj)


def test_an_unknown_kind() -> None:
    with pytest.raises(UnknownKind, match=r"Muster does not queue kubeflow\.org/v1 PyTorchJob; it queues batch/v1 Job"):
        kind_for("kubeflow.org/v1", "PyTorchJob")
    with pytest.raises(UnknownKind):
        kind_of({"apiVersion": "jobset.x-k8s.io/v1alpha1", "kind": "JobSet"})


def test_a_malformed_manifest_is_refused_not_crashed() -> None:
    obj = example("jobset.yaml")
    obj["spec"]["replicatedJobs"][1]["template"] = ["not", "a", "map"]
    with pytest.raises(NotQueueable, match="JobSet team-a/llm-pretrain: unreadable"):
        kind_of(obj).roles(obj)
    assert "unreadable" in (kind_of(obj).why_not_held(_unsuspended(obj)) or "")
    ray = example("rayjob.yaml")
    ray["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "two"
    with pytest.raises(NotQueueable, match="RayJob team-a/batch-inference: unreadable: not a count: 'two'"):
        kind_of(ray).roles(ray)


def _unsuspended(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["suspend"] = False
    return obj
