"""What each kind's status says: running, succeeded, failed or nothing yet, with the controller's reason.
Field names and values as jobset v0.10.1, trainer v2.0.0, kuberay v1.5.0 and lws v0.7.0 write them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from services.spec.kinds import GroupIncomplete, State, kind_of
from tests.unit.kinds.builders import ROOT, example


def _with(name: str, status: dict[str, Any], suspend: bool | None = False) -> dict[str, Any]:
    obj = example(name)
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    obj["status"] = status
    return obj


def _cond(kind: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2025-06-01T10:00:00Z"}


def _group(*phases: str) -> dict[str, Any]:
    obj = example("pod-group.yaml")
    for p, phase in zip(obj["items"], phases, strict=True):
        p["status"] = {"phase": phase}
    return obj


def _job(status: dict[str, Any], suspend: bool = False) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "jobs" / "kube-job.yaml").read_text(encoding="utf-8"))
    job["spec"]["suspend"] = suspend
    job["status"] = status
    return job


CASES: list[tuple[str, dict[str, Any], State]] = [
    # JobSet
    ("jobset suspended", _with("jobset.yaml", {"conditions": [_cond("Suspended", reason="SuspendedJobs")]}, True),
     State(None, "suspended")),
    ("jobset starting", _with("jobset.yaml", {"replicatedJobsStatus": [
        {"name": "workers", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}]}),
     State(None, "no Job active yet")),
    ("jobset running", _with("jobset.yaml", {"replicatedJobsStatus": [
        {"name": "coordinator", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
        {"name": "workers", "ready": 0, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}]}),
     State("running", "3 Jobs active")),
    ("jobset completed", _with("jobset.yaml", {"terminalState": "Completed", "conditions": [
        _cond("Completed", reason="AllJobsCompleted", message="jobset completed successfully")]}),
     State("succeeded", "AllJobsCompleted: jobset completed successfully")),
    ("jobset failed", _with("jobset.yaml", {"terminalState": "Failed", "conditions": [
        _cond("Failed", reason="ReachedMaxRestarts", message="jobset failed due to reaching max number of restarts")]}),
     State("failed", "ReachedMaxRestarts: jobset failed due to reaching max number of restarts")),
    ("jobset condition not true", _with("jobset.yaml", {"conditions": [_cond("Failed", "False")]}),
     State(None, "no Job active yet")),
    # TrainJob
    ("trainjob suspended", _with("trainjob.yaml", {"conditions": [
        _cond("Suspended", reason="Suspended", message="TrainJob is suspended")]}, True), State(None, "suspended")),
    ("trainjob resumed", _with("trainjob.yaml", {"conditions": [
        _cond("Suspended", "False", reason="Resumed", message="TrainJob is resumed")]}),
     State("running", "not suspended (trainer v2.0 reports no progress of its jobs)")),
    ("trainjob jobs active (trainer 2.1)", _with("trainjob.yaml", {"jobsStatus": [
        {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}]}),
     State("running", "2 Jobs active")),
    ("trainjob complete", _with("trainjob.yaml", {"conditions": [
        _cond("Complete", reason="JobSetCompleted", message="jobset completed successfully")]}),
     State("succeeded", "JobSetCompleted: jobset completed successfully")),
    ("trainjob failed", _with("trainjob.yaml", {"conditions": [
        _cond("Failed", reason="TrainingRuntimeNotSupported", message="runtime not supported")]}),
     State("failed", "TrainingRuntimeNotSupported: runtime not supported")),
    # RayJob
    ("rayjob new", _with("rayjob.yaml", {}), State(None, "new")),
    ("rayjob suspended", _with("rayjob.yaml", {"jobDeploymentStatus": "Suspended"}, True), State(None, "Suspended")),
    ("rayjob suspending", _with("rayjob.yaml", {"jobDeploymentStatus": "Suspending"}), State(None, "Suspending")),
    ("rayjob initializing", _with("rayjob.yaml", {"jobDeploymentStatus": "Initializing"}),
     State("running", "Initializing")),
    ("rayjob running", _with("rayjob.yaml", {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}),
     State("running", "Running, Ray job RUNNING")),
    ("rayjob waiting", _with("rayjob.yaml", {"jobDeploymentStatus": "Waiting"}), State("running", "Waiting")),
    ("rayjob retrying", _with("rayjob.yaml", {"jobDeploymentStatus": "Retrying", "jobStatus": "FAILED"}),
     State("running", "Retrying, Ray job FAILED")),
    ("rayjob complete", _with("rayjob.yaml", {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}),
     State("succeeded", "Ray job SUCCEEDED")),
    ("rayjob stopped", _with("rayjob.yaml", {"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}),
     State("failed", "Ray job STOPPED")),
    ("rayjob app failed", _with("rayjob.yaml", {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED",
                                                "reason": "AppFailed", "message": "exit code 1"}),
     State("failed", "AppFailed: exit code 1")),
    ("rayjob deadline", _with("rayjob.yaml", {"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}),
     State("failed", "DeadlineExceeded")),
    ("rayjob invalid", _with("rayjob.yaml", {"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed",
                                             "message": "The RayJob spec is invalid"}),
     State("failed", "ValidationFailed: The RayJob spec is invalid")),
    # RayCluster never ends
    ("raycluster suspended", _with("raycluster.yaml", {"state": "suspended"}, True), State(None, "suspended")),
    ("raycluster ready", _with("raycluster.yaml", {"state": "ready"}), State("running", "ready")),
    ("raycluster provisioning", _with("raycluster.yaml", {}), State(None, "not ready yet")),
    # LeaderWorkerSet, Deployment, StatefulSet never end
    ("lws available", _with("leaderworkerset.yaml", {"conditions": [
        _cond("Available", reason="AllGroupsReady", message="All replicas are ready")], "readyReplicas": 2}, None),
     State("running", "AllGroupsReady: All replicas are ready")),
    ("lws progressing", _with("leaderworkerset.yaml", {"conditions": [
        _cond("Progressing", reason="GroupsProgressing")]}, None), State(None, "not available")),
    ("deployment available", _with("deployment.yaml", {"conditions": [
        _cond("Available", reason="MinimumReplicasAvailable", message="Deployment has minimum availability.")]},
        None), State("running", "MinimumReplicasAvailable: Deployment has minimum availability.")),
    ("deployment gated", _with("deployment.yaml", {"replicas": 2, "unavailableReplicas": 2}, None),
     State(None, "not available")),
    ("statefulset ready", _with("notebook-statefulset.yaml", {"replicas": 1, "readyReplicas": 1}, None),
     State("running", "1 pods ready")),
    ("statefulset not ready", _with("notebook-statefulset.yaml", {"replicas": 1}, None), State(None, "no pod ready")),
    # pod groups
    ("pod group pending", _group("Pending", "Pending", "Pending"), State(None, "no pod running")),
    ("pod group running", _group("Running", "Running", "Pending"), State("running", "2 pods running, 0 succeeded")),
    ("pod group succeeded", _group("Succeeded", "Succeeded", "Succeeded"), State("succeeded", "all 3 pods succeeded")),
    ("pod group failed", _group("Succeeded", "Failed", "Running"), State("failed", "pod mpi-worker-0 failed")),
    # batch/v1 Job
    ("job running", _job({"active": 2}), State("running", "2 pods active")),
    ("job complete", _job({"conditions": [_cond("Complete")]}), State("succeeded", "Complete")),
    ("job failed", _job({"conditions": [_cond("Failed", reason="BackoffLimitExceeded",
                                              message="Job has reached the specified backoff limit")]}),
     State("failed", "BackoffLimitExceeded: Job has reached the specified backoff limit")),
    ("job suspended", _job({}, suspend=True), State(None, "suspended")),
]


@pytest.mark.parametrize(("obj", "state"), [(o, s) for _, o, s in CASES], ids=[c[0] for c in CASES])
def test_state(obj: dict[str, Any], state: State) -> None:
    assert kind_of(obj).state(obj) == state


@pytest.mark.parametrize("name", ["raycluster.yaml", "leaderworkerset.yaml", "deployment.yaml",
                                  "notebook-statefulset.yaml"])
def test_serving_kinds_never_end(name: str) -> None:
    assert kind_of(example(name)).serving


def test_a_pod_being_deleted_leaves_its_group() -> None:
    obj = _group("Running", "Running", "Running")
    obj["items"][2]["metadata"]["deletionTimestamp"] = "2025-06-01T10:00:00Z"
    kind = kind_of(obj)
    assert kind.state(obj) == State("running", "2 pods running, 0 succeeded")
    with pytest.raises(GroupIncomplete, match="has 2 of its 3 pods"):
        kind.roles(obj)
