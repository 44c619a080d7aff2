"""Budget windows in UTC: the calendar day, the ISO week (from Monday 00:00) and the calendar month."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

WindowKind = Literal["day", "week", "month"]
WINDOW_KINDS: tuple[WindowKind, ...] = get_args(WindowKind)
BUCKET_KEEP_S = 64 * 24 * 3600.0
"""How long per-window figures are kept after their window ended."""


def to_datetime(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def window_start(kind: WindowKind, t: float) -> float:
    """Start (timestamp) of the ``kind`` window holding ``t``."""
    moment = to_datetime(math.floor(t))  # whole seconds: microsecond rounding must not cross a boundary
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "day":
        start = day
    elif kind == "week":
        start = day - timedelta(days=day.weekday())
    else:
        start = day.replace(day=1)
    return start.timestamp()


def window_end(kind: WindowKind, start: float) -> float:
    """End (exclusive) of the window that begins at ``start``."""
    begin = to_datetime(start)
    if kind == "day":
        end = begin + timedelta(days=1)
    elif kind == "week":
        end = begin + timedelta(days=7)
    elif begin.month == 12:
        end = begin.replace(year=begin.year + 1, month=1)
    else:
        end = begin.replace(month=begin.month + 1)
    return end.timestamp()


def split_by_window(kind: WindowKind, start: float, end: float) -> Iterator[tuple[float, float]]:
    """(window start, seconds of ``[start, end]`` inside that window) for every window the interval touches."""
    cursor = start
    while cursor < end:
        ws = window_start(kind, cursor)
        we = window_end(kind, ws)
        stop = min(end, we)
        yield ws, stop - cursor
        cursor = stop
