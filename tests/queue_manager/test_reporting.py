"""ReportPacer: waiting jobs' statuses are refreshed at most every interval, and less often when costly."""

from __future__ import annotations

from services.queue_manager.reporting import ReportPacer


def test_first_cycle_reports_then_once_per_interval() -> None:
    pacer = ReportPacer(1.0)
    assert pacer.due(100.0)
    pacer.reported(100.0, 0.01)
    assert not pacer.due(100.5)
    assert pacer.due(101.0)


def test_a_costly_report_spaces_the_next_by_ten_times_its_cost() -> None:
    pacer = ReportPacer(1.0)
    pacer.reported(100.0, 2.0)
    assert pacer.gap_s == 20.0
    assert not pacer.due(119.9)
    assert pacer.due(120.0)
    pacer.reported(120.0, 0.05)  # the backlog shrank: back to the interval
    assert pacer.gap_s == 1.0 and pacer.due(121.0)


def test_a_clock_that_went_back_reports_at_once() -> None:
    pacer = ReportPacer(1.0)
    pacer.reported(100.0, 0.01)
    assert pacer.due(90.0)
