"""Run observations of workload objects and the pods Muster released (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.kube import ATTEMPT, DELETED_BY, GANG_SIZE, IDLE_TIMEOUT, JOB_ID, PREEMPT_REQUESTED, ROLE, WORKLOAD
from schemas.runs import RunAllPodsReady, RunDeleted, RunFailed, RunIdle, RunResized, RunStarted
from services.node_watcher.gpu_metrics import exporter_urls, merged, parse_selector, pod_utilisation
from services.node_watcher.workloads import WorkloadTracker
from services.spec.kinds import kind_for

NOW = datetime(2026, 11, 26, tzinfo=UTC)
JOBSET = kind_for("jobset.x-k8s.io/v1alpha2", "JobSet")


def jobset(attempt: int = 0, *, conditions: list[dict[str, str]] | None = None, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "team-a", "labels": {JOB_ID: "j1", ATTEMPT: str(attempt)},
                         "annotations": {JOB_ID: "j1", ATTEMPT: str(attempt), GANG_SIZE: "3", WORKLOAD: "JobSet/train",
                                         **annotations}},
            "spec": {"replicatedJobs": []}, "status": {"conditions": conditions or []}}


def pod(name: str, phase: str, *, ready: bool = False, attempt: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "uid": name,
                         "labels": {JOB_ID: "j1", ATTEMPT: str(attempt), ROLE: "workers"}},
            "spec": {"nodeName": "n1"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def kinds(messages: list[Any]) -> list[str]:
    return [type(m).__name__ for m in messages]


def test_a_released_object_starts_becomes_ready_and_succeeds() -> None:
    t = WorkloadTracker("east")
    assert t.on_object(JOBSET, "ADDED", jobset(), NOW) == []
    assert kinds(t.on_pod("ADDED", pod("p1", "Running"), NOW)) == ["RunStarted"]
    t.on_pod("MODIFIED", pod("p1", "Running", ready=True), NOW)
    t.on_pod("ADDED", pod("p2", "Running", ready=True), NOW)
    out = t.on_pod("ADDED", pod("p3", "Running", ready=True), NOW)
    assert kinds(out) == ["RunAllPodsReady"]
    assert isinstance(out[0], RunAllPodsReady) and out[0].pods_total == 3 and len(out[0].pods) == 3
    done = jobset(conditions=[{"type": "Completed", "status": "True"}])
    assert kinds(t.on_object(JOBSET, "MODIFIED", done, NOW)) == ["RunSucceeded"]
    assert t.on_object(JOBSET, "MODIFIED", done, NOW) == []  # once


def test_a_failure_is_reported_unless_muster_is_stopping_it() -> None:
    failed = [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "job w-0 failed"}]
    t = WorkloadTracker("east")
    (msg,) = t.on_object(JOBSET, "MODIFIED", jobset(conditions=failed), NOW)
    assert isinstance(msg, RunFailed) and msg.reason == "FailedJobs" and "w-0 failed" in msg.message
    stopping = WorkloadTracker("east")
    assert stopping.on_object(JOBSET, "MODIFIED", jobset(conditions=failed, **{PREEMPT_REQUESTED: "t"}), NOW) == []


def test_a_later_attempt_of_the_same_object_is_observed_afresh() -> None:
    t = WorkloadTracker("east")
    t.on_object(JOBSET, "ADDED", jobset(0), NOW)
    assert kinds(t.on_pod("ADDED", pod("p1", "Running"), NOW)) == ["RunStarted"]
    t.on_object(JOBSET, "MODIFIED", jobset(1), NOW)
    assert t.on_pod("MODIFIED", pod("p1", "Running"), NOW) == []  # a pod of attempt 0 says nothing of 1
    (started,) = t.on_pod("ADDED", pod("q1", "Running", attempt=1), NOW)
    assert isinstance(started, RunStarted) and started.attempt == 1


def test_deletion_says_who_deleted() -> None:
    t = WorkloadTracker("east")
    t.on_object(JOBSET, "ADDED", jobset(), NOW)
    (gone,) = t.on_object(JOBSET, "DELETED", jobset(**{DELETED_BY: "muster"}), NOW)
    assert isinstance(gone, RunDeleted) and gone.by == "muster"
    (user,) = WorkloadTracker("east").on_object(JOBSET, "DELETED", jobset(), NOW)
    assert isinstance(user, RunDeleted) and user.by == "external"


def test_pods_of_muster_jobs_without_a_role_are_not_workload_pods() -> None:
    p = pod("p1", "Running")
    del p["metadata"]["labels"][ROLE]
    t = WorkloadTracker("east")
    t.on_object(JOBSET, "ADDED", jobset(), NOW)
    assert t.on_pod("ADDED", p, NOW) == []


def test_an_object_its_controller_made_from_the_jobs_object_is_not_the_job() -> None:
    """KubeRay copies a RayJob's labels and annotations onto its RayCluster: that is not the job's object."""
    copied = jobset()
    copied["metadata"]["name"] = "train-raycluster-x7"
    t = WorkloadTracker("east")
    assert t.on_object(JOBSET, "ADDED", copied, NOW) == []
    assert t.on_object(JOBSET, "DELETED", copied, NOW) == []


DEPLOYMENT = kind_for("apps/v1", "Deployment")


def deployment(replicas: int, admitted: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a", "labels": {JOB_ID: "j1", ATTEMPT: "0"},
                         "annotations": {JOB_ID: "j1", ATTEMPT: "0", GANG_SIZE: str(admitted),
                                         WORKLOAD: "Deployment/web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
            "status": {}}


def web_pod(name: str, node: str, *, going: bool = False) -> dict[str, Any]:
    p = pod(name, "Running", ready=True)
    p["spec"]["nodeName"] = node
    if going:
        p["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    return p


def test_a_serving_object_scaled_up_is_reported_at_once_and_once() -> None:
    t = WorkloadTracker("east")
    t.on_object(DEPLOYMENT, "ADDED", deployment(2, 2), NOW)
    t.on_pod("ADDED", web_pod("a", "n1"), NOW)
    t.on_pod("ADDED", web_pod("b", "n2"), NOW)
    (up,) = [m for m in t.on_object(DEPLOYMENT, "MODIFIED", deployment(4, 2), NOW) if isinstance(m, RunResized)]
    assert up.replicas == 4 and sorted(p.node for p in up.pods) == ["n1", "n2"]
    assert not [m for m in t.on_object(DEPLOYMENT, "MODIFIED", deployment(4, 2), NOW) if isinstance(m, RunResized)]
    assert t.on_object(DEPLOYMENT, "MODIFIED", deployment(4, 4), NOW) == []  # grown: nothing to say


def test_a_serving_object_scaled_down_is_reported_once_its_pods_have_gone() -> None:
    t = WorkloadTracker("east")
    t.on_object(DEPLOYMENT, "ADDED", deployment(3, 3), NOW)
    for name, node in (("a", "n1"), ("b", "n2"), ("c", "n3")):
        t.on_pod("ADDED", web_pod(name, node), NOW)
    assert not [m for m in t.on_object(DEPLOYMENT, "MODIFIED", deployment(1, 3), NOW) if isinstance(m, RunResized)]
    assert t.on_pod("MODIFIED", web_pod("a", "n1", going=True), NOW) == []  # two pods still hold their nodes
    (down,) = t.on_pod("MODIFIED", web_pod("c", "n3", going=True), NOW)
    assert isinstance(down, RunResized) and down.replicas == 1 and [p.node for p in down.pods] == ["n2"]
    # scaled back up later: told again
    t.on_object(DEPLOYMENT, "MODIFIED", deployment(1, 1), NOW)
    (again,) = [m for m in t.on_object(DEPLOYMENT, "MODIFIED", deployment(3, 1), NOW) if isinstance(m, RunResized)]
    assert again.replicas == 3


def test_a_serving_object_being_stopped_or_scaled_to_zero_is_not_resized() -> None:
    t = WorkloadTracker("east")
    stopping = deployment(4, 2)
    stopping["metadata"]["annotations"][PREEMPT_REQUESTED] = "t"
    assert not [m for m in t.on_object(DEPLOYMENT, "MODIFIED", stopping, NOW) if isinstance(m, RunResized)]
    assert not [m for m in t.on_object(DEPLOYMENT, "MODIFIED", deployment(0, 2), NOW) if isinstance(m, RunResized)]


def notebook(timeout: str | None = "60", *, stopping: bool = False) -> dict[str, Any]:
    obj = deployment(1, 1)
    obj["kind"], obj["metadata"]["name"] = "StatefulSet", "nb"
    obj["metadata"]["annotations"][WORKLOAD] = "StatefulSet/nb"
    if timeout is not None:
        obj["metadata"]["annotations"][IDLE_TIMEOUT] = timeout
    if stopping:
        obj["metadata"]["annotations"][PREEMPT_REQUESTED] = "t"
    return obj


STATEFULSET = kind_for("apps/v1", "StatefulSet")
GPU_TEXT = """# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",pod="nb-0",namespace="team-a",container="lab"} %s
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",pod="nb-0",namespace="team-a",container="lab"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c"} 88
"""


def test_gpu_utilisation_per_pod_is_its_busiest_gpu_and_unheld_gpus_are_skipped() -> None:
    assert pod_utilisation(GPU_TEXT % "12") == {("team-a", "nb-0"): 12.0}
    scraped = 'DCGM_FI_DEV_GPU_UTIL{exported_pod="p",exported_namespace="ns"} 3\n'
    assert merged([pod_utilisation(scraped), {("ns", "p"): 7.0}]) == {("ns", "p"): 7.0}


def test_a_session_whose_gpus_stay_idle_for_its_timeout_is_reported_idle_once() -> None:
    t = WorkloadTracker("east")
    t.on_object(STATEFULSET, "ADDED", notebook("60"), NOW)
    t.on_pod("ADDED", web_pod("nb-0", "n1"), NOW)
    busy = pod_utilisation(GPU_TEXT % "40")
    quiet = pod_utilisation(GPU_TEXT % "0")
    assert t.on_gpu_samples(busy, NOW) == []
    assert t.on_gpu_samples(quiet, NOW + timedelta(seconds=10)) == []  # idle from here
    assert t.on_gpu_samples(quiet, NOW + timedelta(seconds=60)) == []  # 50 s: not yet
    (idle,) = t.on_gpu_samples(quiet, NOW + timedelta(seconds=70))
    assert isinstance(idle, RunIdle) and idle.idle_since == NOW + timedelta(seconds=10) and idle.pods == 1
    assert t.on_gpu_samples(quiet, NOW + timedelta(seconds=80)) == []  # told once
    # busy again, then idle again: a new idle period, told again after the timeout
    t.on_gpu_samples(busy, NOW + timedelta(seconds=90))
    t.on_gpu_samples(quiet, NOW + timedelta(seconds=100))
    assert len(t.on_gpu_samples(quiet, NOW + timedelta(seconds=160))) == 1


def test_no_signal_no_timeout_or_stopping_is_never_idle() -> None:
    quiet = pod_utilisation(GPU_TEXT % "0")
    later = NOW + timedelta(hours=1)
    unmeasured = WorkloadTracker("east")  # its pod is not in the exporter's answer
    unmeasured.on_object(STATEFULSET, "ADDED", notebook("60"), NOW)
    unmeasured.on_pod("ADDED", web_pod("other-0", "n1"), NOW)
    assert unmeasured.on_gpu_samples(quiet, NOW) == [] and unmeasured.on_gpu_samples(quiet, later) == []
    for obj in (notebook(None), notebook("60", stopping=True)):
        t = WorkloadTracker("east")
        t.on_object(STATEFULSET, "ADDED", obj, NOW)
        t.on_pod("ADDED", web_pod("nb-0", "n1"), NOW)
        assert t.on_gpu_samples(quiet, NOW) == [] and t.on_gpu_samples(quiet, later) == []


def test_the_exporters_a_selector_picks_are_read_at_their_pod_ip() -> None:
    def exporter(name: str, ip: str | None, phase: str = "Running", app: str = "dcgm-exporter") -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "gpu-operator", "labels": {"app": app}},
                "status": {"phase": phase, "podIP": ip}}

    pods = [exporter("b", "10.0.0.2"), exporter("a", "fd00::1"), exporter("c", None, "Pending"),
            exporter("d", "10.0.0.4", app="other")]
    selector = parse_selector("app=dcgm-exporter")
    assert exporter_urls(pods, selector, 9400) == ["http://[fd00::1]:9400/metrics", "http://10.0.0.2:9400/metrics"]
    assert exporter_urls(pods, {}, 9400) == []
    assert parse_selector(" a=b , c=d ") == {"a": "b", "c": "d"}
    for bad in ("app", "app!=x"):
        try:
            parse_selector(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} accepted")
