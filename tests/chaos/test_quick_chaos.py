"""``muster chaos --quick``: the whole system, as separate processes, survives kills, a broker restart,
API outages and dropped watches with every invariant intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.status import TERMINAL_STATES
from services.chaos.harness import run_chaos
from services.chaos.plan import ChaosPlan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

COVERAGE = ("coverage_placements", "coverage_pods", "coverage_faults", "coverage_cancels", "status_history_kept",
            "dead_letters")


async def test_quick_run_keeps_every_invariant(tmp_path: Path) -> None:
    plan = ChaosPlan.quick(seed=1)
    told: list[tuple[str, float, float | None]] = []
    report = await run_chaos(plan, tmp_path, lambda message: print(message), lambda *a: told.append(a))

    submitted = [done for what, done, total in told if what == "jobs submitted" and total == plan.jobs]
    assert submitted == list(range(1, plan.jobs + 1))
    assert [a for a in told if a[0] == "jobs ended"][-1] == ("jobs ended", plan.jobs, plan.jobs)

    # the run's own coverage checks hold: every planned fault performed, a placement and a pod for the
    # jobs that were admitted and ran, the asked-for preemptions and cancels, no dead letter
    assert report.violations == [], json.dumps(report.as_json()["violations"], indent=1)
    assert set(COVERAGE) <= set(report.checks) and all(count == 0 for count in report.checks.values())
    assert report.jobs_submitted == plan.jobs
    assert set(report.final_states) <= TERMINAL_STATES
    assert sum(report.final_states.values()) == plan.jobs
    assert report.preemptions_asked and report.cancels_on_open_jobs > 0  # this seed's workload asks for both
    assert report.preemptions > 0  # and its contention is heavy enough to arise however loaded the machine


async def test_quick_run_on_three_brokers_survives_killed_brokers(tmp_path: Path) -> None:
    """Three brokers: the leader of most partitions and then the active controller are killed with SIGKILL
    (one at a time) and one broker is restarted, beside the service kills, Kubernetes API outages and
    dropped watches; every invariant holds (an outage that meets a dispatch requeues the attempt)."""
    plan = ChaosPlan.quick(seed=2, brokers=3)
    report = await run_chaos(plan, tmp_path, lambda message: print(message))

    assert report.violations == [], json.dumps(report.as_json()["violations"], indent=1)
    assert set(COVERAGE) <= set(report.checks)
    assert report.brokers == 3 and report.jobs_submitted == plan.jobs
    assert sum(report.final_states.values()) == plan.jobs
    assert report.faults.broker_kills == {"leader": 1, "controller": 1}  # the plan's roles, by turns
    assert all(0 < s < 60 for times in report.faults.broker_failover_s.values() for s in times)
