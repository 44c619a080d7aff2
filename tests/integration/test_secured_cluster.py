"""Three authenticated Apache Kafka nodes, as ``muster up --brokers 3`` runs them: the brokers replicate to each
other as SCRAM user ``broker`` and reach the controller quorum over SASL/PLAIN; services write with
``acks=all`` at replication factor 3 under the ACL table; a node killed and restarted logs in again and
catches up; a tenant still may not write a service's topic."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import ClusterAuthorizationFailedError, KafkaError, TopicAuthorizationFailedError

from muster.client import JobStatus, StatusConsumer, TransportError
from schemas.envelope import make_envelope
from schemas.status import JobStatusChanged
from schemas.topics import DECISIONS_TOPIC, INTENTS_TOPIC, STATUS_TOPIC, tenant_intents_topic
from services.runtime.broker import BOOTSTRAP_ENV, KafkaCluster
from services.runtime.broker.security import BrokerSecurity
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.kafka.acl_admin import describe_acls
from services.runtime.kafka.acls import acl_table
from services.runtime.kafka.principals import KafkaCredentials
from services.runtime.kafka.provision import provision
from services.runtime.kafka.reader import read_to_end
from services.runtime.kafka.topics import topic_replication

pytestmark = pytest.mark.integration

TENANTS = ("team-a", "team-b")
DASHBOARDS = ("ops",)


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaCredentials]]:
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"needs a cluster the launcher starts; {BOOTSTRAP_ENV} names an external broker")
    credentials = KafkaCredentials.for_tenants(TENANTS, DASHBOARDS)
    root: Path = tmp_path_factory.mktemp("kafka-auth-cluster")
    cluster = KafkaCluster(3, log_dir=root, security=BrokerSecurity(credentials)).start()
    try:
        asyncio.run(provision(credentials.admin(cluster.bootstrap), credentials, TENANTS, dashboards=DASHBOARDS))
        yield cluster, credentials
    finally:
        cluster.kill()
        cluster.close()


async def _produce(settings: KafkaSettings, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(**settings.client_options(), acks="all", enable_idempotence=True)
    try:
        await producer.start()
        await producer.send_and_wait(topic, value, key=b"k")
    finally:
        await producer.stop()


async def test_three_secured_nodes_replicate_and_survive_a_kill(
        secured_cluster: tuple[KafkaCluster, KafkaCredentials]) -> None:
    cluster, credentials = secured_cluster
    admin = credentials.admin(cluster.bootstrap, request_timeout_ms=15_000)
    qm = credentials.service("queue-manager", cluster.bootstrap, request_timeout_ms=15_000)
    replication = await topic_replication(admin, [DECISIONS_TOPIC, tenant_intents_topic("team-a")])
    assert {(r.factor, r.min_insync) for r in replication.values()} == {(3, 2)}
    for node in cluster.nodes:  # every broker enforces the same table
        assert set(acl_table(TENANTS, DASHBOARDS)) <= await describe_acls(admin, node_id=node.node_id)

    await _produce(qm, DECISIONS_TOPIC, b"before")
    cluster.kill_node(2)
    await _produce(qm, DECISIONS_TOPIC, b"one-node-down")  # two of three in sync: acks=all still holds
    await asyncio.to_thread(cluster.start_node, 2)  # logs in again as `broker` and catches up
    await _produce(qm, DECISIONS_TOPIC, b"after")

    team_a = credentials.tenant("team-a", cluster.bootstrap, request_timeout_ms=15_000)
    await _produce(team_a, tenant_intents_topic("team-a"), b"own")
    for topic in (DECISIONS_TOPIC, INTENTS_TOPIC, tenant_intents_topic("team-b")):
        with pytest.raises(TopicAuthorizationFailedError):
            await _produce(team_a, topic, b"forged")


async def test_a_dashboard_reads_every_jobs_status_and_writes_nothing_and_a_tenant_reads_no_status(
        secured_cluster: tuple[KafkaCluster, KafkaCredentials]) -> None:
    cluster, credentials = secured_cluster
    qm = credentials.service("queue-manager", cluster.bootstrap, request_timeout_ms=15_000)
    now = datetime.now(UTC)
    status = JobStatusChanged(job_id="other-b-1", tenant="team-b", queue="team-b", name="other", state="pending",
                              attempt=0, priority_class="normal", replicas=1, gpus=1, submitted_at=now,
                              updated_at=now)
    async with EnvelopeProducer(qm) as producer:
        await (await producer.send(STATUS_TOPIC, make_envelope(status, "queue-manager")))

    dashboard = credentials.dashboard("ops", cluster.bootstrap, request_timeout_ms=15_000)
    async with StatusConsumer(settings=dashboard, group="dashboard-ops.main") as statuses:
        async with asyncio.timeout(60):
            event = await anext(e async for e in statuses if isinstance(e, JobStatus))
    assert event.status == status  # every tenant's jobs: a platform-wide reader
    for topic in (STATUS_TOPIC, INTENTS_TOPIC, tenant_intents_topic("team-a")):
        # a principal that may write no topic at all is refused a producer id first (cluster authorization)
        with pytest.raises((TopicAuthorizationFailedError, ClusterAuthorizationFailedError)):
            await _produce(dashboard, topic, b"forged")
    with pytest.raises(KafkaError):  # the intents stay out of its sight
        await read_to_end(dashboard, {INTENTS_TOPIC: 1}, within_s=30)
    with pytest.raises(TransportError):  # a group outside dashboard-ops.*
        async with asyncio.timeout(60), StatusConsumer(settings=dashboard, group="muster-queue-manager") as stolen:
            await anext(aiter(stolen))

    # a tenant's principal reads no shared topic: not even its own jobs' statuses (the gateway shows those)
    team_a = credentials.tenant("team-a", cluster.bootstrap, request_timeout_ms=15_000)
    with pytest.raises(TransportError):
        async with asyncio.timeout(60), StatusConsumer(settings=team_a, group="tenant-team-a.status") as peeking:
            await anext(aiter(peeking))
