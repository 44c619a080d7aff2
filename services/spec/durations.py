"""Durations as people write and read them: one parser (``90m``, ``7d``) for job annotations and the
simulator's options, one formatter (kubectl's ``AGE`` style) for the CLI's listings and kubesim's tables."""

from __future__ import annotations

import re

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number with an optional unit s, m, h, d or w (``3600``, ``90m``, ``7d``)."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 3600, 90m, 12h, 7d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def human_duration(seconds: float) -> str:
    """``45s``, ``5m30s``, ``42m``, ``3h20m``, ``12h``, ``4d``: an age as kubectl prints it (negative: 0s)."""
    s = max(int(seconds), 0)
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if s < 28800 else f"{s // 3600}h"
    return f"{s // 86400}d"
