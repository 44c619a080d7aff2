"""What the machine was doing during a benchmark: cores, how busy they were, and how much time the
hypervisor took away (steal), from ``/proc/stat`` before and after the run.

Figures measured on a shared or virtual machine move with its neighbours; printing the machine's own
share next to them tells a slow run on a busy host from a regression.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat`` (clock ticks since boot, all cores together)."""

    busy: int
    idle: int
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal

    @classmethod
    def parse(cls, text: str) -> CpuTimes:
        for line in text.splitlines():
            fields = line.split()
            if fields and fields[0] == "cpu":
                ticks = [int(value) for value in fields[1:]]
                ticks += [0] * (8 - len(ticks))
                user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
                # guest time is already counted in user and nice
                return cls(busy=user + nice + system + irq + softirq, idle=idle + iowait, steal=steal)
        raise ValueError("no aggregate cpu line in /proc/stat")

    @classmethod
    def now(cls, path: Path = PROC_STAT) -> CpuTimes | None:
        """The current counters, or None where there is no ``/proc/stat`` (not Linux)."""
        try:
            return cls.parse(path.read_text())
        except (OSError, ValueError):
            return None


def describe(before: CpuTimes | None, after: CpuTimes | None, cores: int | None = None) -> str:
    """One line: the cores, and their busy and stolen shares between the two samples."""
    cores = cores or os.cpu_count() or 1
    head = f"machine: {cores} core{'s' if cores != 1 else ''}"
    if before is None or after is None or after.total <= before.total:
        return head
    span = after.total - before.total
    busy = (after.busy - before.busy) / span
    steal = (after.steal - before.steal) / span
    return (f"{head}; during the run the cores were {busy:.0%} busy and {steal:.1%} of their time was taken "
            "by the hypervisor (steal)")


def process_cpu_seconds(pid: int, path: Path = Path("/proc")) -> float | None:
    """CPU time (user + system) a process has used so far, or None if it cannot be read."""
    try:
        text = (path / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: count fields after its closing parenthesis
    fields = text[text.rfind(")") + 2:].split()
    try:
        utime, stime = int(fields[11]), int(fields[12])
    except (IndexError, ValueError):
        return None
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def spent(before: Sequence[float | None], after: Sequence[float | None]) -> tuple[float | None, ...]:
    """CPU seconds used between two ``process_cpu_seconds`` readings of the same processes (None where
    either reading is missing)."""
    return tuple(None if b is None or a is None else a - b for b, a in zip(before, after, strict=True))
