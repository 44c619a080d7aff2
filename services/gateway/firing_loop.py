"""The gateway's firing loop: submits every due firing of the recurring jobs in its config view.

Each firing becomes a ``SubmitJob`` whose id is derived from (recurring job, firing time), so several
replicas, or a restart, firing the same time submit the same job, which the queue manager admits
once. A spec with ``after_previous`` waits for the latest earlier firing the gateway knows of (its status
view, or its own recent submissions). Between firings the loop sleeps until the next firing time (at most
``max_sleep`` seconds) or until ``wake()`` is called (a configuration change).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from schemas.config import RecurringJobConfig
from schemas.intents import SubmitJob
from services.gateway.context import GatewayContext
from services.gateway.cron import firing_submission
from services.gateway.errors import ApiError
from services.gateway.firings import DEFAULT_STARTING_DEADLINE, Firing, FiringPlanner
from services.gateway.recurring import previous_firing
from services.gateway.submission_rules import check_spec

log = logging.getLogger(__name__)

MAX_SLEEP_S = 30.0
MIN_SLEEP_S = 0.01


class FiringLoop:
    """Fires recurring jobs on ``clock`` (the context's clock unless given); a ``ServiceRunner`` task."""

    def __init__(self, ctx: GatewayContext, *, clock: Callable[[], datetime] | None = None,
                 starting_deadline: timedelta = DEFAULT_STARTING_DEADLINE, max_sleep: float = MAX_SLEEP_S) -> None:
        self._ctx = ctx
        self._clock = clock or ctx.now
        self._planner = FiringPlanner(starting_deadline)
        self._max_sleep = max_sleep
        self._wake = asyncio.Event()
        self.ticks = 0

    def wake(self) -> None:
        """Look at the recurring jobs and the clock again now (after a configuration change)."""
        self._wake.set()

    async def tick(self) -> list[SubmitJob]:
        """Handle every firing due at the clock's current time; the submissions published."""
        now = self._clock()
        published: list[SubmitJob] = []
        for firing in self._planner.due(self._ctx.config.recurring_jobs(), now):
            submission = await self._fire(firing, now)
            if submission is not None:
                published.append(submission)
        self.ticks += 1
        return published

    async def _fire(self, firing: Firing, now: datetime) -> SubmitJob | None:
        ctx, config = self._ctx, firing.config
        if firing.missed:
            log.warning("recurring job %s: firing at %s missed (older than the starting deadline of %s)",
                        config.name, firing.at.isoformat(), self._planner.starting_deadline)
            self._done(firing, "missed")
            return None
        refusal = self._refusal(config)
        if refusal is not None:
            log.warning("recurring job %s: firing at %s not submitted: %s", config.name, firing.at.isoformat(),
                        refusal)
            self._done(firing, "rejected")
            return None
        previous = None
        if config.spec.after_previous is not None:
            known = [*((s.job_id, s.tenant, s.name) for s in ctx.status.jobs()),
                     *((e.submission.job_id, e.submission.tenant, e.submission.spec.name) for e in ctx.recent.all())]
            previous = previous_firing(config, firing.at, known)
        submission = firing_submission(config, firing.at, previous)
        if submission.job_id in ctx.status or ctx.recent.get(submission.job_id) is not None:
            self._done(firing, "already_submitted")
            return None
        try:
            await ctx.publish_intent(submission)
        except ApiError:
            ctx.metrics.recurring_firings.labels("failed").inc()
            return None  # not handled: the next tick retries while the firing is within the deadline
        ctx.recent.record(submission)
        ctx.metrics.firing_delay.observe(max((now - firing.at).total_seconds(), 0.0))
        log.info("recurring job %s fired at %s: submitted job %s", config.name, firing.at.isoformat(),
                 submission.job_id)
        self._done(firing, "submitted")
        return submission

    def _done(self, firing: Firing, outcome: str) -> None:
        self._planner.handled(firing)
        self._ctx.metrics.recurring_firings.labels(outcome).inc()

    def _refusal(self, config: RecurringJobConfig) -> str | None:
        """Why the spec may no longer be submitted for its tenant (queue gone or moved, policy changed)."""
        queue = self._ctx.config.queue(config.spec.queue)
        if queue is None or queue.tenant != config.tenant:
            return f"queue {config.spec.queue!r} is not a queue of tenant {config.tenant!r}"
        try:
            check_spec(config.spec, queue, self._ctx.config)
        except ApiError as exc:
            return exc.detail
        return None

    def delay(self) -> float:
        """Seconds to sleep: until the next firing time, at most ``max_sleep``."""
        now = self._clock()
        wake_at = self._planner.next_wake(self._ctx.config.recurring_jobs(), now)
        if wake_at is None:
            return self._max_sleep
        return min(max((wake_at - now).total_seconds(), MIN_SLEEP_S), self._max_sleep)

    async def run(self, stop: asyncio.Event) -> None:
        """Fire until ``stop`` is set."""
        while not stop.is_set():
            self._wake.clear()
            try:
                await self.tick()
            except Exception:
                log.exception("firing recurring jobs failed; retrying")
            await self._sleep(stop, self.delay())

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        waiters = {asyncio.create_task(stop.wait()), asyncio.create_task(self._wake.wait())}
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
