"""Idempotent topic creation from the registry (``schemas.topics``), with a ``.dlq`` beside each topic."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code

from schemas.topics import TOPICS, TopicSpec, dlq_topic
from services.runtime.kafka.settings import KafkaSettings

MAX_REPLICATION = 3
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


async def create_topics(
    settings: KafkaSettings,
    plans: Iterable[TopicPlan],
    *,
    replication_factor: int | None = None,
    timeout_ms: int = 30_000,
) -> list[str]:
    """Create the planned topics that do not exist yet; existing ones are left as they are.

    ``replication_factor`` defaults to the number of brokers, at most ``MAX_REPLICATION``.
    Returns the names created by this call. Safe to run concurrently from several processes.
    """
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [plan for plan in plans if plan.name not in existing]
        if not missing:
            return []
        if replication_factor is None:
            brokers = (await admin.describe_cluster())["brokers"]
            replication_factor = max(1, min(MAX_REPLICATION, len(brokers)))
        request = [
            NewTopic(plan.name, plan.partitions, replication_factor, topic_configs=dict(plan.config))
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


async def ensure_registry_topics(
    settings: KafkaSettings,
    *,
    names: Iterable[str] | None = None,
    with_dlq: bool = True,
    replication_factor: int | None = None,
) -> list[str]:
    """Create the registry's topics (all, or those in ``names``) and their ``.dlq`` topics if missing."""
    specs = list(TOPICS.values()) if names is None else [TOPICS[name] for name in names]
    return await create_topics(settings, plans_for(specs, with_dlq=with_dlq), replication_factor=replication_factor)
