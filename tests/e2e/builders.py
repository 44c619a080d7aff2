"""Builders of the end-to-end tests: cluster files, tokens, job specs the gateway accepts."""

from __future__ import annotations

from typing import Any

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    MusterConfig,
    NodeGroupConfig,
    PriorityClassConfig,
    QueueConfig,
    ResourceQuotaConfig,
    TenantConfig,
    TopologyConfig,
)
from services.kubesim.kubelet import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION

TENANTS = ("team-a", "team-b")
ADMIN_TOKEN = "e2e-admin-token"


def member_token(tenant: str) -> str:
    return f"e2e-member-token-{tenant}"


def tokens(tenants: tuple[str, ...] = TENANTS) -> list[dict[str, str]]:
    """The gateway's tokens file: one administrator and one member per tenant."""
    entries = [{"token": ADMIN_TOKEN, "tenant": "platform", "user": "root", "role": "admin"}]
    entries += [{"token": member_token(t), "tenant": t, "user": f"user-{t}", "role": "member"} for t in tenants]
    return entries


def gpu_cluster(name: str = "east", *, nodes: int = 2, gpus_per_node: int = 8, gpu_type: str = "a100",
                labels: dict[str, str] | None = None) -> ClusterConfig:
    """One cluster of ``nodes`` identical GPU nodes in one rack."""
    return ClusterConfig(name=name, node_groups=[NodeGroupConfig(
        name=gpu_type, count=nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type, cpu=64, memory_gb=512,
        topology=TopologyConfig(zone=f"{name}-z", block="b0", racks=1), labels=dict(labels or {}),
        taints=["nvidia.com/gpu"],
    )])


def muster_config(clusters: list[ClusterConfig], *, nominal: int, borrowing_limit: int | None = None,
                  gpu_type: str = "a100") -> MusterConfig:
    """Two tenants, each with its own queue in cohort ``research`` and ``nominal`` GPUs of ``gpu_type``."""
    quota = ResourceQuotaConfig(nominal=nominal, borrowing_limit=borrowing_limit)
    return MusterConfig(
        clusters=clusters,
        cohorts=[CohortConfig(name="research")],
        queues=[QueueConfig(name=t, cohort="research", tenant=t, quotas={f"gpu:{gpu_type}": quota})
                for t in TENANTS],
        priority_classes=[PriorityClassConfig(name="low", value=10), PriorityClassConfig(name="normal", value=100),
                          PriorityClassConfig(name="high", value=1000)],
        tenants=[TenantConfig(name=t, namespace=t) for t in TENANTS],
    )


def job_spec(name: str, *, queue: str = "team-a", gpus: int = 1, replicas: int = 1, duration_s: float = 1.0,
             priority_class: str = "normal", exit_code: int | None = None, max_restarts: int = 3,
             gpu_type: str = "a100", **extra: Any) -> dict[str, Any]:
    """A job spec (JSON body of ``POST /v1/jobs``) whose pods run ``duration_s`` on kubesim."""
    annotations = {DURATION_ANNOTATION: f"{duration_s:g}"}
    if exit_code is not None:
        annotations[EXIT_CODE_ANNOTATION] = str(exit_code)
    return {
        "name": name,
        "queue": queue,
        "priority_class": priority_class,
        "replicas": replicas,
        "template": {"image": "registry.example/e2e:1", "command": ["sleep"],
                     "resources": {"gpus": gpus, "gpu_type": gpu_type, "cpu": "1", "memory": "1Gi"}},
        "runtime_estimate_s": max(duration_s, 1.0),
        "max_restarts": max_restarts,
        "annotations": annotations,
        **extra,
    }


def suspended_kube_job(name: str, *, namespace: str = "team-a", queue: str = "team-a", gang: int = 2,
                       gpus: int = 4, duration_s: float = 1.0) -> dict[str, Any]:
    """A labelled, suspended ``batch/v1`` Job as ``examples/jobs/kube-job.yaml`` describes one."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"muster.dev/queue": queue},
                     "annotations": {"muster.dev/priority-class": "normal", "muster.dev/runtime-estimate": "1m",
                                     "muster.dev/preemptible": "true"}},
        "spec": {
            "suspend": True,
            "parallelism": gang,
            "completions": gang,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {DURATION_ANNOTATION: f"{duration_s:g}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"muster.dev/gpu-type": "a100"},
                    "containers": [{"name": "trainer", "image": "registry.example/resnet:3.1",
                                    "command": ["python", "sweep.py"],
                                    "resources": {"limits": {"nvidia.com/gpu": gpus},
                                                  "requests": {"cpu": "2", "memory": "8Gi"}}}],
                },
            },
        },
    }
