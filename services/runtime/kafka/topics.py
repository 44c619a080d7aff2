"""Idempotent topic creation from the registry (``schemas.topics``), with a ``.dlq`` beside each topic."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from schemas.topics import TOPICS, TopicSpec, dlq_topic
from services.runtime.kafka import replication as rep
from services.runtime.kafka.replication import Replication
from services.runtime.kafka.settings import KafkaSettings

MAX_REPLICATION = rep.SAFE_REPLICATION_FACTOR
DLQ_CONFIG: Mapping[str, str] = {"cleanup.policy": "delete", "retention.ms": str(30 * 24 * 3600 * 1000)}


@dataclass(frozen=True)
class TopicPlan:
    """One topic to exist: name, partition count and topic-level configs."""

    name: str
    partitions: int
    config: Mapping[str, str]


def plans_for(specs: Iterable[TopicSpec], *, with_dlq: bool = True) -> list[TopicPlan]:
    """The topics of ``specs`` (cleanup policy from the spec) and, if asked, their dead-letter topics."""
    plans: list[TopicPlan] = []
    for spec in specs:
        config = {**spec.config, "cleanup.policy": spec.cleanup_policy}
        plans.append(TopicPlan(spec.name, spec.partitions, config))
        if with_dlq:
            plans.append(TopicPlan(dlq_topic(spec.name), spec.partitions, dict(DLQ_CONFIG)))
    return plans


async def cluster_size(settings: KafkaSettings) -> int:
    """How many brokers the cluster at ``settings.bootstrap`` has registered."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        return len((await admin.describe_cluster())["brokers"])
    finally:
        await admin.close()


async def create_topics(
    settings: KafkaSettings,
    plans: Iterable[TopicPlan],
    *,
    replication: Replication | None = None,
    replication_factor: int | None = None,
    timeout_ms: int = 30_000,
) -> list[str]:
    """Create the planned topics that do not exist yet; existing ones are left as they are.

    ``replication`` defaults to the cluster's (``replication.for_cluster``: factor min(3, brokers),
    ``min.insync.replicas`` 2 from three brokers on); ``replication_factor`` alone keeps that default's
    ``min.insync.replicas`` rule for the given factor. A plan's own ``min.insync.replicas`` wins.
    Returns the names created by this call. Safe to run concurrently from several processes.
    """
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [plan for plan in plans if plan.name not in existing]
        if not missing:
            return []
        if replication is None:
            brokers = len((await admin.describe_cluster())["brokers"])
            replication = rep.choose(brokers, factor=replication_factor)
        request = [
            NewTopic(plan.name, plan.partitions, replication.factor,
                     topic_configs={**replication.topic_config(), **plan.config})
            for plan in missing
        ]
        response = await admin.create_topics(request, timeout_ms=timeout_ms)
        created: list[str] = []
        for name, code, *rest in response.topic_errors:
            if code == 0:
                created.append(name)
                continue
            error = for_code(code)
            if error is TopicAlreadyExistsError:
                continue
            message = rest[0] if rest and rest[0] else error.__name__
            raise error(f"creating topic {name}: {message}")
        return created
    finally:
        await admin.close()


async def partition_leaders(settings: KafkaSettings, topics: Iterable[str], *,
                            attempts: int = 10) -> dict[tuple[str, int], int]:
    """The leader (broker id, -1 for none) of every partition of ``topics``, as the cluster's metadata says.

    A broker that has just died may still be the one asked: the question is asked again (a new client,
    ``attempts`` times in all, a quarter second apart) before the error is raised.
    """
    wanted = list(topics)
    for attempt in range(1, attempts + 1):
        admin = AIOKafkaAdminClient(**settings.client_options())
        try:
            await admin.start()
            return {(topic["topic"], p["partition"]): int(p["leader"])
                    for topic in await admin.describe_topics(wanted) for p in topic["partitions"]}
        except (KafkaError, OSError):
            if attempt == attempts:
                raise
        finally:
            await admin.close()
        await asyncio.sleep(0.25)
    raise AssertionError("unreachable")


async def topic_replication(settings: KafkaSettings, names: Iterable[str]) -> dict[str, Replication]:
    """The replication factor and ``min.insync.replicas`` each existing topic of ``names`` has now
    (missing topics are left out)."""
    wanted = list(names)
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        factors: dict[str, int] = {}
        for topic in await admin.describe_topics(wanted):
            if topic["error_code"] == 0 and topic["partitions"]:
                factors[topic["topic"]] = min(len(p["replicas"]) for p in topic["partitions"])
        if not factors:
            return {}
        resources = [ConfigResource(ConfigResourceType.TOPIC, name, configs={"min.insync.replicas": None})
                     for name in factors]
        minimums: dict[str, int] = {}
        for response in await admin.describe_configs(resources):
            for _code, _message, _type, name, entries, *_ in response.resources:
                for entry in entries:
                    if entry[0] == "min.insync.replicas":
                        minimums[name] = int(entry[1])
        return {name: Replication(factor, minimums.get(name, 1)) for name, factor in factors.items()}
    finally:
        await admin.close()


async def ensure_registry_topics(
    settings: KafkaSettings,
    *,
    names: Iterable[str] | None = None,
    with_dlq: bool = True,
    replication: Replication | None = None,
) -> list[str]:
    """Create the registry's topics (all, or those in ``names``) and their ``.dlq`` topics if missing,
    with ``replication`` (the cluster's default if omitted)."""
    specs = list(TOPICS.values()) if names is None else [TOPICS[name] for name in names]
    return await create_topics(settings, plans_for(specs, with_dlq=with_dlq), replication=replication)
