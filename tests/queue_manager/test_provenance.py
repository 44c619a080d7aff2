"""The queue manager accepts an intent's tenant only when the topic it came from proves it, and judges the job
ids a tenant's topic names by their tenant tag, never by whether the job exists."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest

from schemas.config import QueueConfig, QueueDefined, TenantConfig, TenantDefined
from schemas.envelope import Message, make_envelope
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SubmitJob, SuspendJob
from schemas.topics import INTENTS_TOPIC, JOBS_TOPIC, intents_topic_tenant, is_intents_topic, tenant_intents_topic
from services.queue_manager.inputs import on_input
from services.queue_manager.provenance import (
    PLAIN_SECRET_ENV,
    TENANT_NOT_PROVEN,
    TagWatch,
    ignored,
    plain_secret_refusal,
    unproven,
)
from services.queue_manager.queue_state import QueueState
from services.queue_manager.routing import passes_over
from services.queue_manager.service import INPUT_PATTERN, QueueManager
from services.runtime.kafka import Delivery, EnvelopeProducer, Refused
from services.spec.ids import keyed_job_id, kube_job_id, random_job_id, tenant_tag, untagged_keyed_job_id
from tests.builders.tenants import COLLIDING
from tests.queue_manager.builders import NOW, folded_state, queue_manager, submit
from tests.queue_manager.fakes import MemoryProducer

A, B = tenant_intents_topic("team-a"), tenant_intents_topic("team-b")


def test_topic_names() -> None:
    assert A == "muster.intents.team-a.v1"
    assert intents_topic_tenant(A) == "team-a"
    assert intents_topic_tenant("muster.intents.a.b.v1") == "a.b"
    for other in (INTENTS_TOPIC, "muster.intents.team-a.v1.dlq", "muster.runs.v1", "muster.intents..v1"):
        assert intents_topic_tenant(other) is None
    assert is_intents_topic(INTENTS_TOPIC) and is_intents_topic(A) and not is_intents_topic(JOBS_TOPIC)


def test_the_input_pattern() -> None:
    import re

    pattern = re.compile(INPUT_PATTERN)
    for topic in (INTENTS_TOPIC, A, "muster.runs.v1", "muster.dispatches.v1"):
        assert pattern.match(topic), topic
    for topic in ("muster.intents.v1.dlq", A + ".dlq", "muster.decisions.v1", "muster.jobs.v1", "muster.runsXv1"):
        assert not pattern.match(topic), topic


def test_a_submission_must_name_the_topics_tenant() -> None:
    qs = folded_state()
    own = of_tenant(random_job_id("j1", "team-a"), "team-a")
    forged = own.model_copy(update={"tenant": "team-b"})
    assert unproven(qs, A, own) is None
    reason = unproven(qs, A, forged)
    assert reason is not None and "'team-b'" in reason and A in reason
    assert unproven(qs, B, own) is not None  # team-a's job written where only team-b writes
    assert unproven(qs, INTENTS_TOPIC, forged) is None  # the gateway's topic: its word is taken


@pytest.mark.parametrize(("job_id", "accepted"), [
    (random_job_id("train", "team-a"), True),
    (keyed_job_id("train", "team-a", "run-42"), True),
    (kube_job_id("ns-team-a", "train", "uid-1", tenant="team-a"), True),
    (keyed_job_id("train", "team-b", "run-42"), False),  # the id team-b's keyed submission will get
    (random_job_id("train", "team-b"), False),
    (untagged_keyed_job_id("train", "team-b", "run-42"), False),  # an id of before tags: no claim either
    (untagged_keyed_job_id("train", "team-a", "run-42"), False),
    ("j1", False),
])
def test_a_submission_on_a_tenant_topic_must_use_an_id_of_that_tenant(job_id: str, accepted: bool) -> None:
    qs = folded_state()
    reason = unproven(qs, A, of_tenant(job_id, "team-a"))
    assert (reason is None) == accepted, reason
    if reason is not None:
        assert job_id in reason and tenant_tag("team-a") in reason and "team-b" not in reason
    assert unproven(qs, INTENTS_TOPIC, of_tenant(job_id, "team-a")) is None  # the gateway mints its own ids


#: ids held by the state of ``two_tenants``, by who holds them (the ``legacy`` ones have no tag)
A_JOB, B_JOB = random_job_id("a-job", "team-a"), random_job_id("b-job", "team-b")
A_LEGACY, B_LEGACY = "a-legacy-0123abcd", "b-legacy-0123abcd"
#: an id with team-b's tag that team-a's job has (possible only for an id of before tags), and the reverse
A_LOOKS_B, B_LOOKS_A = f"a-odd-{tenant_tag('team-b')}-0123abcd", f"b-odd-{tenant_tag('team-a')}-0123abcd"
#: ids of no job held
A_UNKNOWN, B_UNKNOWN, UNKNOWN_LEGACY = random_job_id("a-ghost", "team-a"), random_job_id("b-ghost", "team-b"), \
    "ghost-legacy-0123abcd"
REQUESTS: list[Callable[[str], Message]] = [
    lambda j: CancelJob(job_id=j, requested_by="mallory"),
    lambda j: SuspendJob(job_id=j, requested_by="mallory"),
    lambda j: ResumeJob(job_id=j, requested_by="mallory"),
    lambda j: ChangePriority(job_id=j, priority_class="high", requested_by="mallory"),
    lambda j: ScaleJob(job_id=j, replicas=2, requested_by="mallory"),
]


def two_tenants() -> QueueState:
    """team-a's and team-b's queues, and jobs of both: tagged and without a tag, odd ones included."""
    qs = folded_state()
    for msg in (QueueDefined(item=QueueConfig(name="team-b", tenant="team-b")),
                TenantDefined(item=TenantConfig(name="team-b", namespace="ns-team-b"))):
        qs.fold_config(msg.key(), msg)
    for job_id, tenant in ((A_JOB, "team-a"), (A_LEGACY, "team-a"), (A_LOOKS_B, "team-a"),
                           (B_JOB, "team-b"), (B_LEGACY, "team-b"), (B_LOOKS_A, "team-b")):
        on_input(qs, of_tenant(job_id, tenant), "e-" + job_id, NOW)
    return qs


def verdict(qs: QueueState, topic: str, message: Message) -> str:
    """What the queue manager does with a request before looking at the job: dead-letter, drop, or fold it."""
    if unproven(qs, topic, message) is not None:
        return "dead letter"
    return "dropped" if ignored(qs, topic, message) is not None else "folded"


@pytest.mark.parametrize("request_of", REQUESTS)
@pytest.mark.parametrize(("job_id", "expected"), [
    (A_JOB, "folded"),
    (A_LEGACY, "folded"),
    (A_LOOKS_B, "folded"),  # its own job, whatever the id looks like
    (A_UNKNOWN, "folded"),  # ignored there as unknown, or another shard's
    (UNKNOWN_LEGACY, "folded"),  # ignored there as unknown
    (B_JOB, "dead letter"),
    (B_UNKNOWN, "dead letter"),  # the same as for team-b's existing job
    (B_LEGACY, "dropped"),  # the same as for an unknown id: nothing is answered
    (B_LOOKS_A, "dropped"),
])
def test_a_request_is_judged_by_its_ids_tag_never_by_whether_the_job_exists(
        request_of: Callable[[str], Message], job_id: str, expected: str) -> None:
    qs = two_tenants()
    message = request_of(job_id)
    assert verdict(qs, A, message) == expected
    assert verdict(qs, INTENTS_TOPIC, message) == "folded"  # the gateway's topic: its word is taken


@pytest.mark.parametrize("request_of", REQUESTS)
def test_a_refusal_reads_the_same_whether_or_not_the_other_tenants_job_exists(
        request_of: Callable[[str], Message]) -> None:
    qs = two_tenants()
    held, unknown = (unproven(qs, A, request_of(j)) for j in (B_JOB, B_UNKNOWN))
    assert held is not None and unknown is not None
    assert held.replace(B_JOB, "<id>") == unknown.replace(B_UNKNOWN, "<id>")
    assert "team-b" not in held  # the owner is not named


def test_tenants_whose_tags_are_the_same_get_no_submission_through_their_topics() -> None:
    a, b = COLLIDING
    qs = folded_state()
    own = of_tenant(random_job_id("train", a), a).model_copy(update={"spec": submit("x").spec})
    assert unproven(qs, tenant_intents_topic(a), own) is None
    qs.fold_config(f"tenant/{b}", TenantDefined(item=TenantConfig(name=b, namespace=b)))
    reason = unproven(qs, tenant_intents_topic(a), own)
    assert reason is not None and "same tag" in reason and b not in reason
    assert unproven(qs, INTENTS_TOPIC, own) is None


def test_a_pair_of_tenants_with_one_tag_is_reported_once() -> None:
    a, b = COLLIDING
    qs, watch = folded_state(), TagWatch()
    first = TenantDefined(item=TenantConfig(name=a, namespace=a))
    qs.fold_config(first.key(), first)
    assert watch.note(qs.config, first) == []
    second = QueueDefined(item=QueueConfig(name="q", tenant=b))  # a tenant named by a queue only
    qs.fold_config(second.key(), second)
    [line] = watch.note(qs.config, second)
    assert f"{b!r} and {a!r}" in line and tenant_tag(a) in line
    assert watch.note(qs.config, second) == []  # told once
    assert watch.note(qs.config, None) == []


async def test_the_queue_manager_logs_a_pair_of_tenants_with_one_tag(caplog: pytest.LogCaptureFixture) -> None:
    a, b = COLLIDING
    qm = _manager()
    for i, tenant in enumerate((a, b)):
        defined = make_envelope(TenantDefined(item=TenantConfig(name=tenant, namespace=f"ns-{i}")), "gateway")
        qm._on_config(defined.key(), defined)
    assert [r.levelname for r in caplog.records if "same job id tag" in r.getMessage()] == ["ERROR"]


def of_tenant(job_id: str, tenant: str) -> SubmitJob:
    """A submission of ``tenant`` as ``job_id`` to the tenant's queue (named as the tenant)."""
    msg = submit(job_id)
    return msg.model_copy(update={"tenant": tenant, "spec": msg.spec.model_copy(update={"queue": tenant})})


