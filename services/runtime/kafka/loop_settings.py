"""How a ``ConsumerLoop`` is set up, as values whose wrong combinations cannot be built.

- What it reads: ``Topics(names)`` or ``Pattern(regex)``, never both, never neither.
- How it settles its outputs: ``PerRecord(concurrency=N)`` waits for each record's outputs before
  committing it (with ``N`` > 1, up to ``N`` records of a fetched batch are handled at once, one key at a
  time); ``Batched(order=...)`` hands a whole fetched batch's outputs to a ``BatchSettler``, sharing
  ``order`` with a service that also produces from another task. So an output order with per-record
  settling, or concurrency with batch settling, has no spelling.
- ``LoopSettings`` holds one of each with the consumer group, the records fetched at a time and the
  retries of a failing handler.

Numeric bounds are checked when a value is built (``ValueError``), not when the loop runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from services.runtime.kafka.settle import OutputOrder


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of a failing handler: ``attempts`` tries in all, exponential backoff between."""

    attempts: int = 3
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0

    def __post_init__(self) -> None:
        _at_least("attempts", self.attempts, 1)
        if not self.initial_backoff_s >= 0 or not self.max_backoff_s >= self.initial_backoff_s:
            raise ValueError("backoffs must satisfy 0 <= initial_backoff_s <= max_backoff_s, not "
                             f"{self.initial_backoff_s} and {self.max_backoff_s}")

    def backoff(self, failed_attempt: int) -> float:
        return float(min(self.max_backoff_s, self.initial_backoff_s * 2 ** (failed_attempt - 1)))


@dataclass(frozen=True)
class Topics:
    """Subscribe to these topics by name (at least one)."""

    names: Sequence[str]

    def __post_init__(self) -> None:
        if isinstance(self.names, str):
            raise ValueError(f"Topics takes a sequence of names, not the string {self.names!r}")
        names = tuple(self.names)
        if not names:
            raise ValueError("Topics needs at least one topic name")
        if not all(isinstance(name, str) and name for name in names):
            raise ValueError(f"topic names must be non-empty strings, not {names!r}")
        object.__setattr__(self, "names", names)  # a tuple: the value stays immutable and hashable


@dataclass(frozen=True)
class Pattern:
    """Subscribe to every topic whose name matches ``regex``, now and as topics are created; those a
    principal may not describe stay out of sight."""

    regex: str

    def __post_init__(self) -> None:
        if not isinstance(self.regex, str) or not self.regex:
            raise ValueError(f"a pattern is a non-empty regular expression, not {self.regex!r}")
        try:
            re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"{self.regex!r} is not a regular expression: {exc}") from None


Subscription: TypeAlias = Topics | Pattern


@dataclass(frozen=True)
class PerRecord:
    """Each record's outputs are acknowledged before its offset is committed, and the handler is retried
    when they fail. ``concurrency`` > 1: records are handled up to that many at once while the loop keeps
    fetching (``lanes.KeyedLanes``), those with the same key (or, unkeyed, of the same partition) one after
    the other in offset order; for handlers whose work on different keys is independent and waits on I/O."""

    concurrency: int = 1

    def __post_init__(self) -> None:
        _at_least("concurrency", self.concurrency, 1)


@dataclass(frozen=True)
class Batched:
    """A fetched batch's outputs are produced and acknowledged together, then its offsets committed
    (``settle.BatchSettler``). ``order``: shared with a service that also produces from another task, so
    its messages and the loop's keep one order; None: the loop's own."""

    order: OutputOrder | None = None

    def __post_init__(self) -> None:
        if self.order is not None and not isinstance(self.order, OutputOrder):
            raise ValueError(f"order must be an OutputOrder, not {type(self.order).__name__}")


SettleMode: TypeAlias = PerRecord | Batched


@dataclass(frozen=True)
class LoopSettings:
    """One ``ConsumerLoop``'s setup. ``group_id`` None: the Kafka settings' group (``MUSTER_KAFKA_GROUP_ID``).
    ``max_records``: records fetched at a time (one batch)."""

    subscription: Subscription
    settle: SettleMode = field(default_factory=PerRecord)
    group_id: str | None = None
    max_records: int = 100
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if not isinstance(self.subscription, Topics | Pattern):
            raise ValueError(f"subscription must be Topics(...) or Pattern(...), not {self.subscription!r}")
        if not isinstance(self.settle, PerRecord | Batched):
            raise ValueError(f"settle must be PerRecord(...) or Batched(...), not {self.settle!r}")
        if self.group_id is not None and (not isinstance(self.group_id, str) or not self.group_id):
            raise ValueError(f"group_id must be a non-empty string or None, not {self.group_id!r}")
        _at_least("max_records", self.max_records, 1)
        if not isinstance(self.retry, RetryPolicy):
            raise ValueError(f"retry must be a RetryPolicy, not {self.retry!r}")


def _at_least(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, not {value!r}")
