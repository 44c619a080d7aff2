"""A request about a kube-native job that the queue manager refused is told on the user's own object, once."""

from __future__ import annotations

import asyncio

from schemas.envelope import make_envelope
from schemas.status import ActionOutcome, JobStatusChanged
from services.gateway.kube_jobs import KubeJobFeedback
from services.runtime.kube import EVENTS, JOBS
from tests.builders.clock import T0
from tests.gateway.builders import Harness, simulated_cluster, status_changed
from tests.integration.builders import eventually


def told(gw: Harness, status: JobStatusChanged) -> None:
    envelope = make_envelope(status, "test")
    gw.ctx.status.apply(status.job_id, envelope)
    gw.ctx.status_changed(status.job_id, envelope)


async def test_a_refused_priority_change_becomes_one_warning_event_on_the_job(gw: Harness) -> None:
    async with simulated_cluster() as (_, rest):
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sweep", "namespace": "team-a"},
               "spec": {"suspend": False, "template": {"spec": {"restartPolicy": "Never", "containers": [
                   {"name": "c", "image": "registry.example/c:1"}]}}}}
        created = await rest.create(JOBS, job, "team-a")
        feedback = KubeJobFeedback(rest, gw.ctx.status, gw.ctx.now)
        gw.ctx.status_listeners.append(feedback.on_status)
        stop = asyncio.Event()
        writing = asyncio.create_task(feedback.run(stop))
        try:
            running = status_changed("sweep-1", name="sweep", state="running", cluster="east")
            told(gw, running)
            feedback.track("sweep-1", "team-a", "sweep", created["metadata"]["uid"])
            await eventually(lambda: feedback.written >= 2, within=10)  # Admitted, and the conditions
            refusal = ActionOutcome(event_id="e1", action="change_priority", outcome="refused",
                                    reason="runs_on_borrowed_quota", message="it runs on borrowed quota",
                                    requested_by="alice", at=T0)
            told(gw, running.model_copy(update={"last_action": refusal}))  # nothing else changed
            await eventually(lambda: feedback.written >= 4, within=10)
            told(gw, running.model_copy(update={"last_action": refusal, "position": None}))  # the same answer
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            await writing
            gw.ctx.status_listeners.remove(feedback.on_status)
        events, _ = await rest.list(EVENTS, "team-a")
    reasons = [e["reason"] for e in events]
    assert reasons.count("RequestRefused") == 1, reasons
    [refused] = [e for e in events if e["reason"] == "RequestRefused"]
    assert refused["type"] == "Warning" and "runs_on_borrowed_quota" in refused["message"]
