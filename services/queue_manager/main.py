"""Composition root of the queue manager: ``muster serve queue-manager``.

One instance owns every pool today: ``options.pools`` (sharding by cluster) is refused rather than
half-honoured, because two instances sharing the unpinned jobs would admit onto the same capacity.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry

from services.core import SchedulerConfig
from services.queue_manager.service import QueueManager
from services.queue_manager.settings import scheduler_config_from_env
from services.runtime.options import ServeOptions
from services.runtime.service import BackgroundTask, ServiceRunner

log = logging.getLogger(__name__)


def build(
    options: ServeOptions, *, scheduler_config: SchedulerConfig | None = None, period_s: float = 5.0
) -> tuple[QueueManager, ServiceRunner]:
    """The queue manager and the runner that serves it (not started; start the producer around it)."""
    if options.pools:
        raise ValueError("the queue manager does not shard by pool yet: run one instance without --pool")
    registry = CollectorRegistry()
    manager = QueueManager(options.kafka, registry=registry, scheduler_config=scheduler_config, period_s=period_s)
    tasks: list[BackgroundTask] = [*manager.follower_tasks(), manager.run]
    runner = ServiceRunner("queue_manager", tasks=tasks, registry=registry,
                           http_host=options.http_host, http_port=options.http_port)
    return manager, runner


async def serve(options: ServeOptions, *, handle_signals: bool = True) -> None:
    """Run the queue manager until SIGTERM (or until its runner is stopped)."""
    manager, runner = build(options, scheduler_config=scheduler_config_from_env())
    async with manager.producer:
        await runner.run(handle_signals=handle_signals)
