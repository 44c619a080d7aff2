"""Builders of the chaos tests: logged events of the wire types, and pod lifetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
from schemas.envelope import Message, make_envelope
from schemas.runs import JobStopped
from schemas.status import JobStatusChanged
from schemas.topics import DECISIONS_TOPIC, DISPATCHES_TOPIC, STATUS_TOPIC
from services.chaos.eventlog import LoggedEvent
from services.chaos.pods import PodLife
from tests.builders.jobspecs import job_spec

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOPIC_OF = {JobAdmitted: DECISIONS_TOPIC, JobStatusChanged: STATUS_TOPIC, JobStopped: DISPATCHES_TOPIC}


class Log:
    """Events appended at increasing times (one second apart) and offsets."""

    def __init__(self) -> None:
        self.events: list[LoggedEvent] = []

    def add(self, message: Message) -> Log:
        at = T0 + timedelta(seconds=len(self.events))
        envelope = make_envelope(message, "test", occurred_at=at)
        self.events.append(LoggedEvent(TOPIC_OF[type(message)], 0, len(self.events), envelope))
        return self


def admitted(job_id: str, attempt: int = 0, *, node: str = "n1", pods: int = 1, gpus: int = 4,
             queue: str = "team-a") -> JobAdmitted:
    spec = job_spec(job_id, queue, replicas=pods, gpus=gpus, gpu_type="a100", image="img:1")
    return JobAdmitted(job_id=job_id, attempt=attempt, tenant=queue, queue=queue, namespace=queue, priority=100,
                       replicas=pods, placement=PlacementPlan(cluster="c", nodes=[NodePods(node=node, pods=pods)]),
                       spec=spec)


def status(job_id: str, state: str, attempt: int = 0) -> JobStatusChanged:
    return JobStatusChanged(job_id=job_id, tenant="team-a", queue="team-a", name=job_id, state=state,
                            attempt=attempt, priority_class="normal", replicas=1, gpus=4, submitted_at=T0,
                            updated_at=T0)


def stopped(job_id: str, attempt: int = 0) -> JobStopped:
    return JobStopped(job_id=job_id, attempt=attempt, cluster="c", observed_at=T0, reason="higher_priority",
                      requeue=True)


def pod(job_id: str, owner: str, *, attempt: int = 0, node: str = "n1", gpus: int = 4, start: float = 0.0,
        end: float | None = None) -> PodLife:
    return PodLife("team-a", f"{owner}-{start:g}", job_id, attempt, owner, gpus, node=node, bound_at=start,
                   running_at=start, ended_at=end, phase="Running" if end is None else "Succeeded")
