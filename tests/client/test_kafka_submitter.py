"""``KafkaSubmitter``: validation before anything is sent, the gateway's job ids (with the tenant's tag), and
records on a real broker's ``muster.intents.v1`` that decode as the queue manager reads them."""

from __future__ import annotations

import httpx
import pytest

from muster.client import AsyncClient, InvalidSpec, KafkaSubmitter, SubmitAccepted, TransportError
from schemas.codec import decode
from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.runtime.kafka import KafkaSettings
from services.spec.ids import job_id_of_tenant, keyed_job_id, random_job_id, tenant_tag
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import TOKENS, Harness, harness, spec_json
from tests.integration.builders import read_all


def submitter(**options: object) -> KafkaSubmitter:
    return KafkaSubmitter(tenant="team-a", user="nightly-pipeline", **options)  # type: ignore[arg-type]


def test_an_invalid_spec_is_refused_with_every_field() -> None:
    bad = spec_json()
    bad["template"]["resources"]["gpus"] = 1000
    bad["replicas"] = 0
    with pytest.raises(InvalidSpec) as refused:
        submitter().intent(bad)
    assert {e["field"] for e in refused.value.errors} == {"spec.template.resources.gpus", "spec.replicas"}
    assert str(refused.value).startswith("invalid job spec: spec.")
    with pytest.raises(InvalidSpec, match="recurring jobs are defined through the gateway"):
        submitter().intent(spec_json(schedule="0 2 * * *"))
    with pytest.raises(InvalidSpec, match=r"intent\.idempotency_key"):
        submitter().intent(job_spec(), idempotency_key="k" * 200)
    huge = job_spec().model_copy(update={"annotations": {f"k{i}": "v" * 200 for i in range(6000)}})
    with pytest.raises(InvalidSpec, match="the limit is"):
        submitter().envelope(submitter().intent(huge))


def test_an_intent_carries_tenant_user_and_spec() -> None:
    intent = submitter().intent(spec_json("etl-step"))
    assert isinstance(intent, SubmitJob)
    assert (intent.tenant, intent.user, intent.spec.name) == ("team-a", "nightly-pipeline", "etl-step")
    assert intent.job_id.startswith(f"etl-step-{tenant_tag('team-a')}-") and intent.idempotency_key is None
    assert job_id_of_tenant(intent.job_id, "team-a")  # what the queue manager accepts on team-a's topic
    assert submitter().intent(spec_json("etl-step")).job_id != intent.job_id  # no key: a fresh id each time
    envelope = submitter(producer="airflow").envelope(intent, correlation_id="dag-run-7")
    assert (envelope.producer, envelope.correlation_id, envelope.key()) == ("airflow", "dag-run-7", intent.job_id)


def test_a_given_job_id_must_be_one_of_the_tenants() -> None:
    own = random_job_id("etl-step", "team-a")
    assert submitter().intent(spec_json("etl-step"), job_id=own).job_id == own
    for other in (random_job_id("etl-step", "team-b"), "etl-step-0123abcd"):
        with pytest.raises(InvalidSpec, match=r"intent\.job_id"):
            submitter().intent(spec_json("etl-step"), job_id=other)


async def test_a_key_names_the_same_job_as_through_the_gateway() -> None:
    gw: Harness = harness()
    async with AsyncClient("http://gateway", TOKENS["alice"], transport=httpx.ASGITransport(app=gw.app)) as api:
        accepted = await api.submit(job_spec("etl-step"), idempotency_key="2026-11-01")
    assert isinstance(accepted, SubmitAccepted)
    assert submitter().intent(job_spec("etl-step"), idempotency_key="2026-11-01").job_id == accepted.job_id
    assert accepted.job_id == keyed_job_id("etl-step", "team-a", "2026-11-01")


async def test_sending_needs_a_started_submitter_and_a_broker() -> None:
    idle = submitter(settings=KafkaSettings(bootstrap="127.0.0.1:9"))
    with pytest.raises(TransportError, match="not started"):
        await idle.submit(job_spec())
    with pytest.raises(TransportError, match=r"cannot reach Kafka at 127\.0\.0\.1:9"):
        await idle.start()
    await idle.stop()


@pytest.mark.integration
async def test_submissions_land_on_the_intents_topic_acknowledged(registry_settings: KafkaSettings) -> None:
    async with submitter(settings=registry_settings) as pipeline:
        first = await pipeline.submit(spec_json("etl-step"), idempotency_key="run-1", correlation_id="dag-1")
        again = await pipeline.submit(job_spec("etl-step"), idempotency_key="run-1")
        other = await pipeline.submit(job_spec("etl-step"))
        with pytest.raises(InvalidSpec):
            await pipeline.submit({"name": "broken"})
    assert first.job_id == again.job_id != other.job_id
    assert first.topic == INTENTS_TOPIC and first.offset >= 0
    records = await read_all(registry_settings, INTENTS_TOPIC)
    assert len(records) == 3  # the invalid spec sent nothing
    envelopes = [decode(r.value, topic=INTENTS_TOPIC) for r in records if r.value is not None]
    by_event = {e.event_id: (r, e) for r, e in zip(records, envelopes, strict=True)}
    record, envelope = by_event[first.event_id]
    assert (record.key, record.partition, record.offset) == (first.job_id.encode(), first.partition, first.offset)
    assert (envelope.type, envelope.producer, envelope.correlation_id) == ("SubmitJob", "pipeline", "dag-1")
    payload = envelope.payload
    assert isinstance(payload, SubmitJob)
    assert (payload.tenant, payload.user, payload.idempotency_key) == ("team-a", "nightly-pipeline", "run-1")
    # one job's records share a partition, so the queue manager sees them in order
    assert by_event[again.event_id][0].partition == record.partition
