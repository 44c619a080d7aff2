"""The machine line printed under every benchmark: busy and stolen shares from ``/proc/stat``."""

from __future__ import annotations

import os
from pathlib import Path

from bench.system.machine import CpuTimes, describe, process_cpu_seconds, spent

BEFORE = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n"
AFTER = "cpu  700 0 150 1000 50 0 100 100 0 0\ncpu0 350 0 75 500 25 0 50 50 0 0\n"


def test_parse_reads_the_aggregate_line_and_counts_iowait_as_idle() -> None:
    times = CpuTimes.parse(BEFORE)
    assert times == CpuTimes(busy=150, idle=850, steal=0)
    assert times.total == 1000


def test_describe_gives_busy_and_steal_shares_of_the_interval() -> None:
    line = describe(CpuTimes.parse(BEFORE), CpuTimes.parse(AFTER), cores=2)
    # interval: busy 800, idle 200, steal 100 of 1,100 ticks
    assert line == ("machine: 2 cores; during the run the cores were 73% busy and 9.1% of their time was "
                    "taken by the hypervisor (steal)")


def test_short_lines_of_old_kernels_have_no_steal() -> None:
    assert CpuTimes.parse("cpu 1 2 3 4 5\n") == CpuTimes(busy=6, idle=9, steal=0)


def test_without_proc_stat_only_the_cores_are_printed(tmp_path: Path) -> None:
    assert CpuTimes.now(tmp_path / "missing") is None
    assert describe(None, None, cores=1) == "machine: 1 core"


def test_process_cpu_seconds_reads_user_and_system_ticks(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    # a command name with spaces and a parenthesis; utime 250 and stime 50 ticks are fields 14 and 15
    fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", "250", "50", "0", "0"]
    (tmp_path / "42" / "stat").write_text("42 (queue (manager)) " + " ".join(fields) + "\n")
    ticks = os.sysconf("SC_CLK_TCK")
    assert process_cpu_seconds(42, tmp_path) == 300 / ticks
    assert process_cpu_seconds(43, tmp_path) is None


def test_process_cpu_seconds_of_this_process_grows() -> None:
    first = process_cpu_seconds(os.getpid())
    assert first is not None
    sum(i * i for i in range(300_000))
    second = process_cpu_seconds(os.getpid())
    assert second is not None and second >= first


def test_spent_is_the_difference_per_process_and_none_where_a_reading_is_missing() -> None:
    assert spent([1.0, None, 2.0], [3.5, 4.0, None]) == (2.5, None, None)
