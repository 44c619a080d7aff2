"""Kubernetes objects as the API server returns them: nodes of the example cluster, Muster Jobs and their pods."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.kubesim.nodes import cluster_nodes, with_readiness
from services.spec.cluster_file import load_cluster_file

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"
CLUSTER = "east"
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

KubeObject = dict[str, Any]


def example_nodes() -> list[KubeObject]:
    """The nodes kubesim builds for cluster ``east`` of the example cluster file (4 x a100, 2 x t4)."""
    cluster = load_cluster_file(CLUSTER_FILE).clusters[0]
    nodes = cluster_nodes(cluster)
    for i, node in enumerate(nodes):
        node["metadata"].update({"uid": f"node-uid-{i}", "resourceVersion": str(i + 1)})
    return nodes


def example_node(name: str = "east-a100-0") -> KubeObject:
    return next(n for n in example_nodes() if n["metadata"]["name"] == name)


def not_ready(node: KubeObject) -> KubeObject:
    return with_readiness(copy.deepcopy(node), False)


def job(job_id: str = "train-1", attempt: int = 0, *, gang: int = 2, name: str | None = None,
        namespace: str = "team-a", annotations: dict[str, str] | None = None,
        conditions: list[KubeObject] | None = None, uid: str | None = None) -> KubeObject:
    """A Job as the dispatcher renders it (identity in labels and annotations)."""
    job_name = name or f"{job_id}-a{attempt}"
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": job_name, "namespace": namespace, "uid": uid or f"uid-{job_name}", "resourceVersion": "1",
            "labels": {"muster.dev/job-id": job_id, "muster.dev/attempt": str(attempt)},
            "annotations": {"muster.dev/job-id": job_id, "muster.dev/attempt": str(attempt),
                            "muster.dev/gang-size": str(gang), **(annotations or {})},
        },
        "spec": {"completionMode": "Indexed", "completions": gang, "parallelism": gang, "backoffLimit": 0},
        "status": {"conditions": conditions or []},
    }


def complete() -> list[KubeObject]:
    return [{"type": "Complete", "status": "True", "reason": "CompletionsReached"}]


def pod(owner: KubeObject, index: int, phase: str = "Pending", *, node: str | None = "east-a100-0",
        ready: bool | None = None, exit_code: int | None = None, reason: str | None = None,
        gpus: int = 4) -> KubeObject:
    """A pod of ``owner`` at ``index`` in ``phase`` (Running pods are Ready unless ``ready`` says otherwise)."""
    meta = owner["metadata"]
    status: KubeObject = {"phase": phase, "conditions": []}
    if phase == "Running":
        status["conditions"].append({"type": "Ready", "status": "True" if ready is not False else "False"})
        status["containerStatuses"] = [{"name": "main", "state": {"running": {"startedAt": "2026-11-01T12:00:00Z"}}}]
    if phase in ("Succeeded", "Failed"):
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        status["containerStatuses"] = [{"name": "main", "state": {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "finishedAt": f"2026-11-01T12:0{index}:00Z"}}}]
    if reason:
        status["reason"] = reason
        status["conditions"].append({"type": "DisruptionTarget", "status": "True"})
    spec: KubeObject = {"containers": [{"name": "main", "image": "busybox",
                                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{index}-abcd{index}", "namespace": meta["namespace"],
            "uid": f"pod-uid-{meta['name']}-{index}", "resourceVersion": "1",
            "labels": dict(meta["labels"]),
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True}],
        },
        "spec": spec,
        "status": status,
    }
