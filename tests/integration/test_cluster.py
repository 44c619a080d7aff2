"""Three Apache Kafka brokers: Muster's topics at replication factor 3 / min.insync.replicas 2, acks=all
writes, the refusal of unsafe settings, and the kit carrying on after a broker is killed with SIGKILL."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from click.testing import CliRunner

from schemas.envelope import Envelope, make_envelope
from schemas.intents import CancelJob
from schemas.topics import INTENTS_TOPIC, TOPICS, dlq_topic
from services.cli.main import cli as muster
from services.runtime.broker import KafkaCluster
from services.runtime.kafka import (
    ConsumerLoop,
    Delivery,
    EnvelopeProducer,
    KafkaSettings,
    LoopSettings,
    Replication,
    Topics,
    cluster_size,
    partition_leaders,
    topic_replication,
)
from tests.builders.broker import client_settings
from tests.integration.builders import eventually, read_all

pytestmark = pytest.mark.integration

RF3 = Replication(factor=3, min_insync=2)


@pytest.fixture
def settings(registry_cluster: KafkaCluster) -> KafkaSettings:
    return client_settings(registry_cluster, "muster-cluster-it")


async def describe(settings: KafkaSettings, topic: str) -> list[dict[str, Any]]:
    """The partitions of ``topic``: leader, replicas, isr."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        partitions: list[dict[str, Any]] = described["partitions"]
        return partitions
    finally:
        await admin.close()


def cancels(count: int, label: str) -> list[Envelope]:
    """Intents with distinct job ids, so they spread over the topic's partitions."""
    run = uuid.uuid4().hex[:6]
    return [make_envelope(CancelJob(job_id=f"j-{label}-{run}-{i}", requested_by="alice"), "test")
            for i in range(count)]


async def test_the_cluster_has_three_brokers_and_every_topic_three_replicas_two_in_sync(
    settings: KafkaSettings,
) -> None:
    assert await cluster_size(settings) == 3
    names = [name for topic in TOPICS for name in (topic, dlq_topic(topic))]
    # just created: on a busy machine the broker asked may not list every topic yet
    replication: dict[str, Replication] = {}
    async with asyncio.timeout(30):
        while len(replication) < len(names):
            replication = await topic_replication(settings, names)
            await asyncio.sleep(0 if len(replication) == len(names) else 0.5)
    assert replication == {name: RF3 for name in names}
    for partition in await describe(settings, INTENTS_TOPIC):
        assert sorted(partition["replicas"]) == [1, 2, 3] and sorted(partition["isr"]) == [1, 2, 3]
    # the leaders are spread over the brokers
    assert len({p["leader"] for p in await describe(settings, INTENTS_TOPIC)}) == 3


async def test_the_leaders_and_the_active_controller_are_known(
    registry_cluster: KafkaCluster, settings: KafkaSettings
) -> None:
    assert registry_cluster.active_controller() in {1, 2, 3}
    leaders = await partition_leaders(settings, [INTENTS_TOPIC])
    assert len(leaders) == TOPICS[INTENTS_TOPIC].partitions and set(leaders.values()) <= {1, 2, 3}


async def test_an_acks_all_write_is_acknowledged_and_read_back(settings: KafkaSettings) -> None:
    sent = cancels(20, "acks")
    async with EnvelopeProducer(settings) as producer:
        metadata = await asyncio.gather(*[producer.send_and_wait(INTENTS_TOPIC, e) for e in sent])
    assert all(m.offset >= 0 for m in metadata)
    assert len({m.partition for m in metadata}) > 1
    read = {r.key for r in await read_all(settings, INTENTS_TOPIC, idle_s=0.5)}
    assert {e.key().encode() for e in sent} <= read


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (["--replication-factor", "1"], "replication factor 1 < 3"),
        (["--replication-factor", "2"], "replication factor 2 < 3"),
        (["--min-insync-replicas", "1"], "min.insync.replicas 1 < 2"),
        (["--min-insync-replicas", "3"], "every write fails while any one replica is down"),
        (["--replication-factor", "4"], "needs 4 brokers; the cluster has 3"),
        (["--replication-factor", "4", "--allow-unsafe"], "needs 4 brokers; the cluster has 3"),
        (["--min-insync-replicas", "4"], "no write could succeed"),
    ],
)
def test_topics_create_refuses_an_unsafe_or_impossible_setting(
    registry_cluster: KafkaCluster, options: list[str], refusal: str
) -> None:
    result = CliRunner().invoke(muster, ["topics", "create", "--bootstrap", registry_cluster.bootstrap, *options])
    assert result.exit_code == 1, result.output
    assert refusal in result.output
    assert "Traceback" not in result.output


