"""Preemption through the real broker: the victim is stopped, requeued as its next attempt, and
admitted again once the preemptor has finished."""

from __future__ import annotations

import pytest

from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.intents import CancelJob
from schemas.jobs import JobRecorded
from schemas.runs import JobStopped, RunStarted, RunSucceeded
from schemas.status import JobStatusChanged
from schemas.topics import DECISIONS_TOPIC, JOBS_TOPIC, STATUS_TOPIC
from services.core import SchedulerConfig
from services.runtime.kafka import KafkaSettings
from tests.queue_manager.builders import config_messages, node, run_fields, submit
from tests.queue_manager.live import Tail, publish, running_service

pytestmark = pytest.mark.integration

NO_ANTI_THRASH = SchedulerConfig(min_runtime_s=0.0)


async def test_high_priority_preempts_and_victim_returns(registry_settings: KafkaSettings) -> None:
    settings = registry_settings
    await publish(settings, *config_messages(), node("east-a100-0", 8))
    async with Tail(settings, DECISIONS_TOPIC, STATUS_TOPIC, JOBS_TOPIC) as tail, \
            running_service(settings, scheduler_config=NO_ANTI_THRASH):
        await publish(settings, submit("low"))
        await tail.until(lambda: bool(tail.messages(JobAdmitted, job_id="low")))
        await publish(settings, RunStarted(**run_fields("low"), pods_running=1, pods_total=1),
                      submit("high", priority_class="high", offset_s=1))
        await tail.until(lambda: bool(tail.messages(JobPreemptionRequested, job_id="low")))
        (req,) = tail.messages(JobPreemptionRequested, job_id="low")
        assert (req.attempt, req.reason, req.preemptor, req.requeue) == (0, "higher_priority", "high", True)
        assert not tail.messages(JobAdmitted, job_id="high")  # not before the victim has stopped

        await publish(settings, JobStopped(**run_fields("low"), reason="higher_priority", requeue=True,
                                           checkpointed=True))
        await tail.until(lambda: bool(tail.messages(JobAdmitted, job_id="high")))
        low = tail.messages(JobStatusChanged, job_id="low", state="pending", attempt=1)
        assert low, "the victim is pending again as attempt 1"

        await publish(settings, RunStarted(**run_fields("high"), pods_running=1, pods_total=1),
                      RunSucceeded(**run_fields("high")))
        await tail.until(lambda: bool(tail.messages(JobAdmitted, job_id="low", attempt=1)))

        # cancelling the re-admitted victim: stop without requeue, then cancelled
        await publish(settings, CancelJob(job_id="low", requested_by="alice"))
        await tail.until(lambda: bool(tail.messages(JobPreemptionRequested, job_id="low", attempt=1)))
        (cancel,) = tail.messages(JobPreemptionRequested, job_id="low", attempt=1)
        assert (cancel.reason, cancel.requeue) == ("cancelled", False)
        await publish(settings, JobStopped(**run_fields("low", 1), reason="cancelled", requeue=False))
        await tail.until(lambda: bool(tail.messages(JobStatusChanged, job_id="low", state="cancelled")))
        await tail.settle(1.0)

    admissions = sorted((a.job_id, a.attempt) for a in tail.messages(JobAdmitted))
    assert admissions == [("high", 0), ("low", 0), ("low", 1)]
    records = {r.job_id: r.record for r in tail.messages(JobRecorded)}
    assert (records["low"].state, records["low"].attempt, records["high"].state) == ("cancelled", 1, "succeeded")


async def test_consolidation_moves_a_small_job_so_a_gang_gets_a_whole_node(registry_settings: KafkaSettings) -> None:
    """Two 4-GPU nodes each half used by a 2-GPU job: a 4-GPU pod fits on neither until one of them
    moves (preempted with reason ``consolidation``, requeued, and admitted again beside the other).
    The module's broker keeps the earlier test's messages: only this test's jobs are looked at."""
    settings = registry_settings
    small = [f"frag-{name}" for name in "abcd"]
    await publish(settings, *config_messages(), node("east-a100-0", 4), node("east-a100-1", 4))
    async with Tail(settings, DECISIONS_TOPIC, STATUS_TOPIC, JOBS_TOPIC) as tail, \
            running_service(settings, scheduler_config=NO_ANTI_THRASH):

        def admitted(job_id: str, attempt: int = 0) -> list[JobAdmitted]:
            return tail.messages(JobAdmitted, job_id=job_id, attempt=attempt)

        await publish(settings, *(submit(name, gpus=2, offset_s=i) for i, name in enumerate(small)))
        await tail.until(lambda: all(admitted(name) for name in small))
        on_node: dict[str, list[str]] = {}
        for name in small:
            (pods,) = admitted(name)[0].placement.nodes
            on_node.setdefault(pods.node, []).append(name)
        assert sorted(len(jobs) for jobs in on_node.values()) == [2, 2]
        ending = [sorted(jobs)[0] for jobs in on_node.values()]  # one job ends on each node
        await publish(settings, *(RunStarted(**run_fields(name), pods_running=1, pods_total=1) for name in small))
        await publish(settings, *(RunSucceeded(**run_fields(name)) for name in ending))
        await tail.until(lambda: all(tail.messages(JobStatusChanged, job_id=j, state="succeeded") for j in ending))
        await publish(settings, submit("frag-gang", gpus=4, offset_s=10))
        await tail.until(lambda: bool(tail.messages(JobPreemptionRequested, preemptor="frag-gang")))
        (move,) = tail.messages(JobPreemptionRequested, preemptor="frag-gang")
        assert (move.reason, move.requeue) == ("consolidation", True)
        assert move.job_id in set(small) - set(ending)
        await publish(settings, JobStopped(**run_fields(move.job_id), reason="consolidation", requeue=True,
                                           checkpointed=True))
        await tail.until(lambda: bool(admitted("frag-gang")) and bool(admitted(move.job_id, 1)))
        await tail.settle(1.0)
    (gang,) = admitted("frag-gang")
    (back,) = admitted(move.job_id, 1)
    assert len({p.node for p in gang.placement.nodes}) == 1
    assert {p.node for p in back.placement.nodes}.isdisjoint(p.node for p in gang.placement.nodes)