def test_a_tenant_topic_is_decoded_as_an_intents_topic_by_a_shard() -> None:
    qs = folded_state()
    raw = make_envelope(CancelJob(job_id="j-of-another-shard", requested_by="x"), "p").model_dump_json().encode()
    # an unsharded instance never passes over; what matters is that a tenant topic is not taken for a run topic
    assert passes_over(qs, A, b"j-of-another-shard", raw) is False


def _manager() -> QueueManager:
    manager: QueueManager = queue_manager()
    return manager


def _delivery(topic: str, producer: MemoryProducer, offset: int = 1) -> Delivery:
    return Delivery(topic=topic, partition=0, offset=offset, key=b"k", timestamp_ms=0, attempt=1,
                    _producer=cast(EnvelopeProducer, producer))


async def test_the_handler_refuses_a_forgery_before_it_touches_the_state() -> None:
    qm, producer = _manager(), MemoryProducer()
    j1, j2 = random_job_id("j1", "team-a"), random_job_id("j2", "team-a")
    forged = make_envelope(submit(j1).model_copy(update={"tenant": "team-b"}), "pipeline")
    with pytest.raises(Refused) as refused:
        await qm.handle(forged, _delivery(A, producer))
    assert refused.value.reason == TENANT_NOT_PROVEN
    assert j1 not in qm.state.jobs and producer.sent == []
    claim = make_envelope(submit(keyed_job_id("j2", "team-b", "k")), "pipeline")  # team-b's id, team-a's job
    with pytest.raises(Refused) as refused:
        await qm.handle(claim, _delivery(A, producer, 2))
    assert refused.value.reason == TENANT_NOT_PROVEN and qm.state.jobs == {} and producer.sent == []
    honest = make_envelope(submit(j2), "pipeline")
    ok = _delivery(A, producer, 3)
    await qm.handle(honest, ok)
    await ok.settle()
    assert j2 in qm.state.jobs


