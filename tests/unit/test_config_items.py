"""The one fold of ``muster.config`` (gateway, queue manager, quota accountant): definitions replace,
tombstones and ``ConfigItemDeleted`` remove what their key names, cluster-file entries included."""

from __future__ import annotations

import pytest

from schemas.config import (
    CohortConfig,
    CohortDefined,
    ConfigItemDeleted,
    MusterConfig,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    TenantConfig,
)
from schemas.envelope import Message
from services.spec.config_items import ConfigChange, ConfigItems

A = QueueConfig(name="a", tenant="team-a")
A2 = QueueConfig(name="a", tenant="team-b")
HIGH = PriorityClassConfig(name="high", value=100)
BASE = MusterConfig(queues=[A], tenants=[TenantConfig(name="team-a", namespace="ns-a")])


@pytest.mark.parametrize(("base", "records", "expected_change", "queues"), [
    (None, [("queue/a", QueueDefined(item=A))], ConfigChange("queue", "a", A), {"a": A}),
    (BASE, [("queue/a", QueueDefined(item=A2))], ConfigChange("queue", "a", A2, A), {"a": A2}),
    (BASE, [("queue/a", None)], ConfigChange("queue", "a", None, A), {}),  # tombstone, file entry too
    (BASE, [("queue/a", ConfigItemDeleted(kind="queue", name="a"))], ConfigChange("queue", "a", None, A), {}),
    (None, [("queue/a", None)], None, {}),  # deleting what is not there changes nothing
    (None, [("queue/a", ConfigItemDeleted(kind="queue", name="a"))], None, {}),
    (None, [("cohort/c", CohortDefined(item=CohortConfig(name="c"))), ("cohort/c", None)],
     ConfigChange("cohort", "c", None, CohortConfig(name="c")), {}),
    (None, [("priority-class/high", PriorityClassDefined(item=HIGH))], ConfigChange("priority-class", "high", HIGH),
     {}),
    (None, [("unknown/x", None)], None, {}),
])
def test_fold(base: MusterConfig | None, records: list[tuple[str, Message | None]],
              expected_change: ConfigChange | None, queues: dict[str, QueueConfig]) -> None:
    config = ConfigItems(base)
    change = None
    for key, message in records:
        change = config.fold(key, message)
    assert change == expected_change
    assert config.queues == queues


def test_items_of_a_kind_come_by_name() -> None:
    config = ConfigItems()
    for name in ("b", "c", "a"):
        config.fold(f"queue/{name}", QueueDefined(item=QueueConfig(name=name)))
    assert [q.name for q in config.of_kind("queue")] == ["a", "b", "c"]
    assert config.get("queue", "b") == QueueConfig(name="b") and config.get("tenant", "b") is None
