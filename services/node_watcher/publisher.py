"""An ordered outbox: messages queued by the informer handlers are written to Kafka in queue order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from schemas.envelope import Message, make_envelope
from schemas.topics import TOPIC_OF
from services.runtime.kafka import EnvelopeProducer

log = logging.getLogger(__name__)

PRODUCER = "node_watcher"
#: a message with the correlation id and causation id its envelope carries (None, None: a chain of its own)
Chain = tuple[str | None, str | None]
Queued = tuple[Message, Chain]
NO_CHAIN: Chain = (None, None)


class Outbox:
    """Queue messages synchronously (``put``); ``run`` sends them in order and waits for the acknowledgements.

    A batch that fails is sent again after a pause (consumers drop repeats), so nothing queued is lost
    while the process lives.
    """

    def __init__(self, producer: EnvelopeProducer, *, on_sent: Callable[[Message], None] | None = None,
                 retry_pause_s: float = 1.0, batch_size: int = 500) -> None:
        self._producer = producer
        self._queue: asyncio.Queue[Queued] = asyncio.Queue()
        self._on_sent = on_sent
        self._retry_pause_s = retry_pause_s
        self._batch_size = batch_size
        self._idle = asyncio.Event()
        self._idle.set()
        self.sent = 0

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    def put(self, messages: Iterable[Message], *, chain: Chain = NO_CHAIN) -> None:
        """Queue ``messages``; ``chain``: the correlation and causation ids their envelopes carry (a run
        observation continues the chain of the decision that made its Job)."""
        for message in messages:
            self._queue.put_nowait((message, chain))
            self._idle.clear()

    async def drained(self) -> None:
        """Wait until every queued message has been acknowledged."""
        await self._idle.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """Send until ``stop`` is set, then flush what is queued."""
        while True:
            getter = asyncio.ensure_future(self._queue.get())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not getter.done():
                getter.cancel()
                await asyncio.gather(getter, stopper, return_exceptions=True)
                await self._flush_remaining()
                return
            await asyncio.gather(stopper, return_exceptions=True)
            batch = [getter.result()]
            while not self._queue.empty() and len(batch) < self._batch_size:
                batch.append(self._queue.get_nowait())
            await self._send_until_acknowledged(batch, stop)
            if self._queue.empty():
                self._idle.set()

    async def _flush_remaining(self) -> None:
        batch: list[Queued] = []
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        if batch:
            try:
                await self._send(batch)
            except Exception:
                log.exception("could not flush %d messages on shutdown", len(batch))
        self._idle.set()

    async def _send_until_acknowledged(self, batch: list[Queued], stop: asyncio.Event) -> None:
        while True:
            try:
                await self._send(batch)
                return
            except Exception:
                log.exception("publishing %d messages failed; trying again", len(batch))
                if stop.is_set():
                    return
                await asyncio.sleep(self._retry_pause_s)

    async def _send(self, batch: list[Queued]) -> None:
        futures = []
        for message, (correlation, causation) in batch:
            envelope = make_envelope(message, PRODUCER, correlation_id=correlation, causation_id=causation)
            futures.append(await self._producer.send(TOPIC_OF[message.TYPE], envelope))
        await asyncio.gather(*futures)
        self.sent += len(batch)
        if self._on_sent is not None:
            for message, _ in batch:
                self._on_sent(message)
