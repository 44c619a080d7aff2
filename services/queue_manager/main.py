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

from services.core import SchedulerConfig, described
from services.queue_manager.pools import Shard
from services.queue_manager.service import QueueManager
from services.queue_manager.settings import scheduler_config_from_env
from services.runtime.collector import freeze_heap
from services.runtime.options import ServeOptions
from services.runtime.service import BackgroundTask, ServiceMain, ServiceRunner

log = logging.getLogger(__name__)


class QueueManagerMain(ServiceMain):
    """The queue manager of ``options.pools`` (every pool when none), served until SIGTERM or ``stop()``.
    ``manager`` exists from construction; ``freeze_recovered_heap`` freezes the heap once it has recovered."""

    def __init__(self, options: ServeOptions, *, scheduler_config: SchedulerConfig | None = None,
                 period_s: float = 5.0, freeze_recovered_heap: bool = False) -> None:
        super().__init__()
        self.registry = CollectorRegistry()
        shard = Shard.of(options.pools)
        self.manager = QueueManager(options.kafka, registry=self.registry, scheduler_config=scheduler_config,
                                    period_s=period_s, shard=shard)
        self.options = options
        self.freeze_recovered_heap = freeze_recovered_heap
        log.info("queue manager for %s", shard.describe())
        log.info("scheduling %s", described(scheduler_config or SchedulerConfig()))

    async def run(self, *, handle_signals: bool = True) -> None:
        manager, options = self.manager, self.options
        tasks: list[BackgroundTask] = [*manager.follower_tasks(), manager.run]
        runner = ServiceRunner("queue_manager", tasks=tasks, registry=self.registry,
                               http_host=options.http_host, http_port=options.http_port)
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(manager.producer)
            if self.freeze_recovered_heap:
                await stack.enter_async_context(freezing_after_recovery(manager))
            await self._serve(runner, handle_signals=handle_signals)


async def serve(options: ServeOptions) -> None:
    """``muster serve queue-manager``."""
    await QueueManagerMain(options, scheduler_config=scheduler_config_from_env(), freeze_recovered_heap=True).run()


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
