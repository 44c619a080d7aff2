"""The queue manager on the real broker: admission, status, and a restart in the middle of a run."""

from __future__ import annotations

import aiohttp
import pytest

from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
from schemas.envelope import make_envelope
from schemas.jobs import JobRecord, JobRecorded
from schemas.runs import RunStarted, RunSucceeded
from schemas.status import JobStatusChanged
from schemas.topics import DECISIONS_TOPIC, JOBS_TOPIC, STATUS_TOPIC
from services.runtime.kafka import KafkaSettings
from tests.queue_manager.builders import T0, config_messages, node, run_fields, submit
from tests.queue_manager.live import Tail, publish, running_service

pytestmark = pytest.mark.integration


def _states(tail: Tail, job_id: str) -> list[str]:
    """The job's published states, repeats (a pending job's reason or position changing) folded."""
    states: list[str] = []
    for s in tail.messages(JobStatusChanged, job_id=job_id):
        if not states or states[-1] != s.state:
            states.append(s.state)
    return states


async def test_admits_runs_and_survives_a_restart_mid_run(registry_settings: KafkaSettings) -> None:
    settings = registry_settings
    await publish(settings, *config_messages(), node("east-a100-0", 8))
    first_submit = make_envelope(submit("j1"), "test")
    async with Tail(settings, DECISIONS_TOPIC, STATUS_TOPIC, JOBS_TOPIC) as tail:
        async with running_service(settings) as (_, runner):
            await publish(settings, first_submit)
            await tail.until(lambda: bool(tail.messages(JobAdmitted, job_id="j1")))
            (adm,) = tail.messages(JobAdmitted, job_id="j1")
            assert (adm.attempt, adm.namespace, adm.placement.nodes[0].node) == (0, "ns-team-a", "east-a100-0")
            await publish(settings, RunStarted(**run_fields("j1"), pods_running=1, pods_total=1))
            await tail.until(lambda: "running" in _states(tail, "j1"))
            await publish(settings, submit("j2", offset_s=1))
            await tail.until(lambda: any(s.reason for s in tail.messages(JobStatusChanged, job_id="j2")))
            j2_pending = tail.messages(JobStatusChanged, job_id="j2")[-1]
            assert (j2_pending.state, j2_pending.position) == ("pending", 0)
            assert j2_pending.reason == "waiting_for_reservation" and j2_pending.estimated_start is not None
            assert runner.url is not None
            async with aiohttp.ClientSession() as http, http.get(f"{runner.url}/metrics") as resp:
                metrics = await resp.text()
            assert 'muster_queue_manager_admissions_total{queue="team-a"} 1.0' in metrics
            assert 'muster_queue_manager_queue_depth{queue="team-a"} 1.0' in metrics

        # while it is down: the same submission is delivered again, then j1 finishes
        await publish(settings, first_submit, submit("j1", gpus=1), RunSucceeded(**run_fields("j1")))
        async with running_service(settings) as (manager, _):
            assert manager.state.jobs["j1"].state in ("running", "succeeded")
            await tail.until(lambda: bool(tail.messages(JobAdmitted, job_id="j2")))
            await tail.until(lambda: "succeeded" in _states(tail, "j1"))
            await tail.settle()
            assert manager.state.jobs["j1"].spec.template.resources.gpus == 8

    admissions = [(a.job_id, a.attempt) for a in tail.messages(JobAdmitted)]
    assert sorted(admissions) == [("j1", 0), ("j2", 0)]  # nothing admitted twice
    records = {r.job_id: r.record for r in tail.messages(JobRecorded)}
    assert (records["j1"].state, records["j2"].state) == ("succeeded", "admitted")
    assert _states(tail, "j1") == ["pending", "admitted", "running", "succeeded"]
    assert _states(tail, "j2") == ["pending", "admitted"]


async def test_decision_lost_after_its_record_is_published_on_restart(registry_settings: KafkaSettings) -> None:
    """A crash after the record was acknowledged but before the decision: the restart re-publishes it."""
    settings = registry_settings
    plan = PlacementPlan(cluster="east", nodes=[NodePods(node="east-a100-1", pods=1)])
    record = JobRecord(submission=submit("orphaned"), priority=100, state="admitted", replicas=1, placement=plan,
                       admitted_at=T0)
    await publish(settings, config_messages()[0], node("east-a100-1", 8),
                  JobRecorded(job_id="orphaned", queue="team-a", record=record))
    async with Tail(settings, DECISIONS_TOPIC) as tail:
        await tail.settle(0.5)
        before = len(tail.messages(JobAdmitted))
        async with running_service(settings) as (manager, _):
            await tail.until(lambda: bool(tail.messages(JobAdmitted, job_id="orphaned")))
            assert manager.state.sched.free_gpus("east-a100-1") == 0
            await tail.settle(1.0)
    (again,) = tail.messages(JobAdmitted, job_id="orphaned")
    assert (again.attempt, again.placement) == (0, plan)
    earlier = {(a.job_id, a.attempt): a for a in tail.messages(JobAdmitted)[:before]}
    for repeat in tail.messages(JobAdmitted)[before:]:
        # other admitted-but-not-started jobs are re-published unchanged: same attempt, same placement
        assert repeat.job_id == "orphaned" or earlier[(repeat.job_id, repeat.attempt)] == repeat
