"""An interactive session (a notebook StatefulSet with an idle timeout) released when its GPUs are idle."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import yaml

from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.intents import ResumeJob, SubmitJob, SuspendJob
from schemas.runs import JobStopped, RunIdle, RunStarted
from schemas.status import JobStatusChanged
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import QueueState
from services.queue_manager.status import build_status
from services.spec.workload_spec import spec_from_workload
from tests.queue_manager.builders import NOW, T0, folded_state, of_type, run_fields

CFG = SchedulerConfig(min_runtime_s=0.0)
EXAMPLE = Path(__file__).parents[2] / "examples" / "kube" / "notebook-statefulset.yaml"


def notebook(job_id: str, idle_timeout: str | None = "30m") -> SubmitJob:
    obj = yaml.safe_load(EXAMPLE.read_text())
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations.pop("muster.dev/idle-timeout", None)
    if idle_timeout is not None:
        annotations["muster.dev/idle-timeout"] = idle_timeout
    spec = spec_from_workload(obj, kube_native=True)
    return SubmitJob(job_id=job_id, tenant="team-a", user="alice", spec=spec, submitted_at=T0)


def feed(qs: QueueState, msg: object, now: float = NOW) -> list:
    return on_input(qs, msg, uuid.uuid4().hex, now)  # type: ignore[arg-type]


def idle(job_id: str, attempt: int = 0) -> RunIdle:
    return RunIdle(**run_fields(job_id, attempt), idle_since=T0 - timedelta(minutes=31), pods=1)


def running(qs: QueueState, job_id: str, **kw: str | None) -> None:
    feed(qs, notebook(job_id, **kw))
    assert of_type(run_cycle(qs, NOW, CFG).decisions, JobAdmitted)
    feed(qs, RunStarted(**run_fields(job_id), pods_running=1, pods_total=1))


def test_the_idle_timeout_comes_from_the_objects_annotation() -> None:
    assert notebook("nb").spec.idle_timeout_s == 1800
    assert notebook("nb", None).spec.idle_timeout_s is None


def test_an_idle_session_is_released_then_suspended_until_resumed() -> None:
    qs = folded_state()
    running(qs, "nb")
    (stop,) = of_type(feed(qs, idle("nb")), JobPreemptionRequested)
    assert (stop.reason, stop.requeue) == ("idle", True)
    assert qs.jobs["nb"].state == "preempting" and "idle" in qs.jobs["nb"].message
    assert not of_type(feed(qs, idle("nb")), JobPreemptionRequested)  # being released already: asked once
    feed(qs, JobStopped(**run_fields("nb"), reason="idle", requeue=True))
    entry = qs.jobs["nb"]
    assert (entry.state, entry.reason, entry.attempt) == ("suspended", "idle", 1)
    assert "muster resume nb" in entry.message
    assert qs.sched.free_gpus("east-a100-0") == 8  # its GPUs are free
    assert not of_type(run_cycle(qs, NOW + 1, CFG).decisions, JobAdmitted)  # it waits for its owner
    feed(qs, ResumeJob(job_id="nb", requested_by="alice"))
    (again,) = of_type(run_cycle(qs, NOW + 2, CFG).decisions, JobAdmitted)
    assert again.attempt == 1


def test_a_released_session_keeps_saying_why_and_how_to_resume_it_after_cycles() -> None:
    """The core lists a suspended job as merely "suspended"; its status keeps the queue manager's reason."""
    qs = folded_state()
    running(qs, "nb")
    feed(qs, idle("nb"))
    feed(qs, JobStopped(**run_fields("nb"), reason="idle", requeue=True))
    for t in (NOW + 1, NOW + 60):
        statuses = of_type(run_cycle(qs, t, CFG).statuses, JobStatusChanged)
        assert not statuses or statuses[-1].reason == "idle"
    last = build_status(qs.jobs["nb"], NOW + 61)
    assert (last.state, last.reason, last.position, last.estimated_start) == ("suspended", "idle", None, None)
    assert "muster resume nb" in last.message
    feed(qs, SuspendJob(job_id="other", requested_by="bob"))  # unknown: nothing
    feed(qs, notebook("waiting"))
    feed(qs, SuspendJob(job_id="waiting", requested_by="bob"))
    run_cycle(qs, NOW + 62, CFG)
    held = build_status(qs.jobs["waiting"], NOW + 62)
    assert (held.state, held.reason, held.message) == ("suspended", "suspended", "suspended by bob")


def test_a_job_without_an_idle_timeout_or_not_running_is_not_released() -> None:
    qs = folded_state()
    running(qs, "nb", idle_timeout=None)
    assert not of_type(feed(qs, idle("nb")), JobPreemptionRequested)
    feed(qs, notebook("waiting"))  # no room left: it waits
    assert not of_type(feed(qs, idle("waiting")), JobPreemptionRequested)
    assert qs.jobs["waiting"].state == "pending"
