"""A serving object (a Deployment) scaled by its owner while it runs: ``RunResized`` folded into the queue state."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import yaml

from schemas.decisions import JobAdmitted, JobScaled
from schemas.intents import SubmitJob
from schemas.jobs import JobRecorded
from schemas.runs import PodBound, RunResized, RunStarted
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import QueueState
from services.spec.workload_spec import spec_from_workload
from tests.queue_manager.builders import NOW, T0, folded_state, of_type, run_fields, submit

CFG = SchedulerConfig(min_runtime_s=0.0)
EXAMPLE = Path(__file__).parents[2] / "examples" / "kube" / "deployment.yaml"


def deployment(job_id: str, replicas: int) -> SubmitJob:
    obj = yaml.safe_load(EXAMPLE.read_text())
    obj["spec"]["replicas"] = replicas
    spec = spec_from_workload(obj, kube_native=True)
    return SubmitJob(job_id=job_id, tenant="team-a", user="alice", spec=spec, submitted_at=T0)


def feed(qs: QueueState, msg: object, now: float = NOW) -> list:
    return on_input(qs, msg, uuid.uuid4().hex, now)  # type: ignore[arg-type]


def resized(job_id: str, replicas: int, nodes: list[str] = ()) -> RunResized:  # type: ignore[assignment]
    pods = [PodBound(name=f"{job_id}-{i}", index=i, node=n) for i, n in enumerate(nodes)]
    return RunResized(**run_fields(job_id), replicas=replicas, pods=pods)


def running(qs: QueueState, job_id: str, replicas: int) -> JobAdmitted:
    feed(qs, deployment(job_id, replicas))
    (admitted,) = of_type(run_cycle(qs, NOW, CFG).decisions, JobAdmitted)
    feed(qs, RunStarted(**run_fields(job_id), pods_running=replicas, pods_total=replicas))
    return admitted


def test_scaled_up_the_extra_pods_are_admitted_through_quota_as_room_allows() -> None:
    qs = folded_state(nodes=1, gpus_per_node=8, quota=3)  # 3 GPUs of quota: room for one more pod
    assert running(qs, "web", 2).replicas == 2
    outs = feed(qs, resized("web", 4))
    (record,) = of_type(outs, JobRecorded)
    spec = record.record.submission.spec
    assert (spec.main_replicas, spec.main_min_replicas) == (4, 2)  # it keeps the 2 it runs
    assert not of_type(outs, JobScaled)  # nothing taken yet
    (up,) = of_type(run_cycle(qs, NOW + 1, CFG).decisions, JobScaled)
    assert (up.replicas, up.placement.pods) == (3, 3)  # quota allows one more, not two
    assert qs.jobs["web"].replicas == 3
    assert not of_type(run_cycle(qs, NOW + 2, CFG).decisions, JobScaled)
    assert not of_type(feed(qs, resized("web", 4)), JobRecorded)  # a repeat changes nothing


def test_scaled_down_frees_its_quota_at_once_onto_the_nodes_its_pods_keep() -> None:
    qs = folded_state(nodes=2, gpus_per_node=2, quota=8)
    admitted = running(qs, "web", 4)
    assert sorted((n.node, n.pods) for n in admitted.placement.nodes) == [("east-a100-0", 2), ("east-a100-1", 2)]
    outs = feed(qs, resized("web", 1, ["east-a100-1"]))
    (down,) = of_type(outs, JobScaled)
    assert down.replicas == 1 and [(n.node, n.pods) for n in down.placement.nodes] == [("east-a100-1", 1)]
    assert [type(o.message).__name__ for o in outs][:2] == ["JobRecorded", "JobScaled"]  # record first
    assert qs.sched.free_gpus("east-a100-0") == 2 and qs.sched.free_gpus("east-a100-1") == 1
    assert qs.jobs["web"].spec.main_replicas == 1 and qs.jobs["web"].replicas == 1
    # another job takes the freed GPUs at once
    feed(qs, deployment("api", 2))
    assert of_type(run_cycle(qs, NOW + 1, CFG).decisions, JobAdmitted)


def test_a_resize_of_a_batch_job_or_an_earlier_attempt_is_ignored() -> None:
    qs = folded_state()
    running(qs, "web", 2)
    stale = RunResized(**{**run_fields("web", 1), "observed_at": datetime.now(UTC)}, replicas=4)
    assert not of_type(feed(qs, stale), JobRecorded)
    assert qs.jobs["web"].spec.main_replicas == 2
    feed(qs, submit("batch", gpus=1))
    run_cycle(qs, NOW, CFG)
    assert qs.jobs["batch"].state == "admitted"
    assert not of_type(feed(qs, resized("batch", 3)), JobRecorded)  # Muster's own Jobs are resized by ScaleJob
    assert qs.jobs["batch"].spec.replicas == 1


def test_a_retried_resize_sends_the_jobs_size_again() -> None:
    """The outputs of a ``RunResized`` whose produce failed are sent again on its retry: the record and the
    job's current size, so the accountant and the dispatcher still learn of the shrink."""
    qs = folded_state(nodes=2, gpus_per_node=2, quota=8)
    running(qs, "web", 4)
    msg = resized("web", 1, ["east-a100-1"])
    first = on_input(qs, msg, "ev-1", NOW)
    assert of_type(first, JobScaled)
    again = on_input(qs, msg, "ev-1", NOW, retry=True)
    (scaled,) = of_type(again, JobScaled)
    assert scaled.replicas == 1 and of_type(again, JobRecorded)
    assert on_input(qs, msg, "ev-1", NOW) == []  # a plain repeat: nothing
