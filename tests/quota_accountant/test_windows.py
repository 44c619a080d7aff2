"""UTC budget windows: day, ISO week, calendar month."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.quota_accountant.windows import WINDOW_KINDS, WindowKind, split_by_window, window_end, window_start


def ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


def test_day_week_month_starts() -> None:
    moment = ts(2026, 11, 19, 15, 30)  # a Thursday
    assert window_start("day", moment) == ts(2026, 11, 19)
    assert window_start("week", moment) == ts(2026, 11, 16)  # Monday
    assert window_start("month", moment) == ts(2026, 11, 1)


def test_iso_week_crosses_the_year() -> None:
    assert window_start("week", ts(2027, 1, 1, 9)) == ts(2026, 12, 28)
    assert window_end("week", ts(2026, 12, 28)) == ts(2027, 1, 4)


def test_month_ends() -> None:
    assert window_end("month", ts(2026, 12, 1)) == ts(2027, 1, 1)
    assert window_end("month", ts(2028, 2, 1)) == ts(2028, 3, 1)
    assert window_end("day", ts(2026, 3, 31)) == ts(2026, 4, 1)


def test_interval_split_over_month_boundary() -> None:
    parts = list(split_by_window("month", ts(2026, 10, 31, 23), ts(2026, 11, 1, 2)))
    assert parts == [(ts(2026, 10, 1), 3600.0), (ts(2026, 11, 1), 7200.0)]


@given(
    kind=st.sampled_from(WINDOW_KINDS),
    start=st.floats(min_value=ts(2020, 1, 1), max_value=ts(2035, 1, 1), allow_nan=False),
    length=st.floats(min_value=0, max_value=200 * 86400, allow_nan=False),
)
def test_split_covers_the_interval(kind: WindowKind, start: float, length: float) -> None:
    parts = list(split_by_window(kind, start, start + length))
    assert sum(s for _, s in parts) == pytest.approx(length, abs=1e-3)
    for ws, seconds in parts:
        assert window_start(kind, ws) == ws
        assert 0 < seconds <= window_end(kind, ws) - ws
