"""The dispatcher's reports onto ``muster.dispatches``, sent from background work (outside a consumed record)."""

from __future__ import annotations

import asyncio
import logging

from schemas.envelope import Message, make_envelope
from schemas.topics import DISPATCHES_TOPIC
from services.runtime.kafka import EnvelopeProducer

log = logging.getLogger(__name__)

PRODUCER = "dispatcher"


class Reporter:
    """Sends one report and waits for the broker's acknowledgement, trying again on failure."""

    def __init__(self, producer: EnvelopeProducer, *, attempts: int = 8, pause_s: float = 0.5) -> None:
        self._producer = producer
        self._attempts = attempts
        self._pause_s = pause_s

    async def report(self, message: Message, *, correlation_id: str | None = None,
                     causation_id: str | None = None) -> None:
        envelope = make_envelope(message, PRODUCER, correlation_id=correlation_id or causation_id,
                                 causation_id=causation_id)
        for attempt in range(1, self._attempts + 1):
            try:
                await self._producer.send_and_wait(DISPATCHES_TOPIC, envelope)
                return
            except Exception:
                if attempt == self._attempts:
                    raise
                log.warning("report %s for %s failed (try %d/%d)", message.TYPE, message.key(), attempt,
                            self._attempts, exc_info=True)
                await asyncio.sleep(self._pause_s * attempt)
