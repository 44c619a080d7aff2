"""Batch settling for a ``ConsumerLoop`` set up with ``Batched()``, and the ``OutputOrder`` a service shares with it.

``BatchSettler``: the outputs of a whole fetched batch are collected, handed to the producer together
as record batches, and the batch's offsets committed once they are acknowledged, while the next
batches are handled: one broker round trip per batch, still never a commit ahead of its outputs.
Batches commit in order; at most ``MAX_SETTLING_BATCHES`` settle at once; a failed output stops the
loop before anything later is committed (the records are delivered again, so a handler must be
idempotent across restarts).

``OutputOrder``: when a service produces from another task too (the queue manager's scheduling
cycle), its messages must keep the order of the state changes that caused them. One task at a time
hands messages to the producer (``turn``); the other task, during its turn, first hands over what
the inputs caused so far (``catch_up``), then produces its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from aiokafka.structs import TopicPartition

from services.runtime.kafka.delivery import Delivery
from services.runtime.kafka.producer import BatchFuture, DeliveryFuture, EnvelopeProducer, Outgoing

log = logging.getLogger(__name__)

#: how many handled batches may be settling (outputs in flight, commit pending) at once
MAX_SETTLING_BATCHES = 4
#: outputs that may wait for another task's turn at the producer before the loop waits for it too
MAX_DEFERRED_OUTPUTS = 20_000

Offsets = dict[TopicPartition, int]
Pending = list[DeliveryFuture | BatchFuture]


class OutputOrder:
    """Who hands messages to the producer, one task at a time, so that they keep the order of the
    changes that caused them. Create one per service and pass it to its batch-mode input loop."""

    def __init__(self) -> None:
        self._turn = asyncio.Lock()
        self._catch_up: Callable[[], Awaitable[None]] | None = None

    def turn(self) -> asyncio.Lock:
        """``async with order.turn():`` — nothing else reaches the producer until the block ends."""
        return self._turn

    @property
    def taken(self) -> bool:
        """Whether a task holds its turn now."""
        return self._turn.locked()

    def defer_to(self, catch_up: Callable[[], Awaitable[None]]) -> None:
        """Register the input loop's hand-over of what it collected (its ``BatchSettler`` does this; a
        later loop, after a restart, replaces an earlier one)."""
        self._catch_up = catch_up

    async def catch_up(self) -> None:
        """During a turn: hand over what the inputs handled so far caused, so what the caller produces
        next follows it on every partition. Raises if producing fails (nothing handled is committed)."""
        if not self._turn.locked():
            raise RuntimeError("catch_up outside a turn")
        if self._catch_up is not None:
            await self._catch_up()


class BatchSettler:
    """The batch mode of a ``ConsumerLoop`` (see the module's docstring). ``processed`` is the loop's
    map of handled offsets, which the settler takes at each hand-over and clears when outputs fail;
    ``commit`` commits offsets. The loop calls ``collect``, ``finish`` and ``drain`` under its own
    work lock."""

    def __init__(self, producer: EnvelopeProducer, processed: Offsets,
                 commit: Callable[[Offsets], Awaitable[None]], order: OutputOrder | None = None,
                 name: str = "settle") -> None:
        self._producer = producer
        self._processed = processed
        self._commit = commit
        self._order = order or OutputOrder()
        self._order.defer_to(self._catch_up)
        self._name = name
        self._outgoing: list[Outgoing] = []  # outputs of the batch in hand, not produced yet
        self._in_flight: Pending = []  # outputs produced, not settled
        #: batches handed over, oldest first, each settling and then committing after the one before
        self._settling: deque[asyncio.Task[None]] = deque()

    def collect(self, delivery: Delivery) -> None:
        """Take what a successful handler attempt emitted (deferred) or produced."""
        self._outgoing.extend(delivery.take_outgoing())
        self._in_flight.extend(delivery.take_pending())

    async def _catch_up(self) -> None:
        self._in_flight = await self._hand_over()

    async def _hand_over(self) -> Pending:
        """Produce the deferred outputs and take them, with the outputs already in flight (the caller
        holds the turn). If producing fails, nothing handled so far is committed."""
        outgoing, self._outgoing = self._outgoing, []
        pending, self._in_flight = self._in_flight, []
        try:
            if outgoing:
                pending += await self._producer.send_many(outgoing)
        except BaseException:
            self._forget()
            raise
        return pending

    async def finish(self, *, wait: bool = False) -> None:
        """After a fetched batch: hand it over to be settled and committed while the next ones are
        handled. While another task has its turn at the producer, the loop does not wait for it: the
        batch is handed over with a later one (unless ``wait``, or too much is waiting already)."""
        while self._settling and (self._settling[0].done() or len(self._settling) >= MAX_SETTLING_BATCHES):
            await self._wait_oldest()  # a failure surfaces here, at the latest one poll later
        if self._order.taken and not wait and len(self._outgoing) < MAX_DEFERRED_OUTPUTS:
            return
        async with self._order.turn():
            pending = await self._hand_over()
            offsets = dict(self._processed)
            self._processed.clear()
        if pending or offsets:
            previous = self._settling[-1] if self._settling else None
            self._settling.append(asyncio.create_task(self._settle_and_commit(previous, pending, offsets),
                                                      name=f"{self._name}: settle"))

    async def _settle_and_commit(self, previous: asyncio.Task[None] | None, pending: Pending,
                                 offsets: Offsets) -> None:
        await asyncio.gather(*pending)
        if previous is not None:
            await asyncio.wait({previous})  # commits in order
            previous.result()  # an earlier batch failed: neither it nor this one is committed
        try:
            await self._commit(offsets)
        except Exception as exc:  # e.g. a rebalance began: the records are delivered again, nothing is lost
            log.warning("commit of a settled batch failed (its records will be delivered again): %r", exc)

    async def _wait_oldest(self) -> None:
        """Wait for the oldest batch being settled; if its outputs (or an earlier batch's) failed, nothing
        handled since is committed either (the error is raised and the loop stops; those records are
        delivered again)."""
        task = self._settling.popleft()
        try:
            await task
        except BaseException:
            self._forget()
            for later in self._settling:
                later.cancel()
            self._settling.clear()
            raise

    async def wait_settled(self) -> None:
        """Wait until every batch handed over is settled and committed (raises the first failure)."""
        while self._settling:
            await self._wait_oldest()

    async def settle_in_hand(self) -> None:
        """Produce the outputs of the batch in hand and wait for them (on revocation, before the revoked
        partitions' offsets are committed); raises the first failure."""
        async with self._order.turn():
            pending = await self._hand_over()
        if pending:
            try:
                await asyncio.gather(*pending)
            except BaseException:
                self._processed.clear()  # never commit a batch whose outputs may be missing
                raise

    def _forget(self) -> None:
        """Forget the batch in hand: it must not be committed (its outputs, or an earlier batch's, failed)."""
        self._processed.clear()
        self._outgoing.clear()
        self._in_flight.clear()
