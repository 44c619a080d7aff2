"""A sharded queue manager passes over, undecoded, only records it would ignore after decoding them."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.codec import encode
from schemas.envelope import Message, make_envelope
from schemas.intents import CancelJob
from schemas.runs import RunStarted
from schemas.topics import DISPATCHES_TOPIC, INTENTS_TOPIC, RUNS_TOPIC, tenant_intents_topic
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import QueueState
from services.queue_manager.routing import passes_over
from services.spec.ids import keyed_job_id
from tests.queue_manager.builders import NOW, run_fields, submit
from tests.queue_manager.test_shards import CFG, feed, shard_state

QUEUES = ["q-blue", "q-green", "q-any", "no-such-queue"]


def record(message: Message) -> tuple[bytes, bytes]:
    envelope = make_envelope(message, "test")
    return envelope.key().encode(), encode(envelope)


def started(job_id: str) -> RunStarted:
    return RunStarted(**run_fields(job_id), pods_running=1, pods_total=1)


def test_an_instance_owning_every_pool_passes_nothing_over() -> None:
    qs = shard_state()
    for message, topic in ((submit("g1", queue="q-green"), INTENTS_TOPIC), (started("nobody"), RUNS_TOPIC)):
        assert not passes_over(qs, topic, *record(message))


def test_a_shard_passes_over_other_pools_submissions_and_events_of_jobs_it_does_not_hold() -> None:
    blue = shard_state("blue")
    assert passes_over(blue, INTENTS_TOPIC, *record(submit("g1", queue="q-green")))
    assert passes_over(blue, INTENTS_TOPIC, *record(submit("x1", queue="no-such-queue")))  # the default pool's
    assert not passes_over(blue, INTENTS_TOPIC, *record(submit("b1", queue="q-blue")))
    feed(blue, submit("b1", queue="q-blue"))
    assert not passes_over(blue, INTENTS_TOPIC, *record(CancelJob(job_id="b1", requested_by="alice")))
    assert passes_over(blue, INTENTS_TOPIC, *record(CancelJob(job_id="g1", requested_by="alice")))
    assert not passes_over(blue, RUNS_TOPIC, *record(started("b1")))
    assert passes_over(blue, RUNS_TOPIC, *record(started("g1")))
    assert passes_over(blue, DISPATCHES_TOPIC, b"g1", b"{}")


def test_what_does_not_parse_is_decoded_so_it_can_be_dead_lettered() -> None:
    blue = shard_state("blue")
    _, value = record(submit("g1", queue="q-green"))
    data = orjson.loads(value)
    for broken in (b"not json", b"[1, 2]", orjson.dumps({**data, "payload": "x"}),
                   orjson.dumps({k: v for k, v in data.items() if k != "type"}),
                   orjson.dumps({**data, "payload": {**data["payload"], "spec": {"queue": 7}}})):
        assert not passes_over(blue, INTENTS_TOPIC, b"g1", broken)
    assert not passes_over(blue, INTENTS_TOPIC, b"g1", None)
    assert not passes_over(blue, RUNS_TOPIC, None, b"{}")


def fingerprint(qs: QueueState) -> tuple[object, ...]:
    return ({k: (e.state, e.attempt) for k, e in qs.jobs.items()}, sorted(qs.dirty))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "cancel", "started"]), st.integers(0, 7),
                          st.sampled_from(QUEUES)), max_size=30))
def test_a_passed_over_record_is_one_decoding_would_have_ignored(inputs: list[tuple[str, int, str]]) -> None:
    shards = [shard_state("blue"), shard_state("green", "default")]
    for n, (kind, job, queue) in enumerate(inputs):
        job_id = f"j{job}"
        message: Message
        if kind == "submit":
            message, topic = submit(job_id, queue=queue, gpus=1, offset_s=n), INTENTS_TOPIC
        elif kind == "cancel":
            message, topic = CancelJob(job_id=job_id, requested_by="alice"), INTENTS_TOPIC
        else:
            message, topic = started(job_id), RUNS_TOPIC
        for qs in shards:
            if passes_over(qs, topic, *record(message)):
                before = fingerprint(qs)
                assert on_input(qs, message, f"e{n}", NOW) == []
                assert fingerprint(qs) == before
            else:
                feed(qs, message, event_id=f"e{n}")
        if n % 5 == 4:
            for qs in shards:
                run_cycle(qs, NOW, CFG)


def test_a_request_about_another_tenants_id_is_judged_by_every_shard_whether_or_not_the_job_exists() -> None:
    """Passing over only unknown ids let a tenant tell another tenant's existing jobs (dead-lettered by the
    shard that holds them) from ids that do not exist (passed over by every shard)."""
    blue = shard_state("blue")
    own_topic, theirs = tenant_intents_topic("team-a"), keyed_job_id("train", "team-b", "k1")
    for job_id in (theirs, keyed_job_id("eval", "team-b", "k2")):  # neither held by this shard
        assert not passes_over(blue, own_topic, *record(CancelJob(job_id=job_id, requested_by="mallory")))
    mine = keyed_job_id("train", "team-a", "k1")
    assert passes_over(blue, own_topic, *record(CancelJob(job_id=mine, requested_by="alice")))  # another shard's
    assert passes_over(blue, INTENTS_TOPIC, *record(CancelJob(job_id=theirs, requested_by="gateway")))
