"""Dispatcher handlers against the simulated cluster with an in-memory producer (no broker)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.envelope import Message, make_envelope
from schemas.runs import DispatchFailed, JobDispatched, JobStopped, RunFailed
from schemas.topics import RUNS_TOPIC
from services.dispatcher.context import Context
from services.dispatcher.dispatcher import Dispatcher
from services.dispatcher.kube_ops import KubeOps
from services.dispatcher.plans import admission_manifest, clone_manifest
from services.dispatcher.reports import Reporter
from services.kubesim import KubeSim
from services.runtime.kube import JOBS, KubeRest, build_api_client, create_or_get
from tests.builders.jobspecs import job_spec
from tests.dispatcher.builders import CLUSTER, TRAINING, admitted, placement, preempt, runs_for, scaled
from tests.dispatcher.fakes import RecordingProducer, delivery
from tests.dispatcher.harness import FAST, TEST_RETRY, eventually_true
from tests.node_watcher.builders import CLUSTER_FILE


@dataclass
class Bench:
    dispatcher: Dispatcher
    producer: RecordingProducer
    rest: KubeRest
    sim: KubeSim

    async def handle(self, message: Message, *, topic: str = "muster.decisions.v1") -> None:
        d = delivery(self.producer, topic)
        await self.dispatcher.handle(make_envelope(message, "queue_manager"), d)
        await d.settle()

    async def job_names(self, namespace: str = "team-a") -> list[str]:
        items, _ = await self.rest.list(JOBS, namespace)
        return sorted(j["metadata"]["name"] for j in items)


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    sim = KubeSim.from_cluster_file(CLUSTER_FILE, cluster_name=CLUSTER, profile="zero")
    async with sim.serve(port=0) as url:
        api = await build_api_client(url)
        async with api:
            rest = KubeRest(api, retry=TEST_RETRY, request_timeout=10.0)
            producer = RecordingProducer()
            ctx = Context(cluster=CLUSTER, ops=KubeOps(rest), reporter=Reporter(producer.as_producer()), settings=FAST)
            dispatcher = Dispatcher(ctx)
            try:
                yield Bench(dispatcher, producer, rest, sim)
            finally:
                await dispatcher.close()


async def test_decisions_for_other_clusters_are_ignored(bench: Bench) -> None:
    await bench.handle(admitted("west-1", plan=placement("west-gpu-0", cluster="west")))
    assert await bench.job_names() == [] and bench.producer.sent == []


async def test_a_newer_attempt_replaces_the_older_and_stale_ones_are_ignored(bench: Bench) -> None:
    await bench.handle(admitted("job-1", 0, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))
    await bench.handle(admitted("job-1", 1, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))

    async def only_new() -> bool:
        return await bench.job_names() == ["job-1-a1"]

    await eventually_true(only_new)
    await bench.handle(admitted("job-1", 0, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))
    assert await bench.job_names() == ["job-1-a1"]
    assert [d.attempt for d in bench.producer.payloads(JobDispatched)] == [0, 1]


async def test_scaling_an_unknown_job_fails(bench: Bench) -> None:
    await bench.handle(scaled("ghost", 0, plan=placement("east-a100-0")))
    failed = bench.producer.payloads(DispatchFailed)
    assert [(f.reason, f.retryable) for f in failed] == [("not_dispatched", False)]


async def test_an_api_rejection_is_reported_not_retried(bench: Bench) -> None:
    bench.sim.fail_api(403, seconds=5)
    await bench.handle(admitted("denied", 0))
    failed = bench.producer.payloads(DispatchFailed)
    assert [(f.reason, f.retryable) for f in failed] == [("rejected_403", False)]


async def test_an_unavailable_api_is_reported_as_retryable(bench: Bench) -> None:
    bench.sim.fail_api(503, seconds=30)
    await bench.handle(admitted("later", 0))
    failed = bench.producer.payloads(DispatchFailed)
    assert [(f.reason, f.retryable) for f in failed] == [("api_unavailable", True)]


async def test_failures_of_other_revisions_or_clusters_do_not_restart(bench: Bench) -> None:
    await bench.handle(admitted("job-2", 0, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))
    now = datetime.now(UTC)
    for pod, cluster in (("job-2-a0-r1-0-abcde", CLUSTER), ("job-2-a0-0-abcde", "west")):
        await bench.handle(RunFailed(job_id="job-2", attempt=0, cluster=cluster, observed_at=now, reason="Error",
                                     pod=pod), topic=RUNS_TOPIC)
    assert "job-2" not in bench.dispatcher.ctx.tasks
    assert bench.dispatcher.ctx.runs["job-2"].restart_at is None


async def test_a_pending_restart_resumes_after_recovery(bench: Bench) -> None:
    decision = admitted("job-3", 0, job_spec=job_spec(max_restarts=2, **TRAINING, annotations=runs_for(60)))
    manifest = admission_manifest(decision, "evt-3", "evt-3", FAST)
    due = datetime.now(UTC) - timedelta(seconds=1)
    manifest["metadata"]["annotations"]["muster.dev/restart-at"] = due.isoformat()
    await create_or_get(bench.rest, JOBS, manifest)
    await bench.dispatcher.recover()

    async def restarted() -> bool:
        return await bench.job_names() == ["job-3-a0-r1"]

    await eventually_true(restarted)
    run = bench.dispatcher.ctx.runs["job-3"]
    assert (run.name, run.revision, run.restarts, run.max_restarts) == ("job-3-a0-r1", 1, 1, 2)
    assert [d.object_name for d in bench.producer.payloads(JobDispatched)] == ["job-3-a0-r1"]


async def test_a_job_out_of_time_is_not_restarted(bench: Bench) -> None:
    await bench.handle(admitted("job-4", 0, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))
    await bench.handle(RunFailed(job_id="job-4", attempt=0, cluster=CLUSTER, observed_at=datetime.now(UTC),
                                 reason="DeadlineExceeded"), topic=RUNS_TOPIC)
    assert bench.dispatcher.ctx.runs["job-4"].restart_at is None and "job-4" not in bench.dispatcher.ctx.tasks


async def test_an_infrastructure_failure_is_not_restarted_in_place_but_handed_back(bench: Bench) -> None:
    await bench.handle(admitted("job-9", 0, job_spec=job_spec(max_restarts=3, **TRAINING, annotations=runs_for(60))))
    [name] = await bench.job_names()
    await bench.handle(RunFailed(job_id="job-9", attempt=0, cluster=CLUSTER, observed_at=datetime.now(UTC),
                                 reason="UnexpectedAdmissionError", pod=f"{name}-0-abcde",
                                 classification="infrastructure", nodes=["east-a100-0"]), topic=RUNS_TOPIC)
    assert "job-9" not in bench.dispatcher.ctx.runs and "job-9" not in bench.dispatcher.ctx.tasks
    assert bench.dispatcher.ctx.is_finished("job-9", 0)
    assert not bench.producer.payloads(DispatchFailed)  # the queue manager decides what comes next

    async def deleted() -> bool:
        return await bench.job_names() == []

    await eventually_true(deleted)
    # the requeued attempt starts with the restarts the job already spent on its own failures
    await bench.handle(admitted("job-9", 1,
                                job_spec=job_spec(max_restarts=3, **TRAINING, annotations=runs_for(60)), restarts=2))
    assert await bench.job_names() == ["job-9-a1"]
    run = bench.dispatcher.ctx.runs["job-9"]
    assert (run.attempt, run.restarts, run.max_restarts) == (1, 2, 3)


async def test_a_replacement_interrupted_before_the_delete_resumes_after_recovery(bench: Bench) -> None:
    """The dispatcher stopped between creating revision 1 (suspended) and deleting revision 0."""
    decision = admitted("job-5", 0, plan=placement("east-a100-0"),
                        job_spec=job_spec(replicas=1, **TRAINING, annotations=runs_for(60)))
    old = admission_manifest(decision, "evt-5", "evt-5", FAST)
    created, _ = await create_or_get(bench.rest, JOBS, old)
    new = clone_manifest(created, name="job-5-a0-r1", revision=1, restarts=0, decision_event="evt-6",
                         placement=placement("east-a100-0", "east-a100-1"))
    assert new["spec"]["suspend"] is True and new["metadata"]["annotations"]["muster.dev/replaces"] == "job-5-a0"
    await create_or_get(bench.rest, JOBS, new)
    await bench.dispatcher.recover()

    async def released() -> bool:
        items, _ = await bench.rest.list(JOBS, "team-a")
        return [(j["metadata"]["name"], j["spec"]["suspend"], "muster.dev/replaces" in j["metadata"]["annotations"])
                for j in items] == [("job-5-a0-r1", False, False)]

    await eventually_true(released)
    run = bench.dispatcher.ctx.runs["job-5"]
    assert (run.name, run.revision, run.replaces) == ("job-5-a0-r1", 1, "")


async def test_a_rescale_during_a_pending_release_supersedes_it(bench: Bench) -> None:
    await bench.handle(admitted("job-6", 0, plan=placement("east-a100-0"),
                                job_spec=job_spec(replicas=1, **TRAINING, annotations=runs_for(60))))
    await bench.handle(scaled("job-6", 0, plan=placement("east-a100-0", "east-a100-1")))
    await bench.handle(scaled("job-6", 0, plan=placement("east-a100-0", "east-a100-1", "east-a100-2")))

    async def settled() -> bool:
        items, _ = await bench.rest.list(JOBS, "team-a")
        return [(j["metadata"]["name"], j["spec"]["suspend"]) for j in items] == [("job-6-a0-r2", False)]

    await eventually_true(settled)
    assert [d.object_name for d in bench.producer.payloads(JobDispatched)] == ["job-6-a0", "job-6-a0-r1",
                                                                               "job-6-a0-r2"]


class _HeldCreate:
    """Lets a Job creation reach the cluster but holds its answer back until ``release`` is set."""

    def __init__(self, bench: Bench) -> None:
        self.ops = bench.dispatcher.ctx.ops
        self.real = self.ops.create_job
        self.created = asyncio.Event()
        self.release = asyncio.Event()

    async def create_job(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        result = await self.real(manifest)
        self.created.set()
        await self.release.wait()
        return result

    def install(self) -> None:
        self.ops.create_job = self.create_job  # type: ignore[method-assign]


async def _restart_mid_replacement(bench: Bench, job_id: str) -> _HeldCreate:
    """``job_id`` admitted, its pod failed, and its restart has created revision 1 but not yet heard back."""
    await bench.handle(admitted(job_id, 0, plan=placement("east-a100-0"),
                                job_spec=job_spec(replicas=1, **TRAINING, annotations=runs_for(60))))
    held = _HeldCreate(bench)
    held.install()
    await bench.handle(RunFailed(job_id=job_id, attempt=0, cluster=CLUSTER, observed_at=datetime.now(UTC),
                                 reason="Error", pod=f"{job_id}-a0-0-abcde"), topic=RUNS_TOPIC)
    await asyncio.wait_for(held.created.wait(), timeout=10)
    return held


async def _answer_while(held: _HeldCreate, handling: Coroutine[Any, Any, None]) -> None:
    """Run ``handling`` while the held creation is still unanswered; answer it a moment later."""
    task = asyncio.ensure_future(handling)
    await asyncio.sleep(0.1)
    held.release.set()
    await asyncio.wait_for(task, timeout=20)


async def test_a_cancel_during_a_restarts_replacement_stops_the_new_revision(bench: Bench) -> None:
    """The restart's new revision exists but the dispatcher has not recorded it when the job is cancelled."""
    held = await _restart_mid_replacement(bench, "job-7")
    await _answer_while(held, bench.handle(preempt("job-7", grace_s=30, requeue=False)))

    async def nothing_left() -> bool:
        return await bench.job_names() == []

    await eventually_true(nothing_left)
    assert "job-7" not in bench.dispatcher.ctx.runs
    assert [s.requeue for s in bench.producer.payloads(JobStopped)] == [False]


