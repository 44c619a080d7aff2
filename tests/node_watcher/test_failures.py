"""Classifying failed pods (job vs infrastructure) and what a classified failure reports."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from schemas.runs import RunEvicted, RunFailed
from services.node_watcher.failures import classify_pod_failure
from services.node_watcher.metrics import WatcherMetrics
from services.node_watcher.runs import observe
from services.node_watcher.tracker import NodeTracker, RunTracker
from tests.node_watcher.builders import CLUSTER, NOW, example_node, job, not_ready, pod

KubeObject = dict[str, Any]


def failed_pod(*, reason: str | None = None, container_reason: str = "Error", exit_code: int = 1,
               message: str = "", disruption: bool = False, init: bool = False) -> KubeObject:
    terminated = {"exitCode": exit_code, "reason": container_reason, "message": message}
    statuses = [{"name": "main", "state": {"terminated": terminated}}]
    status: KubeObject = {"phase": "Failed", "conditions": []}
    status["initContainerStatuses" if init else "containerStatuses"] = statuses
    if reason:
        status["reason"] = reason
    if disruption:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
    return {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": status}


CLASSIFICATION = [
    # (case, pod, node down, expected)
    ("exit code of its own", failed_pod(exit_code=3), False, "job"),
    ("killed by a signal it caused (SIGSEGV)", failed_pod(exit_code=139), False, "job"),
    ("OOMKilled: asked for too little memory", failed_pod(container_reason="OOMKilled", exit_code=137), False, "job"),
    ("deadline exceeded", failed_pod(reason="DeadlineExceeded"), False, "job"),
    ("a start error of its own (no such executable)",
     failed_pod(container_reason="StartError", exit_code=128, message='exec: "trian.py": not found'), False, "job"),
    ("unknown pod reason", failed_pod(reason="SomethingElse"), False, "job"),
    ("evicted", failed_pod(reason="Evicted"), False, "infrastructure"),
    ("node lost", failed_pod(reason="NodeLost", exit_code=137), False, "infrastructure"),
    ("node shut down", failed_pod(reason="NodeShutdown"), False, "infrastructure"),
    ("terminated by the kubelet", failed_pod(reason="TerminationByKubelet"), False, "infrastructure"),
    ("device plugin could not allocate",
     failed_pod(reason="UnexpectedAdmissionError", message="Allocate failed due to no healthy devices"),
     False, "infrastructure"),
    ("kubelet out of GPUs", failed_pod(reason="OutOfnvidia.com/gpu"), False, "infrastructure"),
    ("kubelet out of memory", failed_pod(reason="OutOfmemory"), False, "infrastructure"),
    ("disruption target condition", failed_pod(disruption=True), False, "infrastructure"),
    ("container lost by the kubelet", failed_pod(container_reason="ContainerStatusUnknown", exit_code=137),
     False, "infrastructure"),
    ("GPU runtime hook failed to start the container",
     failed_pod(container_reason="StartError", exit_code=128,
                message="nvidia-container-cli: initialization error: nvml error: driver not loaded"),
     False, "infrastructure"),
    ("init container hit the GPU stack",
     failed_pod(container_reason="ContainerCannotRun", message="could not select device driver with GPU", init=True),
     False, "infrastructure"),
    ("exit code while its node was NotReady or deleted", failed_pod(exit_code=1), True, "infrastructure"),
]


@pytest.mark.parametrize(("pod_obj", "down", "expected"), [c[1:] for c in CLASSIFICATION],
                         ids=[c[0] for c in CLASSIFICATION])
def test_classification(pod_obj: KubeObject, down: bool, expected: str) -> None:
    assert classify_pod_failure(pod_obj, node_down=down) == expected


def with_status(p: KubeObject, **status: str) -> KubeObject:
    p["status"].update(status)
    return p


def failures(result: list[Any]) -> list[RunFailed]:
    return [o.message for o in result if isinstance(o.message, RunFailed)]


def test_an_exit_code_is_a_job_failure_that_blames_no_node() -> None:
    owner = job(gang=2)
    [failed] = failures(observe(owner, [pod(owner, 0, "Running"), pod(owner, 1, "Failed", exit_code=3)], CLUSTER,
                                NOW))
    assert (failed.classification, failed.nodes, failed.exit_code) == ("job", [], 3)


def test_an_admission_error_blames_its_node_not_the_peers_that_failed_after_it() -> None:
    owner = job(gang=3)
    bad = with_status(pod(owner, 0, "Failed", exit_code=1, node="east-a100-1"), reason="UnexpectedAdmissionError",
                      message="Allocate failed due to device plugin GetPreferredAllocation error")
    collateral = pod(owner, 1, "Failed", exit_code=1, node="east-a100-0")  # NCCL lost its peer
    [failed] = failures(observe(owner, [collateral, bad, pod(owner, 2, "Running", node="east-a100-2")], CLUSTER,
                                NOW))
    assert failed.classification == "infrastructure"
    assert failed.nodes == ["east-a100-1"]
    assert (failed.reason, failed.pod) == ("UnexpectedAdmissionError", bad["metadata"]["name"])
    assert failed.message.startswith("Allocate failed")


def test_an_eviction_is_still_reported_as_an_eviction_with_its_node() -> None:
    owner = job(gang=1)
    result = observe(owner, [pod(owner, 0, "Failed", reason="Evicted", node="east-a100-3")], CLUSTER, NOW)
    [evicted] = [o.message for o in result if isinstance(o.message, RunEvicted)]
    assert (evicted.reason, evicted.node) == ("Evicted", "east-a100-3")


def test_the_tracker_blames_a_failure_on_a_node_that_is_not_ready_or_gone() -> None:
    nodes = NodeTracker(CLUSTER)
    runs = RunTracker(CLUSTER, node_down=nodes.down)
    nodes.on_node("ADDED", not_ready(example_node("east-a100-0")), NOW)
    nodes.on_node("ADDED", example_node("east-a100-1"), NOW)
    assert nodes.down("east-a100-0") and not nodes.down("east-a100-1")
    assert not nodes.down("never-seen") and not nodes.down(None)
    owner = job(gang=1)
    runs.on_job("ADDED", owner, NOW)
    [failed] = runs.on_pod("MODIFIED", pod(owner, 0, "Failed", exit_code=1, node="east-a100-0"), NOW)
    assert isinstance(failed, RunFailed)
    assert (failed.classification, failed.nodes) == ("infrastructure", ["east-a100-0"])
    nodes.on_node("DELETED", example_node("east-a100-1"), NOW)
    assert nodes.down("east-a100-1")
    nodes.on_node("ADDED", example_node("east-a100-1"), NOW)  # the same name back, healthy
    assert not nodes.down("east-a100-1")


def test_metrics_count_failures_by_classification_and_infrastructure_failures_by_node() -> None:
    registry = CollectorRegistry()
    metrics = WatcherMetrics(registry, CLUSTER)
    base = {"job_id": "j", "attempt": 0, "cluster": CLUSTER, "observed_at": NOW}
    metrics.sent(RunFailed(**base, reason="Error", exit_code=1))
    metrics.sent(RunFailed(**base, reason="UnexpectedAdmissionError", classification="infrastructure",
                           nodes=["east-a100-1"]))
    metrics.sent(RunEvicted(**base, reason="NodeLost", node="east-a100-1"))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"cluster": CLUSTER, **labels})

    assert value("muster_node_watcher_run_failures_total", classification="job") == 1
    assert value("muster_node_watcher_run_failures_total", classification="infrastructure") == 2
    assert value("muster_node_watcher_node_failures_total", node="east-a100-1") == 2
