from __future__ import annotations

from services.simulator.estimates import HistoryEstimator


def test_default_until_enough_history() -> None:
    est = HistoryEstimator(default_s=3600.0, min_samples=3)
    assert est.estimate("q") == 3600.0
    est.observe("q", 10.0)
    est.observe("q", 30.0)
    assert est.estimate("q") == 3600.0
    est.observe("q", 20.0)
    assert est.estimate("q") == 20.0
    est.observe("q", 1000.0)
    assert est.estimate("q") == 25.0


def test_falls_back_to_all_queues_before_own_history() -> None:
    est = HistoryEstimator(default_s=3600.0, min_samples=2)
    est.observe("a", 100.0)
    est.observe("a", 300.0)
    assert est.estimate("b") == 200.0
    est.observe("b", 7.0)
    est.observe("b", 9.0)
    assert est.estimate("b") == 8.0
