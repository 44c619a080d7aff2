"""The Kafka kit on aiokafka: settings, envelope producer, consumer loop with DLQ, topic creation."""

from services.runtime.kafka.delivery import Delivery, Handler, PartitionsCallback, Refused, TombstoneHandler
from services.runtime.kafka.follow import FollowedRecord, RecordFollower
from services.runtime.kafka.loop import ConsumerLoop, LoopStats
from services.runtime.kafka.loop_settings import (
    Batched,
    LoopSettings,
    Pattern,
    PerRecord,
    RetryPolicy,
    SettleMode,
    Subscription,
    Topics,
)
from services.runtime.kafka.producer import BatchFuture, DeliveryFuture, EnvelopeProducer, Outgoing
from services.runtime.kafka.replication import Replication, ReplicationError
from services.runtime.kafka.settings import KafkaSettings
from services.runtime.kafka.settle import BatchSettler, OutputOrder
from services.runtime.kafka.topics import (
    TopicPlan,
    cluster_size,
    create_topics,
    ensure_registry_topics,
    partition_leaders,
    plans_for,
    topic_replication,
)

__all__ = [
    "BatchFuture",
    "BatchSettler",
    "Batched",
    "ConsumerLoop",
    "Delivery",
    "DeliveryFuture",
    "EnvelopeProducer",
    "FollowedRecord",
    "Handler",
    "KafkaSettings",
    "LoopSettings",
    "LoopStats",
    "Outgoing",
    "OutputOrder",
    "PartitionsCallback",
    "Pattern",
    "PerRecord",
    "RecordFollower",
    "Refused",
    "Replication",
    "ReplicationError",
    "RetryPolicy",
    "SettleMode",
    "Subscription",
    "TombstoneHandler",
    "TopicPlan",
    "Topics",
    "cluster_size",
    "create_topics",
    "ensure_registry_topics",
    "partition_leaders",
    "plans_for",
    "topic_replication",
]
