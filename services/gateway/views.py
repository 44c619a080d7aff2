"""The gateway's in-memory views of compacted topics: job status, configuration, queue usage.

Each view folds ``(key, envelope | None)`` changes (a ``CompactedTable`` change callback, or a test
feeding it directly); ``None`` is a tombstone. Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from schemas.config import (
    CohortConfig,
    ConfigItemDeleted,
    GpuTypeConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    RecurringJobConfig,
    RecurringJobDefined,
    TenantConfig,
)
from schemas.envelope import Envelope
from schemas.status import JobStatusChanged
from schemas.usage import QueueUsageReported

ConfigKind = Literal["queue", "cohort", "priority-class", "gpu-type", "pool", "tenant"]
CONFIG_KINDS: tuple[ConfigKind, ...] = ("queue", "cohort", "priority-class", "gpu-type", "pool", "tenant")
ConfigItem = QueueConfig | CohortConfig | PriorityClassConfig | GpuTypeConfig | PoolConfig | TenantConfig

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
        self._items: dict[str, dict[str, ConfigItem]] = {kind: {} for kind in CONFIG_KINDS}
        self._recurring: dict[str, RecurringJobConfig] = {}
        self.caught_up = False

    def apply(self, key: str, envelope: Envelope | None) -> None:
        kind, _, name = key.partition("/")
        if envelope is None or isinstance(envelope.payload, ConfigItemDeleted):
            if kind in self._items:
                self._items[kind].pop(name, None)
            elif kind == RecurringJobDefined.KIND:
                self._recurring.pop(name, None)
            return
        if isinstance(envelope.payload, RecurringJobDefined):
            self._recurring[envelope.payload.item.name] = envelope.payload.item
            return
        item = getattr(envelope.payload, "item", None)
        payload_kind = getattr(envelope.payload, "KIND", "")
        if isinstance(item, ConfigItem) and payload_kind in self._items:
            self._items[payload_kind][item.name] = item

    def item(self, kind: ConfigKind, name: str) -> ConfigItem | None:
        return self._items[kind].get(name)

    def items(self, kind: ConfigKind) -> list[ConfigItem]:
        return [self._items[kind][name] for name in sorted(self._items[kind])]

    def recurring(self, name: str) -> RecurringJobConfig | None:
        return self._recurring.get(name)

    def recurring_jobs(self) -> list[RecurringJobConfig]:
        """Every recurring job, by name."""
        return [self._recurring[name] for name in sorted(self._recurring)]

    def queue(self, name: str) -> QueueConfig | None:
        item = self._items["queue"].get(name)
        return item if isinstance(item, QueueConfig) else None

    def queues(self) -> list[QueueConfig]:
        return [q for q in self.items("queue") if isinstance(q, QueueConfig)]

    def tenant(self, name: str) -> TenantConfig | None:
        item = self._items["tenant"].get(name)
        return item if isinstance(item, TenantConfig) else None

    def priority_class(self, name: str) -> PriorityClassConfig | None:
        item = self._items["priority-class"].get(name)
        return item if isinstance(item, PriorityClassConfig) else None

    def tenant_of_namespace(self, namespace: str) -> TenantConfig | None:
        for item in self.items("tenant"):
            if isinstance(item, TenantConfig) and item.namespace == namespace:
                return item
        return None

    def has_priority_class(self, name: str) -> bool:
        """True when ``name`` is defined, or when no priority classes are configured at all."""
        classes = self._items["priority-class"]
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
