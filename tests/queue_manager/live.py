"""Helpers for queue-manager tests on the real broker: publish inputs, tail outputs, run the service."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer

from schemas.codec import decode
from schemas.envelope import Envelope, Message, make_envelope
from schemas.topics import TOPIC_OF
from services.core import SchedulerConfig
from services.queue_manager.main import QueueManagerMain
from services.queue_manager.service import QueueManager
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceRunner


async def publish(settings: KafkaSettings, *items: Message | Envelope) -> list[Envelope]:
    """Produce each message (or ready envelope) to its registry topic and wait for the acks."""
    sent: list[Envelope] = []
    async with EnvelopeProducer(settings) as producer:
        for item in items:
            env = item if isinstance(item, Envelope) else make_envelope(item, "test")
            await producer.send_and_wait(TOPIC_OF[env.type], env)
            sent.append(env)
    return sent


class Tail:
    """Every envelope on some topics from the beginning, decoded, read on demand."""

    def __init__(self, settings: KafkaSettings, *topics: str) -> None:
        self._consumer = AIOKafkaConsumer(*topics, **settings.client_options(), group_id=None,
                                          enable_auto_commit=False, auto_offset_reset="earliest")
        self.seen: list[Envelope] = []

    async def __aenter__(self) -> Tail:
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    def messages(self, cls: type[Message], **fields: Any) -> list[Any]:
        return [e.payload for e in self.seen if isinstance(e.payload, cls)
                and all(getattr(e.payload, k) == v for k, v in fields.items())]

    async def poll(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=100)
        for records in batch.values():
            self.seen.extend(decode(r.value, topic=r.topic) for r in records)

    async def until(self, condition: Callable[[], bool], *, within: float = 30.0) -> None:
        async with asyncio.timeout(within):
            while not condition():
                await self.poll()

    async def settle(self, quiet_s: float = 1.5) -> None:
        """Read until nothing new arrives for ``quiet_s`` seconds."""
        idle = 0.0
        while idle < quiet_s:
            before = len(self.seen)
            await self.poll()
            idle = 0.0 if len(self.seen) > before else idle + 0.1


@contextlib.asynccontextmanager
async def running_service(
    settings: KafkaSettings, *, scheduler_config: SchedulerConfig | None = None
) -> AsyncIterator[tuple[QueueManager, ServiceRunner]]:
    """The queue manager as ``muster serve`` composes it, in this event loop; stopped on exit."""
    main = QueueManagerMain(ServeOptions(kafka=settings, http_port=0), scheduler_config=scheduler_config,
                            period_s=1.0)
    manager = main.manager
    task = asyncio.create_task(main.run(handle_signals=False))
    try:
        async with asyncio.timeout(60):
            while not manager.ready.is_set():
                if task.done():
                    task.result()
                await asyncio.sleep(0.05)
        assert main.runner is not None
        yield manager, main.runner
    finally:
        main.stop()
        async with asyncio.timeout(30):
            await task
