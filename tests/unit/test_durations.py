"""Durations people write (job annotations, simulator options) and read (ages in listings)."""

from __future__ import annotations

import pytest

from services.spec.durations import human_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("2m", 120.0), ("90m", 5400.0), ("1.5h", 5400.0), ("1d", 86400.0),
    ("2d", 172800.0), ("1w", 604800.0), (" 12h ", 43200.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5m", "5y", "1h30m", "٣"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [
    (-3, "0s"), (0, "0s"), (45.9, "45s"), (119, "119s"), (330, "5m30s"), (600, "10m"), (3599, "59m"),
    (3600, "1h0m"), (12000, "3h20m"), (28800, "8h"), (86399, "23h"), (86400, "1d"), (400000, "4d"),
])
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text
