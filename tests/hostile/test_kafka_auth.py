"""The raw Kafka path on an authenticated cluster (SASL/SCRAM, ``StandardAuthorizer``, the ACL table of
``services.runtime.kafka.acls``), tried as a hostile tenant would: without credentials, with a wrong
password, as tenant team-a writing and reading team-b's intents, forging a team-b submission and
cancelling team-b's job from its own topic, claiming the id team-b's keyed submission will get, and probing
whether team-b's job ids exist. Every service runs as its own principal, so the whole system
working here is also the proof that the ACL table grants each service what it needs."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAuthorizationFailedError
from aiokafka.structs import TopicPartition
from pydantic import SecretStr

from schemas.config import MusterConfig
from schemas.decisions import JobAdmitted, JobRejected
from schemas.topics import DECISIONS_TOPIC, INTENTS_TOPIC, STATUS_TOPIC, dlq_topic, tenant_intents_topic
from services.runtime.broker import BOOTSTRAP_ENV, KafkaBroker
from services.runtime.broker.security import BrokerSecurity
from services.runtime.kafka import ConsumerLoop, KafkaSettings
from services.runtime.kafka.acls import SERVICE_PRINCIPALS, tenant_principal
from services.runtime.kafka.principals import KafkaCredentials
from services.runtime.kafka.provision import provision
from services.spec.ids import keyed_job_id, random_job_id
from tests.e2e.builders import TENANTS, job_spec
from tests.e2e.system import System, running_system
from tests.hostile.builders import assert_all_running, hostile_config, namespace_of, submit_envelope
from tests.hostile.kafka import read_dead_letters
from tests.hostile.records import envelope

pytestmark = pytest.mark.e2e

A, B = tenant_intents_topic("team-a"), tenant_intents_topic("team-b")


@dataclass(frozen=True)
class Secured:
    bootstrap: str
    credentials: KafkaCredentials

    def admin(self) -> KafkaSettings:
        return self.credentials.admin(self.bootstrap, client_id="hostile-admin", request_timeout_ms=15_000)

    def tenant(self, tenant: str) -> KafkaSettings:
        return self.credentials.tenant(tenant, self.bootstrap, client_id=f"hostile-{tenant}", request_timeout_ms=10_000)

    def services(self) -> dict[str, KafkaSettings]:
        return {name: self.credentials.service(name, self.bootstrap, request_timeout_ms=15_000)
                for name in SERVICE_PRINCIPALS}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """One authenticated Apache Kafka node of this module, provisioned as ``muster up --auth`` does."""
    import os

    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"needs a broker the launcher starts with authentication; {BOOTSTRAP_ENV} names another")
    credentials = KafkaCredentials.for_tenants(TENANTS)
    broker = KafkaBroker(log_dir=tmp_path_factory.mktemp("kafka-auth"), security=BrokerSecurity(credentials)).start()
    try:
        secured = Secured(broker.bootstrap, credentials)
        asyncio.run(provision(secured.admin(), credentials, TENANTS))
        yield secured
    finally:
        broker.close()


@pytest.fixture
async def system(secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[System]:
    # the queue manager looks for new intents topics (a tenant added) every 2 s instead of every 30 s
    monkeypatch.setattr(ConsumerLoop, "PATTERN_REFRESH_MS", 2000)
    config: MusterConfig = hostile_config()
    async with running_system(secured.admin(), config, tmp_path, principals=secured.services()) as running:
        yield running


@contextlib.asynccontextmanager
async def producer(settings: KafkaSettings) -> AsyncIterator[AIOKafkaProducer]:
    p = AIOKafkaProducer(**settings.client_options(), acks="all", enable_idempotence=True)
    try:
        await p.start()
        yield p
    finally:
        await p.stop()


async def read_from(settings: KafkaSettings, topic: str) -> list[Any]:
    """Read ``topic`` from the beginning as ``settings``' principal, or the broker's refusal: the consumer
    asks for the topic's metadata first, as a subscription does (aiokafka's consumer only logs a refusal of
    an assigned topic's metadata, and then has no leader to fetch from)."""
    consumer = AIOKafkaConsumer(**settings.client_options(), group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    try:
        await consumer.start()
        await consumer._client._wait_on_metadata(topic)  # TopicAuthorizationFailedError when refused
        consumer.assign([TopicPartition(topic, p) for p in range(12)])
        batch = await consumer.getmany(timeout_ms=3000)
        return [r for records in batch.values() for r in records]
    finally:
        await consumer.stop()


def value(envelope: dict[str, Any]) -> bytes:
    return orjson.dumps(envelope)


# ---------------------------------------------------------------- the broker alone


async def test_no_credentials_no_access(secured: Secured) -> None:
    anonymous = KafkaSettings(bootstrap=secured.bootstrap, request_timeout_ms=5000)
    with pytest.raises(KafkaConnectionError):
        async with producer(anonymous):
            pass
    wrong = secured.tenant("team-a").model_copy(update={"sasl_password": SecretStr("not-the-password")})
    with pytest.raises(KafkaError):
        async with producer(wrong):
            pass
    unknown = secured.tenant("team-a").model_copy(update={"sasl_username": "tenant-nobody"})
    with pytest.raises(KafkaError):
        async with producer(unknown):
            pass


async def test_a_tenant_may_not_write_or_read_another_tenants_intents(secured: Secured) -> None:
    team_a = secured.tenant("team-a")
    _, honest = submit_envelope(job_spec("own-topic"), tenant="team-a")
    async with producer(team_a) as p:
        await p.send_and_wait(A, value(honest), key=b"own-topic")  # its own topic: allowed
        for topic in (B, INTENTS_TOPIC, DECISIONS_TOPIC):
            with pytest.raises(TopicAuthorizationFailedError):
                await p.send_and_wait(topic, value(honest), key=b"elsewhere")
    assert len(await read_from(team_a, A)) >= 1
    for topic in (B, INTENTS_TOPIC, STATUS_TOPIC, dlq_topic(B)):
        with pytest.raises(TopicAuthorizationFailedError):
            await read_from(team_a, topic)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (Debian: apt-get install -y kcat)")
async def test_kcat_without_credentials_is_refused(secured: Secured) -> None:
    """kcat as the issue's hostile tenant ran it. (With a tenant's credentials Debian's kcat cannot log in
    at all: librdkafka before 2.6.1 builds a wrong SCRAM nonce, which Kafka 4 rejects; see docs/security.md.)"""
    _, envelope = submit_envelope(job_spec("kcat-b"), tenant="team-b")
    line = f"kcat-b\t{orjson.dumps(envelope).decode()}\n".encode()
    for topic in (INTENTS_TOPIC, B):
        process = await asyncio.create_subprocess_exec(
            "kcat", "-P", "-b", secured.bootstrap, "-t", topic, "-K", "\t", "-X", "message.timeout.ms=8000",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await asyncio.wait_for(process.communicate(line), 30)
        assert process.returncode != 0
    admin = secured.admin()
    assert [r for r in await read_from(admin, B) if r.key == b"kcat-b"] == []


# ---------------------------------------------------------------- the whole system, each service its own principal


async def test_forged_intents_are_dead_lettered_and_the_victims_job_keeps_running(
        system: System, secured: Secured) -> None:
    team_a = secured.tenant("team-a")
    # team-b's long job, through the gateway (which keeps working for every tenant)
    victim = await system.api.submit(job_spec("victim", queue="team-b", duration_s=600), tenant="team-b")
    await system.api.wait_state(victim, "running", within=60)

    forged_id, forged = submit_envelope(job_spec("forged", queue="team-b", duration_s=0.3), tenant="team-b")
    honest_id, honest = submit_envelope(job_spec("honest", duration_s=0.3), tenant="team-a")
    cancel = {**forged, "event_id": "cancel-" + forged["event_id"], "type": "CancelJob",
              "payload": {"job_id": victim, "requested_by": "mallory", "reason": "forged"}}
    async with producer(team_a) as p:
        await p.send_and_wait(A, value(forged), key=forged_id.encode())
        await p.send_and_wait(A, value(cancel), key=victim.encode())
        await p.send_and_wait(A, value(honest), key=honest_id.encode())

    letters = await read_dead_letters(system.settings, [A], count=2, settle_s=1.0)
    assert sorted((d.key, d.reason) for d in letters) == sorted(
        [(forged_id.encode(), "tenant_not_proven"), (victim.encode(), "tenant_not_proven")])
    assert all(d.source_topic == A for d in letters)

    # the honest submission on team-a's own topic runs, in team-a's namespace
    [admitted] = await system.log.wait_for(JobAdmitted, job_id=honest_id, within=30)
    assert admitted.namespace == namespace_of("team-a")
    assert (await system.api.wait_state(honest_id, "succeeded", "failed", within=60))["state"] == "succeeded"
    # the forgery never became a job; the victim's job still runs
    missing = await system.api.http.get(f"/v1/jobs/{forged_id}", headers=system.api._auth("team-b"))
    assert missing.status_code == 404
    assert (await system.api.job(victim, tenant="team-b"))["state"] == "running"

    # team-a may read its own dead letters (why it was refused), team-b's not
    assert len(await read_from(team_a, dlq_topic(A))) == 2
    with pytest.raises(TopicAuthorizationFailedError):
        await read_from(team_a, dlq_topic(B))

    # the gateway still serves both tenants; the victim's owner may cancel it
    job_a = await system.api.submit(job_spec("via-gateway-a", duration_s=0.3), tenant="team-a")
    job_b = await system.api.submit(job_spec("via-gateway-b", queue="team-b", duration_s=0.3), tenant="team-b")
    for job_id in (job_a, job_b):
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"
    await system.api.cancel(victim, tenant="team-b")
    assert (await system.api.wait_state(victim, "cancelled", within=60))["state"] == "cancelled"
    assert_all_running(system)


async def test_a_tenant_added_while_the_system_runs_is_read_and_held_to_its_topic(
        system: System, secured: Secured) -> None:
    """A new tenant (its user, topic and ACLs provisioned as ``muster up`` does on its next start, or
    ``muster topics create --tenant team-c --acls``) is picked up by the running queue manager's
    subscription; its intents are judged as its own, like any tenant's."""
    credentials = secured.credentials.including([tenant_principal("team-c")])
    await provision(secured.admin(), credentials, (*TENANTS, "team-c"))
    team_c = credentials.tenant("team-c", secured.bootstrap, request_timeout_ms=10_000)
    topic = tenant_intents_topic("team-c")
    own_id, own = submit_envelope(job_spec("team-c-job"), tenant="team-c")  # team-a's queue: not its own
    forged_id, forged = submit_envelope(job_spec("team-c-forged"), tenant="team-a")
    async with producer(team_c) as p:
        await p.send_and_wait(topic, value(own), key=own_id.encode())
        await p.send_and_wait(topic, value(forged), key=forged_id.encode())
    [rejected] = await system.log.wait_for(JobRejected, job_id=own_id, within=60)
    assert rejected.reason == "forbidden_queue"  # read from the new topic, and judged as team-c's
    [letter] = await read_dead_letters(system.settings, [topic], count=1, settle_s=1.0)
    assert (letter.key, letter.reason) == (forged_id.encode(), "tenant_not_proven")
    assert_all_running(system)


# ---------------------------------------------------------------- job ids: no claiming, no probing


def _request(kind: str, job_id: str) -> dict[str, Any]:
    """A ``CancelJob`` or ``SuspendJob`` envelope as team-a's pipeline writes it."""
    payload: dict[str, Any] = {"job_id": job_id, "requested_by": "mallory"}
    if kind == "CancelJob":
        payload["reason"] = "probe"
    return envelope(kind, payload, occurred_at=datetime.now(UTC).isoformat())


async def test_a_tenant_cannot_claim_the_id_of_another_tenants_keyed_submission(
        system: System, secured: Secured) -> None:
    """team-a knows (or guesses) the name and idempotency key of team-b's nightly job, so the id the key gives:
    it submits a job of its own under that id first, on its own topic. The queue manager refuses the id (not
    one of team-a's), and team-b's keyed POST is a new job of team-b's, queued."""
    key = f"nightly-{uuid.uuid4().hex[:8]}"
    target = keyed_job_id("nightly", "team-b", key)
    _, claim = submit_envelope(job_spec("nightly", duration_s=600), tenant="team-a", job_id=target)
    async with producer(secured.tenant("team-a")) as p:
        await p.send_and_wait(A, value(claim), key=target.encode())
    [letter] = await read_dead_letters(system.settings, [A], count=1, within=30, settle_s=0.5,
                                       keys={target.encode()})
    assert letter.reason == "tenant_not_proven" and letter.detail is not None and "team-b" not in letter.detail

    r = await system.api.http.post("/v1/jobs", json=job_spec("nightly", queue="team-b", duration_s=600),
                                   headers={**system.api._auth("team-b"), "Idempotency-Key": key})
    assert r.status_code == 202, r.text
    assert (r.json()["job_id"], r.json()["duplicate"]) == (target, False)
    job = await system.api.wait_state(target, "pending", "admitted", "running", within=60)
    assert (job["tenant"], job["queue"]) == ("team-b", "team-b")
    [admitted] = await system.log.wait_for(JobAdmitted, job_id=target, within=30)
    assert admitted.namespace == namespace_of("team-b")
    missing = await system.api.http.get(f"/v1/jobs/{target}", headers=system.api._auth("team-a"))
    assert missing.status_code == 404
    assert_all_running(system)


async def test_a_tenant_cannot_tell_whether_another_tenants_job_exists(system: System, secured: Secured) -> None:
    """team-a cancels and suspends, on its own topic, a job of team-b's that exists and one that does not:
    with team-b's tag, both are dead-lettered alike; without a tag (ids of before tags), both are dropped
    without a word. team-b's jobs run on."""
    run = uuid.uuid4().hex[:8]
    existing = await system.api.submit(job_spec("probed", queue="team-b", duration_s=600), tenant="team-b")
    ghost = random_job_id("probed", "team-b")
    legacy, legacy_ghost = f"probed-{run}", f"ghost-{run}"  # ids without a tag, as made before tags
    _, old = submit_envelope(job_spec("probed", queue="team-b", duration_s=600), tenant="team-b", job_id=legacy)
    async with producer(secured.admin()) as p:  # the gateway's topic, as a job of before tags came in
        await p.send_and_wait(INTENTS_TOPIC, value(old), key=legacy.encode())
    for job_id in (existing, legacy):
        await system.api.wait_state(job_id, "running", within=60)

    kinds = ("CancelJob", "SuspendJob")
    async with producer(secured.tenant("team-a")) as p:
        for job_id in (existing, ghost, legacy, legacy_ghost):
            for kind in kinds:
                await p.send_and_wait(A, value(_request(kind, job_id)), key=job_id.encode())
        for job_id in (legacy, legacy_ghost):  # after them on the same partition: a refused submission, a marker
            _, marker = submit_envelope(job_spec("marker", queue="team-b"), tenant="team-b", job_id=job_id)
            await p.send_and_wait(A, value(marker), key=job_id.encode())

    ours = {j.encode() for j in (existing, ghost, legacy, legacy_ghost)}
    by_key: dict[bytes, list[str]] = {}
    for d in await read_dead_letters(system.settings, [A], count=6, within=60, settle_s=1.0, keys=ours):
        assert d.reason == "tenant_not_proven" and d.detail is not None and d.key is not None
        by_key.setdefault(d.key, []).append(d.detail)
    # team-b's tag: the same dead letters, word for word but the id, whether or not the job exists
    seen = {job_id: sorted(t.replace(job_id, "<id>") for t in by_key.get(job_id.encode(), []))
            for job_id in (existing, ghost)}
    assert len(seen[existing]) == len(kinds) and seen[existing] == seen[ghost]
    assert all("team-b" not in text for text in seen[existing])
    # no tag: nothing for either request but the marker that followed them
    for job_id in (legacy, legacy_ghost):
        [marker_letter] = by_key.get(job_id.encode(), [])
        assert marker_letter.startswith("a submission for tenant 'team-b'")
    for job_id in (existing, legacy):
        job = await system.api.job(job_id, tenant="team-b")
        assert job["state"] == "running" and job["last_action"] is None
    assert_all_running(system)
