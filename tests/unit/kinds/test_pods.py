"""After release: the label selectors of each object's pods, and the role of each pod its controller makes,
on pods labelled as JobSet, KubeRay, LWS, the Job, ReplicaSet and StatefulSet controllers label them."""

from __future__ import annotations

from typing import Any

import pytest

from services.spec.kinds import kind_of, role_name
from tests.unit.kinds.builders import example, pod

RAY_CLUSTER = "batch-inference-x7k2p"


def _rayjob() -> dict[str, Any]:
    obj = example("rayjob.yaml")
    obj["spec"]["suspend"] = False
    obj["status"] = {"rayClusterName": RAY_CLUSTER, "jobDeploymentStatus": "Running"}
    return obj


def _jobset_pod(jobset: str, rj: str, index: int = 0) -> dict[str, Any]:
    return pod(f"{jobset}-{rj}-{index}-0-abcde", {
        "jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": rj,
        "jobset.sigs.k8s.io/job-index": str(index), "jobset.sigs.k8s.io/job-key": "3f1c",
        "batch.kubernetes.io/job-name": f"{jobset}-{rj}-{index}", "batch.kubernetes.io/job-completion-index": "0"})


def _ray_pod(cluster: str, node_type: str, group: str) -> dict[str, Any]:
    return pod(f"{cluster}-{group}-abcde", {
        "ray.io/cluster": cluster, "ray.io/node-type": node_type, "ray.io/group": group, "ray.io/is-ray-node": "yes",
        "ray.io/identifier": f"{cluster}-{node_type}", "app.kubernetes.io/created-by": "kuberay-operator"})


def _submitter_pod(job: str) -> dict[str, Any]:
    return pod(f"{job}-q8z2m", {"batch.kubernetes.io/job-name": job, "job-name": job,
                                "batch.kubernetes.io/controller-uid": "9d1e"})


def _lws_pod(lws: str, group: int, worker: int) -> dict[str, Any]:
    name = f"{lws}-{group}" if worker == 0 else f"{lws}-{group}-{worker}"
    return pod(name, {"leaderworkerset.sigs.k8s.io/name": lws, "leaderworkerset.sigs.k8s.io/group-index": str(group),
                      "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
                      "leaderworkerset.sigs.k8s.io/group-key": "a1b2"})


def _lws_without_leader() -> dict[str, Any]:
    obj = example("leaderworkerset.yaml")
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    return obj


def _owned(name: str, labels: dict[str, str], kind: str, owner: str) -> dict[str, Any]:
    return pod(name, labels, owners=[{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "u",
                                      "controller": True}])


def _group_pod(name: str) -> dict[str, Any]:
    return next(p for p in example("pod-group.yaml")["items"] if p["metadata"]["name"] == name)


CASES: list[tuple[str, dict[str, Any], dict[str, Any], str | None]] = [
    ("jobset worker", example("jobset.yaml"), _jobset_pod("llm-pretrain", "workers", 1), "workers"),
    ("jobset coordinator", example("jobset.yaml"), _jobset_pod("llm-pretrain", "coordinator"), "coordinator"),
    ("another jobset's pod", example("jobset.yaml"), _jobset_pod("other", "workers"), None),
    ("a replicatedJob the jobset has not", example("jobset.yaml"), _jobset_pod("llm-pretrain", "eval"), None),
    ("trainjob node", example("trainjob.yaml"), _jobset_pod("llama-finetune", "node"), "node"),
    ("trainjob, another jobset", example("trainjob.yaml"), _jobset_pod("llm-pretrain", "node"), None),
    ("rayjob head", _rayjob(), _ray_pod(RAY_CLUSTER, "head", "headgroup"), "head"),
    ("rayjob gpu worker", _rayjob(), _ray_pod(RAY_CLUSTER, "worker", "gpu-workers"), "gpu-workers"),
    ("rayjob worker of a group it has not", _rayjob(), _ray_pod(RAY_CLUSTER, "worker", "spare"), None),
    ("rayjob, a previous cluster's worker", _rayjob(), _ray_pod("batch-inference-old01", "worker", "gpu-workers"),
     None),
    ("rayjob submitter", _rayjob(), _submitter_pod("batch-inference"), "submitter"),
    ("another job's pod", _rayjob(), _submitter_pod("other"), None),
    ("raycluster head", example("raycluster.yaml"), _ray_pod("interactive-ray", "head", "headgroup"), "head"),
    ("raycluster worker", example("raycluster.yaml"), _ray_pod("interactive-ray", "worker", "workers"), "workers"),
    ("raycluster, another cluster", example("raycluster.yaml"), _ray_pod("other", "worker", "workers"), None),
    ("lws leader", example("leaderworkerset.yaml"), _lws_pod("llm-serve", 1, 0), "leader"),
    ("lws worker", example("leaderworkerset.yaml"), _lws_pod("llm-serve", 1, 3), "worker"),
    ("lws without leader template", _lws_without_leader(), _lws_pod("llm-serve", 0, 0), "main"),
    ("another lws", example("leaderworkerset.yaml"), _lws_pod("other", 0, 0), None),
    ("deployment pod", example("deployment.yaml"),
     _owned("embeddings-6d4cf56db6-x2x9q", {"app": "embeddings", "pod-template-hash": "6d4cf56db6"}, "ReplicaSet",
            "embeddings-6d4cf56db6"), "main"),
    ("a look-alike of another deployment", example("deployment.yaml"),
     _owned("search-7c9d-abcde", {"app": "embeddings"}, "ReplicaSet", "search-7c9d"), None),
    ("deployment, other labels", example("deployment.yaml"), pod("x", {"app": "other"}), None),
    ("statefulset pod", example("notebook-statefulset.yaml"),
     _owned("alice-notebook-0", {"app": "alice-notebook", "apps.kubernetes.io/pod-index": "0"}, "StatefulSet",
            "alice-notebook"), "main"),
    ("pod group worker", example("pod-group.yaml"), _group_pod("mpi-worker-1"), "worker"),
    ("pod group launcher", example("pod-group.yaml"), _group_pod("mpi-launcher"), "launcher"),
    ("another group's pod", example("pod-group.yaml"),
     pod("x", {"muster.dev/pod-group": "other"}, spec=_group_pod("mpi-worker-1")["spec"]), None),
]


