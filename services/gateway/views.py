"""The gateway's in-memory views of compacted topics: job status, configuration, queue usage.

Each view folds ``(key, envelope | None)`` changes (a ``CompactedTable`` change callback, or a test
feeding it directly); ``None`` is a tombstone. Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime

from schemas.config import ClusterConfig, PriorityClassConfig, QueueConfig, RecurringJobConfig, TenantConfig
from schemas.envelope import Envelope
from schemas.status import JobStatusChanged
from schemas.usage import QueueUsageReported
from services.spec.config_items import CLUSTER, RECURRING_JOB, ConfigItem, ConfigItems, ConfigKind

__all__ = ["ConfigItem", "ConfigKind", "ConfigView", "HistoryEntry", "StatusView", "UsageView"]

HISTORY_LIMIT = 50


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One state of a job as the gateway saw it go by."""

    state: str
    reason: str
    message: str
    attempt: int
    at: datetime


class StatusView:
    """Latest ``JobStatusChanged`` per job, plus the states seen for each job (most recent last)."""

    def __init__(self, history_limit: int = HISTORY_LIMIT) -> None:
        self._jobs: dict[str, JobStatusChanged] = {}
        self._history: dict[str, deque[HistoryEntry]] = {}
        self._history_limit = history_limit
        self.caught_up = False

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def get(self, job_id: str) -> JobStatusChanged | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[JobStatusChanged]:
        return list(self._jobs.values())

    def history(self, job_id: str) -> list[HistoryEntry]:
        return list(self._history.get(job_id, ()))

    def apply(self, key: str, envelope: Envelope | None) -> None:
        if envelope is None:
            self._jobs.pop(key, None)
            self._history.pop(key, None)
            return
        status = envelope.payload
        if not isinstance(status, JobStatusChanged):
            return
        self._jobs[status.job_id] = status
        entries = self._history.setdefault(status.job_id, deque(maxlen=self._history_limit))
        entry = HistoryEntry(status.state, status.reason, status.message, status.attempt, status.updated_at)
        last = entries[-1] if entries else None
        if last is None or (last.state, last.reason, last.attempt) != (entry.state, entry.reason, entry.attempt):
            entries.append(entry)


class ConfigView:
    """The current configuration items by kind and name, and the recurring jobs, as the config topic holds them."""

    def __init__(self) -> None:
        self._config = ConfigItems()
        self.caught_up = False

    def apply(self, key: str, envelope: Envelope | None) -> None:
        self._config.fold(key, envelope.payload if envelope is not None else None)

    def item(self, kind: ConfigKind, name: str) -> ConfigItem | None:
        item: ConfigItem | None = self._config.get(kind, name)
        return item

    def items(self, kind: ConfigKind) -> list[ConfigItem]:
        return self._config.of_kind(kind)

    def clusters(self) -> list[ClusterConfig]:
        """The clusters with node groups that can grow, by name."""
        return self._config.of_kind(CLUSTER)

    def cluster(self, name: str) -> ClusterConfig | None:
        """A cluster with node groups that can grow, as the gateway seeded it."""
        return self._config.clusters.get(name)

    def recurring(self, name: str) -> RecurringJobConfig | None:
        return self._config.recurring_jobs.get(name)

    def recurring_jobs(self) -> list[RecurringJobConfig]:
        """Every recurring job, by name."""
        return self._config.of_kind(RECURRING_JOB)

    def queue(self, name: str) -> QueueConfig | None:
        return self._config.queues.get(name)

    def queues(self) -> list[QueueConfig]:
        return self._config.of_kind("queue")

    def tenant(self, name: str) -> TenantConfig | None:
        return self._config.tenants.get(name)

    def priority_class(self, name: str) -> PriorityClassConfig | None:
        return self._config.priority_classes.get(name)

    def tenant_of_namespace(self, namespace: str) -> TenantConfig | None:
        tenants = self._config.tenants
        return next((tenants[name] for name in sorted(tenants) if tenants[name].namespace == namespace), None)

    def has_priority_class(self, name: str) -> bool:
        """True when ``name`` is defined, or when no priority classes are configured at all."""
        classes = self._config.priority_classes
        return not classes or name in classes


class UsageView:
    """The latest ``QueueUsageReported`` per queue."""

    def __init__(self) -> None:
        self._queues: dict[str, QueueUsageReported] = {}
        self.caught_up = False

    def apply(self, key: str, envelope: Envelope | None) -> None:
        if not key.startswith("queue/"):
            return
        if envelope is None:
            self._queues.pop(key.removeprefix("queue/"), None)
            return
        if isinstance(envelope.payload, QueueUsageReported):
            self._queues[envelope.payload.queue] = envelope.payload

    def queue(self, name: str) -> QueueUsageReported | None:
        return self._queues.get(name)