async def test_a_new_attempt_during_a_restarts_replacement_supersedes_every_revision(bench: Bench) -> None:
    held = await _restart_mid_replacement(bench, "job-8")
    one_pod = job_spec(replicas=1, **TRAINING, annotations=runs_for(60))
    await _answer_while(held, bench.handle(admitted("job-8", 1, plan=placement("east-a100-1"), job_spec=one_pod)))

    async def only_new() -> bool:
        return await bench.job_names() == ["job-8-a1"]

    await eventually_true(only_new)
    assert bench.dispatcher.ctx.runs["job-8"].name == "job-8-a1"


async def test_a_rescale_during_a_restarts_replacement_builds_on_the_new_revision(bench: Bench) -> None:
    held = await _restart_mid_replacement(bench, "job-9")
    await _answer_while(held, bench.handle(scaled("job-9", 0, plan=placement("east-a100-0", "east-a100-1"))))

    async def only_latest() -> bool:
        items, _ = await bench.rest.list(JOBS, "team-a")
        return [(j["metadata"]["name"], j["spec"]["suspend"]) for j in items] == [("job-9-a0-r2", False)]

    await eventually_true(only_latest)
    run = bench.dispatcher.ctx.runs["job-9"]
    assert (run.name, run.restarts) == ("job-9-a0-r2", 1)