@pytest.mark.parametrize(("obj", "p", "role"), [(o, p, r) for _, o, p, r in CASES], ids=[c[0] for c in CASES])
def test_pod_role(obj: dict[str, Any], p: dict[str, Any], role: str | None) -> None:
    assert kind_of(obj).pod_role(obj, p) == role


def test_a_jobset_pods_role_uses_the_normalised_name() -> None:
    obj = example("jobset.yaml")
    obj["spec"]["replicatedJobs"][1]["name"] = "Workers_GPU"
    assert kind_of(obj).pod_role(obj, _jobset_pod("llm-pretrain", "Workers_GPU")) == role_name("Workers_GPU")


@pytest.mark.parametrize(("obj", "selectors"), [
    (example("jobset.yaml"), [{"jobset.sigs.k8s.io/jobset-name": "llm-pretrain"}]),
    (example("trainjob.yaml"), [{"jobset.sigs.k8s.io/jobset-name": "llama-finetune"}]),
    (_rayjob(), [{"ray.io/cluster": RAY_CLUSTER}, {"batch.kubernetes.io/job-name": "batch-inference"}]),
    (example("rayjob.yaml"), [{"batch.kubernetes.io/job-name": "batch-inference"}]),  # no cluster yet
    (example("raycluster.yaml"), [{"ray.io/cluster": "interactive-ray"}]),
    (example("leaderworkerset.yaml"), [{"leaderworkerset.sigs.k8s.io/name": "llm-serve"}]),
    (example("deployment.yaml"), [{"app": "embeddings"}]),
    (example("notebook-statefulset.yaml"), [{"app": "alice-notebook"}]),
    (example("pod-group.yaml"), [{"muster.dev/pod-group": "mpi-bench"}]),
])
def test_pod_selectors(obj: dict[str, Any], selectors: list[dict[str, str]]) -> None:
    assert kind_of(obj).pod_selectors(obj) == selectors


def test_every_selected_pod_matches_a_selector() -> None:
    for _, obj, p, role in CASES:
        if role is None:
            continue
        labels = p["metadata"]["labels"]
        assert any(all(labels.get(k) == v for k, v in s.items()) for s in kind_of(obj).pod_selectors(obj))


def test_a_selector_of_expressions_only_selects_by_the_template_labels_and_checks_the_expressions() -> None:
    obj = example("deployment.yaml")
    obj["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["embeddings"]},
                                                    {"key": "canary", "operator": "DoesNotExist"}]}
    kind = kind_of(obj)
    assert kind.pod_selectors(obj) == [{"app": "embeddings"}]
    assert kind.pod_role(obj, pod("a", {"app": "embeddings"})) == "main"
    assert kind.pod_role(obj, pod("b", {"app": "embeddings", "canary": "yes"})) is None
