"""Which recurring jobs are due, pure: the firing decisions of one gateway replica, with the clock passed in.

A firing at time T is due once ``now >= T``. Only the latest firing at or before ``now`` is ever
considered (never a backlog), only when it is at least the recurring job's ``created_at``, and only
while it is at most ``starting_deadline`` old (Kubernetes CronJob's ``startingDeadlineSeconds``); older
ones count as missed. A firing is remembered as handled once its submission is published, so one
replica fires each time once; other replicas and restarts derive the same job id for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from schemas.config import RecurringJobConfig
from services.gateway.cron import latest_firing, next_firings, valid_schedule

DEFAULT_STARTING_DEADLINE = timedelta(seconds=300)


def active_schedule(config: RecurringJobConfig) -> str | None:
    """The cron expression to fire on; None while suspended (or for an expression cron cannot read)."""
    schedule = config.spec.schedule
    if config.suspended or schedule is None or not valid_schedule(schedule):
        return None
    return schedule


@dataclass(frozen=True, slots=True)
class Firing:
    """One firing of a recurring job; ``missed`` when it is older than the starting deadline."""

    config: RecurringJobConfig
    at: datetime
    missed: bool = False


@dataclass
class FiringPlanner:
    """The firings a replica has handled, per recurring job name, and the rules deciding the next ones."""

    starting_deadline: timedelta = DEFAULT_STARTING_DEADLINE
    _handled: dict[str, datetime] = field(default_factory=dict)

    def due(self, jobs: Iterable[RecurringJobConfig], now: datetime) -> list[Firing]:
        """Firings to publish (or to record as missed) at ``now``; suspended jobs have none."""
        out: list[Firing] = []
        names: set[str] = set()
        for config in jobs:
            names.add(config.name)
            schedule = active_schedule(config)
            if schedule is None:
                continue
            at = latest_firing(schedule, now)
            if at < config.created_at:
                continue
            handled = self._handled.get(config.name)
            if handled is not None and at <= handled:
                continue
            out.append(Firing(config, at, missed=now - at > self.starting_deadline))
        for gone in set(self._handled) - names:  # deleted: forget, so a new definition starts afresh
            del self._handled[gone]
        return out

    def handled(self, firing: Firing) -> None:
        """Remember that ``firing`` was published (or recorded as missed)."""
        previous = self._handled.get(firing.config.name)
        if previous is None or firing.at > previous:
            self._handled[firing.config.name] = firing.at

    def last_handled(self, name: str) -> datetime | None:
        return self._handled.get(name)

    @staticmethod
    def next_wake(jobs: Iterable[RecurringJobConfig], now: datetime) -> datetime | None:
        """The earliest firing after ``now`` of any active recurring job; None when there is none."""
        schedules = {s for s in map(active_schedule, jobs) if s is not None}
        return min((next_firings(s, now, 1)[0] for s in schedules), default=None)
