"""Preemption handshakes, whole-gang restarts and node loss, end to end on Apache Kafka and the simulated cluster."""

from __future__ import annotations

import time
import uuid

import pytest

from schemas.capacity import NodeStateObserved
from schemas.runs import (
    DispatchFailed,
    JobDispatched,
    JobStopped,
    RunAllPodsReady,
    RunDeleted,
    RunEvicted,
    RunFailed,
)
from services.runtime.kafka import KafkaSettings
from services.runtime.kube import JOBS, patch
from tests.builders.jobspecs import job_spec
from tests.builders.realkube import RealKube
from tests.dispatcher.builders import TRAINING, admitted, placement, preempt, runs_for
from tests.dispatcher.harness import Cluster, eventually_true, running

pytestmark = pytest.mark.integration


def job_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def signalled(cluster: Cluster, jid: str) -> bool:
    pods = await cluster.pods("team-a", jid)
    return bool(pods) and all("muster.dev/preempt-requested" in p["metadata"].get("annotations", {}) for p in pods)


async def gone(cluster: Cluster, jid: str) -> bool:
    return not await cluster.jobs("team-a", jid) and not await cluster.pods("team-a", jid)


async def test_preemption_without_acknowledgement_waits_the_grace_period(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("victim")
    async with running(registry_settings, kube_backend) as cluster:
        await cluster.decide(admitted(jid, 0, job_spec=job_spec(**TRAINING, annotations=runs_for(120))))
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        requested = time.monotonic()
        await cluster.decide(preempt(jid, 0, grace_s=1.5))
        await eventually_true(lambda: signalled(cluster, jid), within=5)
        job = (await cluster.jobs("team-a", jid))[0]
        assert "muster.dev/preempt-requested" in job["metadata"]["annotations"]
        stopped = (await cluster.outputs.wait_for(JobStopped, job_id=jid))[0]
        assert time.monotonic() - requested >= 1.5
        assert (stopped.reason, stopped.requeue, stopped.checkpointed) == ("higher_priority", True, False)
        await eventually_true(lambda: gone(cluster, jid))
        deleted = (await cluster.outputs.wait_for(RunDeleted, job_id=jid))[0]
        assert deleted.by == "muster"
        assert not cluster.outputs.messages(RunFailed, job_id=jid)


async def test_preemption_ends_early_once_the_job_has_checkpointed(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("ckpt")
    async with running(registry_settings, kube_backend) as cluster:
        await cluster.decide(admitted(jid, 0, job_spec=job_spec(**TRAINING, annotations=runs_for(120))))
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        requested = time.monotonic()
        await cluster.decide(preempt(jid, 0, grace_s=60, requeue=False))
        await eventually_true(lambda: signalled(cluster, jid), within=5)
        await patch(cluster.rest, JOBS, f"{jid}-a0", {"metadata": {"annotations": {"muster.dev/checkpointed": "true"}}},
                    "team-a")
        stopped = (await cluster.outputs.wait_for(JobStopped, job_id=jid))[0]
        assert time.monotonic() - requested < 30
        assert (stopped.requeue, stopped.checkpointed) == (False, True)
        await eventually_true(lambda: gone(cluster, jid))


async def test_a_handshake_resumes_after_a_dispatcher_restart(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("resume")
    async with running(registry_settings, kube_backend) as cluster:
        await cluster.decide(admitted(jid, 0, job_spec=job_spec(**TRAINING, annotations=runs_for(120))))
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        await cluster.decide(preempt(jid, 0, grace_s=3))
        await eventually_true(lambda: signalled(cluster, jid), within=5)
        await cluster.stop("dispatcher")
        assert not cluster.outputs.messages(JobStopped, job_id=jid)
        await cluster.start_dispatcher()
        stopped = (await cluster.outputs.wait_for(JobStopped, job_id=jid))[0]
        assert not stopped.checkpointed
        await eventually_true(lambda: gone(cluster, jid))


async def test_preempting_a_job_that_is_not_here_reports_it_stopped(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("absent")
    async with running(registry_settings, kube_backend, watcher=False) as cluster:
        await cluster.decide(preempt(jid, 2, grace_s=30))
        stopped = (await cluster.outputs.wait_for(JobStopped, job_id=jid))[0]
        assert (stopped.attempt, stopped.checkpointed) == (2, False)


async def test_a_failing_gang_restarts_whole_then_gives_up(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("crash")
    async with running(registry_settings, kube_backend) as cluster:
        crashing = job_spec(max_restarts=2, **TRAINING, annotations=runs_for(0.3, exit_code=3))
        await cluster.decide(admitted(jid, 0, job_spec=crashing))
        failed = (await cluster.outputs.wait_for(DispatchFailed, job_id=jid, within=40))[0]
        assert failed.reason == "restarts_exhausted" and not failed.retryable
        failures = cluster.outputs.messages(RunFailed, job_id=jid)
        assert len(failures) == 3
        assert [f.pod.rsplit("-", 2)[0] for f in failures] == [f"{jid}-a0", f"{jid}-a0-r1", f"{jid}-a0-r2"]
        assert all(f.exit_code == 3 and f.attempt == 0 for f in failures)
        dispatched = cluster.outputs.messages(JobDispatched, job_id=jid)
        assert [d.object_name for d in dispatched] == [f"{jid}-a0", f"{jid}-a0-r1", f"{jid}-a0-r2"]
        await eventually_true(lambda: gone(cluster, jid))
        deleted = await cluster.outputs.wait_for(RunDeleted, job_id=jid)
        assert [d.by for d in deleted] == ["muster"]  # replacements inside the attempt are not deletions


async def test_a_lost_node_evicts_the_run_and_reports_the_node(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("lost")
    async with running(registry_settings, kube_backend) as cluster:
        await cluster.decide(admitted(jid, 0, plan=placement("east-a100-1", "east-a100-2"),
                                      job_spec=job_spec(**TRAINING, annotations=runs_for(120))))
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        cluster.require_sim().set_node_ready("east-a100-2", False)
        evicted = (await cluster.outputs.wait_for(RunEvicted, job_id=jid))[0]
        assert (evicted.reason, evicted.node) == ("NodeLost", "east-a100-2")
        await cluster.outputs.wait_until(lambda: any(
            not m.state.healthy for m in cluster.outputs.messages(NodeStateObserved) if m.state.node == "east-a100-2"))
        assert not cluster.outputs.messages(RunFailed, job_id=jid)  # an eviction is not a crash: no restart
        assert len(cluster.outputs.messages(JobDispatched, job_id=jid)) == 1
