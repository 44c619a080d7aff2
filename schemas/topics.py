"""The topic registry: name, key, partitions, cleanup policy, the one producing service, message types."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from schemas.capacity import CAPACITY
from schemas.config import CONFIG
from schemas.decisions import DECISIONS
from schemas.envelope import Message
from schemas.intents import INTENTS
from schemas.jobs import JOBS
from schemas.runs import DISPATCHES, RUNS
from schemas.status import STATUS
from schemas.usage import USAGE

DLQ_SUFFIX = ".dlq"


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    key: str  # what the partition key is, in words
    partitions: int
    cleanup_policy: Literal["delete", "compact"]
    producer: str  # the one service that writes it ("external" producers allowed only on intents)
    messages: tuple[type[Message], ...]
    external_producers: bool = False
    config: MappingProxyType[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def message_types(self) -> tuple[str, ...]:
        return tuple(m.TYPE for m in self.messages)

    @property
    def dlq(self) -> str:
        return dlq_topic(self.name)

    def document(self) -> dict[str, object]:
        """The topic as ``schemas/json/topics.json`` and ``muster topics list -o json`` describe it."""
        return {
            "name": self.name,
            "key": self.key,
            "partitions": self.partitions,
            "cleanup_policy": self.cleanup_policy,
            "producer": self.producer,
            "external_producers": self.external_producers,
            "dlq": self.dlq,
            "message_types": list(self.message_types),
            "config": dict(self.config),
        }


def dlq_topic(name: str) -> str:
    return f"{name}{DLQ_SUFFIX}"


INTENTS_TOPIC = "muster.intents.v1"
CAPACITY_TOPIC = "muster.capacity.v1"
DECISIONS_TOPIC = "muster.decisions.v1"
DISPATCHES_TOPIC = "muster.dispatches.v1"
RUNS_TOPIC = "muster.runs.v1"
STATUS_TOPIC = "muster.status.v1"
USAGE_TOPIC = "muster.usage.v1"
CONFIG_TOPIC = "muster.config.v1"
JOBS_TOPIC = "muster.jobs.v1"

_COMPACT = MappingProxyType({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"})
_RETAIN_WEEK = MappingProxyType({"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000)})

_SPECS = (
    TopicSpec(INTENTS_TOPIC, "job id", 12, "delete", "gateway", INTENTS, external_producers=True,
              config=_RETAIN_WEEK),
    TopicSpec(CAPACITY_TOPIC, "cluster/node", 6, "compact", "node_watcher", CAPACITY, config=_COMPACT),
    TopicSpec(DECISIONS_TOPIC, "job id", 12, "delete", "queue_manager", DECISIONS, config=_RETAIN_WEEK),
    TopicSpec(DISPATCHES_TOPIC, "job id", 12, "delete", "dispatcher", DISPATCHES, config=_RETAIN_WEEK),
    TopicSpec(RUNS_TOPIC, "job id", 12, "delete", "node_watcher", RUNS, config=_RETAIN_WEEK),
    TopicSpec(STATUS_TOPIC, "job id", 12, "compact", "queue_manager", STATUS, config=_COMPACT),
    TopicSpec(USAGE_TOPIC, "queue/<name>, budget/<tenant>, charge/<job>/<attempt>", 6, "compact",
              "quota_accountant", USAGE, config=_COMPACT),
    TopicSpec(JOBS_TOPIC, "job id", 12, "compact", "queue_manager", JOBS, config=_COMPACT),
    TopicSpec(CONFIG_TOPIC, "<kind>/<name>", 1, "compact", "gateway", CONFIG, config=_COMPACT),
)

TOPICS: MappingProxyType[str, TopicSpec] = MappingProxyType({t.name: t for t in _SPECS})

#: A tenant's own intents topic, ``muster.intents.<tenant>.v1``: the same messages, key and settings as
#: ``muster.intents.v1``, written only by that tenant's Kafka principal when the broker enforces ACLs. The
#: queue manager reads every one of them and accepts an intent only for the tenant its topic names.
TENANT_INTENTS_PREFIX = "muster.intents."
TENANT_INTENTS_SUFFIX = ".v1"
#: every intents topic (the shared one and each tenant's), for a pattern subscription
INTENTS_TOPIC_PATTERN = r"^muster\.intents\.([a-z0-9]([-a-z0-9.]*[a-z0-9])?\.)?v1$"


def tenant_intents_topic(tenant: str) -> str:
    """The intents topic only ``tenant`` may write (``muster.intents.<tenant>.v1``)."""
    return f"{TENANT_INTENTS_PREFIX}{tenant}{TENANT_INTENTS_SUFFIX}"


def intents_topic_tenant(topic: str) -> str | None:
    """The tenant whose intents topic ``topic`` is, or None (the shared intents topic, or any other topic)."""
    shaped = topic.startswith(TENANT_INTENTS_PREFIX) and topic.endswith(TENANT_INTENTS_SUFFIX)
    if topic == INTENTS_TOPIC or not shaped:
        return None
    tenant = topic[len(TENANT_INTENTS_PREFIX):-len(TENANT_INTENTS_SUFFIX)]
    return tenant or None


def is_intents_topic(topic: str) -> bool:
    """The shared intents topic or a tenant's."""
    return topic == INTENTS_TOPIC or intents_topic_tenant(topic) is not None


def tenant_intents_spec(tenant: str) -> TopicSpec:
    """The registry entry of ``tenant``'s intents topic: the shared one's, under the tenant's name."""
    shared = TOPICS[INTENTS_TOPIC]
    return TopicSpec(tenant_intents_topic(tenant), shared.key, shared.partitions, shared.cleanup_policy,
                     f"tenant {tenant}", shared.messages, external_producers=True, config=shared.config)

#: every message type (TYPE -> class) and the topic it travels on
MESSAGE_TYPES: MappingProxyType[str, type[Message]] = MappingProxyType(
    {m.TYPE: m for t in _SPECS for m in t.messages}
)
TOPIC_OF: MappingProxyType[str, str] = MappingProxyType({m.TYPE: t.name for t in _SPECS for m in t.messages})