async def test_the_handler_drops_a_request_about_another_tenants_job_as_one_about_no_job() -> None:
    """Without a tag to judge by, a request about another tenant's job and one about no job end alike: no
    dead letter, nothing published, the job untouched."""
    qm, producer = _manager(), MemoryProducer()
    qm.state = two_tenants()
    before = qm.state.jobs[B_LEGACY].state
    for offset, job_id in enumerate((B_LEGACY, UNKNOWN_LEGACY)):
        delivery = _delivery(A, producer, offset)
        await qm.handle(make_envelope(CancelJob(job_id=job_id, requested_by="mallory"), "pipeline"), delivery)
        await delivery.settle()
    assert producer.sent == [] and qm.state.jobs[B_LEGACY].state == before
    assert qm.state.jobs[B_LEGACY].last_action is None  # nothing answered in its status either


def _with_env(job_id: str, env: dict[str, object]) -> SubmitJob:
    msg = submit(job_id)
    template = msg.spec.template.model_copy(update={"env": env})
    return msg.model_copy(update={"spec": msg.spec.model_copy(update={"template": template})})


def test_a_tenant_topics_submission_with_a_plain_secret_is_refused() -> None:
    leaky = _with_env("j1", {"HF_TOKEN": "hf_abc", "EPOCHS": "3"})
    reason = plain_secret_refusal(A, leaky)
    assert reason is not None and "HF_TOKEN" in reason and "hf_abc" not in reason and "EPOCHS" not in reason
    assert plain_secret_refusal(A, _with_env("j2", {"EPOCHS": "3"})) is None
    assert plain_secret_refusal(INTENTS_TOPIC, leaky) is None  # the gateway's topic: it refused them already
    assert plain_secret_refusal(A, CancelJob(job_id="j1", requested_by="x")) is None


async def test_the_handler_dead_letters_a_plain_secret_from_a_tenant_topic() -> None:
    qm, producer = _manager(), MemoryProducer()
    leaky = make_envelope(_with_env(random_job_id("j1", "team-a"), {"DB_PASSWORD": "hunter2"}), "pipeline")
    delivery = Delivery(topic=A, partition=0, offset=1, key=b"j1", timestamp_ms=0, attempt=1,
                        _producer=cast(EnvelopeProducer, producer))
    with pytest.raises(Refused) as refused:
        await qm.handle(leaky, delivery)
    assert refused.value.reason == PLAIN_SECRET_ENV and "DB_PASSWORD" in refused.value.detail
    assert qm.state.jobs == {} and producer.sent == []
