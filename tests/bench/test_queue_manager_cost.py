"""The queue manager's cost per workload, guarded by a count this machine's speed cannot blur.

``bench.qm_cost`` replays fixed scenarios through the queue manager's handlers, codec included, and counts
the Python function calls with ``cProfile``: the same code gives the same count on any machine (checked
here by two runs). A change that makes the queue manager do more per workload than the figures below
allow fails; one that makes it do much less asks for the figures to be lowered, so the guard stays tight.
Update a figure only with the reason in the commit message (and the benchmarks re-run: see
docs/benchmarks.md).
"""

from __future__ import annotations

import gc

import pytest

from bench.qm_cost import GUARDS, Scenario, count_calls

#: function calls per workload, as measured when the figure was last set
CALLS_PER_WORKLOAD = {"deep": 2_080, "wide": 2_026}
ABOVE = 1.10  # more than this ratio fails: the queue manager got dearer
BELOW = 0.80  # less than this ratio fails too: lower the figure so the next regression is caught
#: a scenario small enough to replay twice in a test
SMALL = Scenario(cohorts=1, queues=2, workloads=30, arrivals_per_cycle=100, inputs_per_cycle=20, cycle_s=0.5)


@pytest.mark.parametrize("name", sorted(GUARDS))
def test_calls_per_workload_stay_within_the_committed_figure(name: str) -> None:
    outcome = count_calls(GUARDS[name])
    assert outcome.finished == outcome.jobs, "the scenario did not run to its end"
    committed = CALLS_PER_WORKLOAD[name]
    ratio = outcome.calls_per_job / committed
    assert ratio <= ABOVE, (
        f"{name}: {outcome.calls_per_job:,.0f} calls per workload, {ratio:.2f}x the committed {committed:,}: "
        f"profile with `python -m bench.qm_cost --top 30` and the scenario's options"
    )
    assert ratio >= BELOW, (
        f"{name}: {outcome.calls_per_job:,.0f} calls per workload, only {ratio:.2f}x the committed {committed:,}: "
        f"lower CALLS_PER_WORKLOAD[{name!r}] to the new figure"
    )


def test_the_count_does_not_depend_on_the_run() -> None:
    assert count_calls(SMALL).calls == count_calls(SMALL).calls


class _LeftBehind:
    """Garbage another test might leave: a reference cycle with a finalizer. While ``_keep_leaving`` holds,
    each one finalized leaves another, so every collection, whenever it comes, has a finalizer to run."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        if _keep_leaving:
            _LeftBehind()


_keep_leaving = False


def test_the_count_does_not_include_finalizers_of_what_other_work_left_behind() -> None:
    global _keep_leaving
    clean = count_calls(SMALL).calls
    _keep_leaving = True
    try:
        _LeftBehind()
        assert count_calls(SMALL).calls == clean
    finally:
        _keep_leaving = False
        gc.collect()
