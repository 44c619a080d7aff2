"""``muster.client`` against the gateway app in process: typed answers, paging, actions and typed errors
carrying the API's error body."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from muster.client import (
    AsyncClient,
    Conflict,
    Forbidden,
    NotFound,
    RecurringAccepted,
    SubmitAccepted,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from schemas.api import Explanation, JobEvents, JobView
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SubmitJob, SuspendJob
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from tests.builders.clock import T0
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import TOKENS, Harness, answering, feed, spec_json, status_changed


async def test_submit_a_typed_spec_with_a_key_is_one_job_and_reads_back(alice: AsyncClient, gw: Harness) -> None:
    first = await alice.submit(job_spec("train"), idempotency_key="run-7")
    again = await alice.submit(job_spec("train"), idempotency_key="run-7")
    assert isinstance(first, SubmitAccepted) and isinstance(again, SubmitAccepted)
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.job_id == first.job_id and first.location == f"/v1/jobs/{first.job_id}"
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    assert (sent.job_id, sent.idempotency_key, sent.user, sent.spec.replicas) == (first.job_id, "run-7", "alice", 2)

    job = await alice.get(first.job_id)
    assert isinstance(job, JobView) and (job.state, job.queue, job.gpus) == ("submitted", "team-a", 8)


async def test_describe_gives_reason_position_estimate_and_history(alice: AsyncClient, gw: Harness) -> None:
    start = T0 + timedelta(minutes=30)
    feed(gw.ctx.status, status_changed("j1", state="pending", position=4, reason="quota_exhausted"))
    feed(gw.ctx.status, status_changed("j1", state="pending", position=1, reason="waiting_for_reservation",
                                       message="reserved on node-3", estimated_start=start, minutes=1))
    explained = await alice.describe("j1")
    assert isinstance(explained, Explanation)
    assert (explained.reason, explained.position, explained.estimated_start) == ("waiting_for_reservation", 1, start)
    assert explained.message == "reserved on node-3" and "position 2 in queue team-a" in explained.summary
    assert [h.reason for h in explained.history] == ["quota_exhausted", "waiting_for_reservation"]


async def test_events_give_the_kubernetes_objects_and_the_timeline(alice: AsyncClient, gw: Harness) -> None:
    from schemas.envelope import make_envelope
    from schemas.runs import JobDispatched

    feed(gw.ctx.status, status_changed("j1", state="running"))
    dispatched = JobDispatched(job_id="j1", attempt=0, cluster="east", observed_at=T0 + timedelta(seconds=30),
                               namespace="team-a", object_name="j1-a0")
    gw.ctx.dashboard.runs.apply(make_envelope(dispatched, "test"))
    events = await alice.events("j1")
    assert isinstance(events, JobEvents)
    assert [(a.cluster, a.namespace, a.job_name) for a in events.attempts] == [("east", "team-a", "j1-a0")]
    assert [e.kind for e in events.events] == ["state", "dispatched"]


async def test_list_filters_and_pages_newest_first(alice: AsyncClient, gw: Harness) -> None:
    states = ["pending", "running", "succeeded", "pending", "failed"]
    for i, state in enumerate(states):
        feed(gw.ctx.status, status_changed(f"job-{i}", state=state, submitted_at=T0 + timedelta(minutes=i)))
    feed(gw.ctx.status, status_changed("other", tenant="team-b", queue="team-b"))  # not alice's

    page = await alice.list_jobs(limit=2)
    assert [j.job_id for j in page.items] == ["job-4", "job-3"] and page.total == 5
    page = await alice.list_jobs(limit=2, offset=2)
    assert [j.job_id for j in page.items] == ["job-2", "job-1"]
    active = await alice.list_jobs(active=True)
    assert {j.job_id for j in active.items} == {"job-0", "job-1", "job-3"} and active.total == 3
    assert [j.job_id for j in (await alice.list_jobs(state="failed")).items] == ["job-4"]
    every = [job.job_id async for job in alice.iter_jobs(page_size=2)]
    assert every == ["job-4", "job-3", "job-2", "job-1", "job-0"]


async def test_actions_publish_their_intents(alice: AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.status, status_changed("j1", state="pending"))
    pending = await alice.suspend("j1", wait=0)  # not waiting for the answer
    assert (pending.action, pending.outcome) == ("suspend", "pending")
    gw.publisher.sent.clear()
    answering(gw)
    assert (await alice.suspend("j1")).action == "suspend"
    assert (await alice.resume("j1")).action == "resume"
    assert (await alice.set_priority("j1", "high")).action == "change_priority"
    assert (await alice.scale("j1", 3)).action == "scale"
    accepted = await alice.cancel("j1", "not needed")
    assert (accepted.action, accepted.outcome) == ("cancel", "applied") and accepted.event_id
    assert (await alice.action_outcome("j1", accepted.event_id)).outcome == "applied"
    sent = gw.publisher.on(INTENTS_TOPIC)
    assert [type(m) for m in sent] == [SuspendJob, ResumeJob, ChangePriority, ScaleJob, CancelJob]
    assert isinstance(sent[2], ChangePriority) and sent[2].priority_class == "high"
    assert isinstance(sent[3], ScaleJob) and sent[3].replicas == 3
    assert isinstance(sent[4], CancelJob) and (sent[4].reason, sent[4].requested_by) == ("not needed", "alice")


async def test_refusals_are_typed_and_carry_the_error_body(alice: AsyncClient, gw: Harness) -> None:
    with pytest.raises(NotFound) as missing:
        await alice.get("nope")
    assert (missing.value.status, missing.value.error, missing.value.field) == (404, "not_found", "job_id")

    with pytest.raises(Forbidden) as forbidden:
        await alice.submit(spec_json(queue="team-b"))
    assert (forbidden.value.error, forbidden.value.field) == ("forbidden", "spec.queue")

    bad = spec_json()
    bad["template"]["resources"]["gpus"] = 1000
    bad["replicas"] = 0
    with pytest.raises(Unprocessable) as invalid:
        await alice.submit(bad)
    assert invalid.value.error == "validation_failed"
    assert {e["field"] for e in invalid.value.errors} == {"spec.template.resources.gpus", "spec.replicas"}

    with pytest.raises(Unprocessable) as unknown_class:
        await alice.submit(job_spec().model_copy(update={"priority_class": "platinum"}))
    assert unknown_class.value.error == "unknown_priority_class"

    feed(gw.ctx.status, status_changed("done", state="succeeded"))
    with pytest.raises(Conflict) as finished:
        await alice.cancel("done")
    assert finished.value.error == "job_finished" and "already succeeded" in finished.value.detail
    assert str(finished.value) == "409 job_finished [job_id]: job done is already succeeded"

    gw.publisher.fail = RuntimeError("broker down")
    with pytest.raises(Unavailable) as unavailable:
        await alice.submit(job_spec(), idempotency_key="k")
    assert (unavailable.value.status, unavailable.value.retry_after) == (503, 2.0)
    assert [type(m) for m in gw.publisher.on(INTENTS_TOPIC)] == []

    async with AsyncClient("http://gateway", "wrong", transport=httpx.ASGITransport(app=gw.app)) as stranger:
        with pytest.raises(Unauthorized) as unauthorized:
            await stranger.queues()
    assert unauthorized.value.status == 401 and unauthorized.value.body.error


async def test_queues_are_typed_and_only_the_callers(alice: AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.status, status_changed("r1", state="running", gpus=8))
    feed(gw.ctx.status, status_changed("p1", state="pending", gpus=4))
    queues = {q.name: q for q in await alice.queues()}
    assert set(queues) == {"team-a", "team-a-ops"}
    team_a = queues["team-a"]
    assert team_a.quotas["gpu:a100"].nominal == 16
    assert (team_a.gpus_running, team_a.gpus_pending, team_a.jobs) == (8, 4, {"pending": 1, "running": 1})


async def test_recurring_jobs_through_the_client(alice: AsyncClient, gw: Harness) -> None:
    defined = await alice.submit(job_spec("nightly", schedule="0 2 * * *"))
    assert isinstance(defined, RecurringAccepted)
    assert (defined.name, defined.created, len(defined.next_firings)) == ("team-a.nightly", True, 3)
    [item] = await alice.recurring_jobs()
    assert (item.name, item.schedule, item.suspended) == ("team-a.nightly", "0 2 * * *", False)
    assert (await alice.suspend_recurring("team-a.nightly")).changed is True
    assert (await alice.suspend_recurring("team-a.nightly")).changed is False
    assert (await alice.recurring("team-a.nightly")).suspended is True
    assert (await alice.resume_recurring("team-a.nightly")).changed is True
    assert (await alice.delete_recurring("team-a.nightly")).action == "delete"
    with pytest.raises(NotFound):
        await alice.recurring("team-a.nightly")
    assert len(gw.publisher.on(CONFIG_TOPIC)) == 4


async def test_a_submitted_spec_keeps_only_the_fields_its_author_set(alice: AsyncClient, gw: Harness) -> None:
    """A typed spec is sent as its author wrote it (defaults stay the gateway's to fill in)."""
    await alice.submit(job_spec("defaults"))
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.spec == job_spec("defaults")


def test_tokens_are_never_shown() -> None:
    from muster.client import Client

    with Client("http://127.0.0.1:9", TOKENS["alice"]) as client:
        assert TOKENS["alice"] not in repr(client)
