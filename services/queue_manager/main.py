"""Composition root of the queue manager: ``muster serve queue-manager``.

Without ``--pool`` one instance owns every pool. With ``--pool a --pool b`` it is the shard of pools a
and b: it schedules only their queues onto only their nodes (``services.queue_manager.pools``), in its
own consumer group. Run one shard per disjoint set of pools, covering every pool (``default``
included), and never an unsharded instance beside shards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry

from services.core import SchedulerConfig
from services.queue_manager.pools import Shard
from services.queue_manager.service import QueueManager
from services.queue_manager.settings import scheduler_config_from_env
from services.runtime.collector import freeze_heap
from services.runtime.options import ServeOptions
from services.runtime.service import BackgroundTask, ServiceRunner

log = logging.getLogger(__name__)


def build(
    options: ServeOptions, *, scheduler_config: SchedulerConfig | None = None, period_s: float = 5.0
) -> tuple[QueueManager, ServiceRunner]:
    """The queue manager and the runner that serves it (not started; start the producer around it)."""
    registry = CollectorRegistry()
    shard = Shard.of(options.pools)
    manager = QueueManager(options.kafka, registry=registry, scheduler_config=scheduler_config, period_s=period_s,
                           shard=shard)
    log.info("queue manager for %s", shard.describe())
    tasks: list[BackgroundTask] = [*manager.follower_tasks(), manager.run]
    runner = ServiceRunner("queue_manager", tasks=tasks, registry=registry,
                           http_host=options.http_host, http_port=options.http_port)
    return manager, runner


async def serve(options: ServeOptions, *, handle_signals: bool = True) -> None:
    """Run the queue manager until SIGTERM (or until its runner is stopped)."""
    manager, runner = build(options, scheduler_config=scheduler_config_from_env())
    async with manager.producer, freezing_after_recovery(manager):
        await runner.run(handle_signals=handle_signals)


@contextlib.asynccontextmanager
async def freezing_after_recovery(manager: QueueManager) -> AsyncIterator[None]:
    """Within the block, once ``manager`` has recovered its state, freeze the heap (``freeze_heap``)."""

    async def freeze() -> None:
        await manager.ready.wait()
        freeze_heap()

    task = asyncio.create_task(freeze(), name="queue_manager:freeze-heap")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
