"""The one hand-moved clock of the tests: ``clock()`` is an aware datetime (the gateway, dispatcher and
node watcher take such a clock), ``clock.timestamp`` its POSIX seconds (the queue manager and quota
accountant take that)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@dataclass
class FakeClock:
    """A clock the test moves by hand."""

    at: datetime = T0

    def __call__(self) -> datetime:
        return self.at

    def timestamp(self) -> float:
        return self.at.timestamp()

    def set(self, at: datetime) -> None:
        self.at = at

    def advance(self, **delta: float) -> datetime:
        self.at += timedelta(**delta)
        return self.at