def test_topics_create_accepts_the_safe_default_and_an_unsafe_setting_when_told(registry_cluster: KafkaCluster) -> None:
    runner = CliRunner()
    safe = runner.invoke(muster, ["topics", "create", "--bootstrap", registry_cluster.bootstrap])
    assert safe.exit_code == 0, safe.output
    assert "3 brokers, replication factor 3, min.insync.replicas 2: created 0 topics (all existed)" in safe.output
    unsafe = runner.invoke(muster, ["topics", "create", "--bootstrap", registry_cluster.bootstrap,
                                    "--replication-factor", "1", "--allow-unsafe"])
    assert unsafe.exit_code == 0, unsafe.output
    assert "warning: replication factor 1, min.insync.replicas 1 is not safe for production" in unsafe.output


async def test_the_kit_keeps_working_after_a_broker_is_killed(
    registry_cluster: KafkaCluster, settings: KafkaSettings
) -> None:
    """SIGKILL the broker that leads most of the intents' partitions while a consumer-group member reads
    them: writes with acks=all go on (two replicas in sync), the loop reads and commits every record, and
    the node, started again, rejoins every in-sync replica set."""
    partitions = await describe(settings, INTENTS_TOPIC)
    victim = Counter(p["leader"] for p in partitions).most_common(1)[0][0]
    before, after = cancels(30, "before"), cancels(60, "after")
    seen: set[str] = set()

    async def handle(envelope: Envelope, delivery: Delivery) -> None:
        seen.add(envelope.event_id)

    async with EnvelopeProducer(settings) as producer:
        loop = ConsumerLoop(settings, LoopSettings(Topics([INTENTS_TOPIC]), group_id=f"g-{uuid.uuid4().hex[:8]}"),
                            handle, producer)
        task = asyncio.create_task(loop.run())
        try:
            await asyncio.wait_for(loop.wait_assigned(), 60)
            await asyncio.gather(*[producer.send_and_wait(INTENTS_TOPIC, e) for e in before])
            await eventually(lambda: {e.event_id for e in before} <= seen, within=30)

            await asyncio.to_thread(registry_cluster.kill_node, victim)
            acknowledged = await asyncio.wait_for(
                asyncio.gather(*[producer.send_and_wait(INTENTS_TOPIC, e) for e in after]), 60)
            assert len(acknowledged) == len(after)
            await eventually(lambda: {e.event_id for e in after} <= seen, within=60)
            assert not task.done(), "the loop stopped"
            # the victim's leaderships moved, and it left every in-sync replica set
            moved = await describe(settings, INTENTS_TOPIC)
            assert all(p["leader"] != victim and victim not in p["isr"] and len(p["isr"]) == 2 for p in moved)
        finally:
            loop.stop()
            await asyncio.wait_for(task, 60)
    assert loop.stats.dead_lettered == 0

    await asyncio.to_thread(registry_cluster.start_node, victim)

    async with asyncio.timeout(60):
        for _ in itertools.count():
            if all(sorted(p["isr"]) == [1, 2, 3] for p in await describe(settings, INTENTS_TOPIC)):
                break
            await asyncio.sleep(0.5)


async def test_the_whole_cluster_stops_and_starts_again_on_its_data_and_addresses(
    registry_cluster: KafkaCluster, settings: KafkaSettings
) -> None:
    sent = cancels(12, "restart")
    async with EnvelopeProducer(settings) as producer:
        await asyncio.gather(*[producer.send_and_wait(INTENTS_TOPIC, e) for e in sent])
    address = registry_cluster.bootstrap
    await asyncio.to_thread(registry_cluster.restart)
    assert registry_cluster.bootstrap == address and registry_cluster.running
    wanted = {e.key().encode() for e in sent}
    read: set[bytes | None] = set()
    async with asyncio.timeout(60):  # until every partition has its leader again
        while not wanted <= read:
            read = {r.key for r in await read_all(settings, INTENTS_TOPIC, idle_s=0.5)}
    assert await topic_replication(settings, [INTENTS_TOPIC]) == {INTENTS_TOPIC: RF3}
