"""The ledger: accrual, allocation, windows, idempotence and order independence."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.fairshare import interval_value
from services.quota_accountant.attempts import Admission, Charge
from services.quota_accountant.ledger import Ledger
from services.quota_accountant.reports import charge_of, chargeback

HALF = 7 * 86400.0
T = datetime(2026, 11, 10, 12, tzinfo=UTC).timestamp()


def admission(queue: str = "team-a", tenant: str = "team-a", replicas: int = 4, per_pod: int = 8) -> Admission:
    return Admission(queue=queue, tenant=tenant, gpu_type="a100", gpus_per_pod=per_pod, replicas=replicas,
                     admitted_at=T)


def test_admit_start_end_charges_gpu_seconds_and_moves_allocation() -> None:
    ledger = Ledger(HALF)
    effect = ledger.admit("j-1", 1, admission())
    assert effect.queues == {"team-a"} and effect.tenants == {"team-a"}
    assert ledger.queue_usage("team-a", T).allocated == {"gpu:a100": 32}
    ledger.start("j-1", 1, T + 60)
    assert ledger.active_accruals == 1
    running = ledger.queue_usage("team-a", T + 660)
    assert running.gpu_seconds == pytest.approx(32 * 600)
    assert running.decayed_gpu_seconds == pytest.approx(interval_value(32, T + 60, T + 660, T + 660, HALF))
    effect = ledger.end("j-1", 1, T + 1860, "succeeded")
    assert effect.charge == Charge("j-1", 1, "team-a", "team-a", "a100", 32, T + 60, T + 1860, 32 * 1800.0,
                                   "succeeded")
    after = ledger.queue_usage("team-a", T + 1860)
    assert after.allocated == {}
    assert after.gpu_seconds == pytest.approx(32 * 1800)
    assert ledger.active_accruals == 0


def test_repeated_facts_have_no_effect() -> None:
    ledger = Ledger(HALF)
    ledger.admit("j-1", 1, admission())
    ledger.start("j-1", 1, T)
    assert not ledger.admit("j-1", 1, admission(replicas=9)).changed
    assert not ledger.start("j-1", 1, T + 5).changed
    assert ledger.end("j-1", 1, T + 100, "failed").charge is not None
    assert not ledger.end("j-1", 1, T + 100, "failed").changed
    assert not ledger.end("j-1", 1, T + 200, "succeeded").changed
    assert not ledger.start("j-1", 1, T).changed
    assert ledger.queue_usage("team-a", T + 300).gpu_seconds == pytest.approx(3200)


def test_scaling_changes_the_rate_from_its_time() -> None:
    ledger = Ledger(HALF)
    ledger.admit("j-1", 1, admission(replicas=4))
    ledger.start("j-1", 1, T)
    ledger.scale("j-1", 1, 2, T + 1000)
    assert ledger.queue_usage("team-a", T + 1000).allocated == {"gpu:a100": 16}
    charge = ledger.end("j-1", 1, T + 1800, "succeeded").charge
    assert charge is not None
    assert charge.gpu_seconds == pytest.approx(32 * 1000 + 16 * 800)
    assert charge.gpus == 32


def test_a_job_of_several_roles_is_charged_per_role() -> None:
    """A Ray head (1 GPU) beside workers scaled from 4 to 2 pods of 8: the head held its GPU the whole run,
    the workers the rest; the roles add up to the charge, and survive the wire."""
    ledger = Ledger(HALF)
    ray = replace(admission(replicas=4), fixed_gpus=1.0, main_role="worker", companions=(("head", 1.0),))
    ledger.admit("ray", 0, ray)
    ledger.start("ray", 0, T)
    ledger.scale("ray", 0, 2, T + 1000)
    charge = ledger.end("ray", 0, T + 1800, "succeeded").charge
    assert charge is not None
    assert charge.roles == pytest.approx({"head": 1800.0, "worker": 32 * 1000 + 16 * 800})
    assert sum(charge.roles.values()) == pytest.approx(charge.gpu_seconds)
    assert charge_of(chargeback(charge)) == charge
    assert "roles" not in chargeback(replace(charge, roles={})).model_dump(mode="json")  # one role: as before


def test_end_before_start_releases_quota_and_charges_when_the_start_arrives() -> None:
    ledger = Ledger(HALF)
    ledger.admit("j-1", 1, admission())
    effect = ledger.end("j-1", 1, T + 100, "preempted")
    assert effect.charge is None and effect.queues == {"team-a"}
    assert ledger.queue_usage("team-a", T + 100).allocated == {}
    late = ledger.start("j-1", 1, T + 40).charge
    assert late is not None and late.gpu_seconds == pytest.approx(32 * 60) and late.outcome == "preempted"


def test_attempt_that_never_ran_is_dropped_uncharged_after_the_horizon() -> None:
    ledger = Ledger(HALF, horizon_s=3600)
    ledger.admit("j-1", 1, admission())
    ledger.end("j-1", 1, T, "preempted")
    ledger.prune(T + 7200)
    assert ledger.attempts == {} and ledger.queue_usage("team-a", T + 7200).gpu_seconds == 0


def test_end_seen_before_admission_settles_when_admission_arrives() -> None:
    ledger = Ledger(HALF)
    assert not ledger.start("j-1", 1, T).changed
    assert not ledger.end("j-1", 1, T + 100, "succeeded").changed
    charge = ledger.admit("j-1", 1, admission()).charge
    assert charge is not None and charge.gpu_seconds == pytest.approx(3200)


def test_window_usage_counts_only_the_current_window() -> None:
    ledger = Ledger(HALF)
    month_end = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    ledger.admit("j-1", 1, admission(replicas=1, per_pod=2))
    ledger.start("j-1", 1, month_end - 3600)
    start, used = ledger.window_usage("team-a", "month", month_end + 1800)
    assert start == month_end and used == pytest.approx(2 * 1800)
    ledger.end("j-1", 1, month_end + 3600, "succeeded")
    assert ledger.window_usage("team-a", "month", month_end + 7200)[1] == pytest.approx(2 * 3600)
    _, november = ledger.window_usage("team-a", "month", month_end - 1)
    assert november == pytest.approx(2 * 3600)
    assert ledger.window_usage("team-a", "day", month_end + 7200)[1] == pytest.approx(2 * 3600)


def test_restored_charge_is_folded_once_and_blocks_replayed_facts() -> None:
    ledger = Ledger(HALF)
    charge = Charge("j-1", 1, "team-a", "team-a", "a100", 32, T, T + 1800, 57600.0, "succeeded")
    assert ledger.restore(charge).changed
    assert not ledger.restore(charge).changed
    assert not ledger.admit("j-1", 1, admission()).changed
    assert not ledger.start("j-1", 1, T).changed
    assert not ledger.end("j-1", 1, T + 1800, "succeeded").changed
    usage = ledger.queue_usage("team-a", T + 1800)
    assert usage.gpu_seconds == pytest.approx(57600)
    assert usage.decayed_gpu_seconds == pytest.approx(interval_value(32, T, T + 1800, T + 1800, HALF))
    assert ledger.window_usage("team-a", "month", T + 1800)[1] == pytest.approx(57600)


def test_restore_reproduces_the_live_computation() -> None:
    live = Ledger(HALF)
    live.admit("j-1", 1, admission())
    live.start("j-1", 1, T)
    charge = live.end("j-1", 1, T + 5000, "succeeded").charge
    assert charge is not None
    restored = Ledger(HALF)
    restored.restore(charge)
    for now in (T + 5000, T + 86400):
        assert restored.queue_usage("team-a", now) == live.queue_usage("team-a", now)
        assert restored.window_usage("team-a", "week", now) == live.window_usage("team-a", "week", now)


def test_prune_forgets_old_settled_keys_and_unmatched_facts() -> None:
    ledger = Ledger(HALF, horizon_s=86400)
    ledger.admit("j-1", 1, admission())
    ledger.start("j-1", 1, T)
    ledger.end("j-1", 1, T + 10, "succeeded")
    ledger.start("orphan", 1, T)
    ledger.prune(T + 2 * 86400)
    assert ("j-1", 1) not in ledger.settled
    assert ("orphan", 1) not in ledger.attempts
    assert ledger.queue_usage("team-a", T + 2 * 86400).gpu_seconds == pytest.approx(320)


Fact = tuple[str, float]
facts_strategy = st.tuples(
    st.floats(min_value=0, max_value=86400, allow_nan=False),  # start
    st.floats(min_value=0, max_value=86400, allow_nan=False),  # end
    # one scale decision per instant (two at the same instant are ordered by their partition); whole
    # seconds, as 1e-97 s apart become the same instant once added to an epoch time
    st.dictionaries(st.integers(min_value=0, max_value=86400).map(float), st.integers(1, 8), max_size=3),
)


def _apply(ledger: Ledger, fact: tuple[str, float, int]) -> Charge | None:
    kind, when, replicas = fact
    if kind == "admit":
        return ledger.admit("j-1", 1, admission()).charge
    if kind == "scale":
        return ledger.scale("j-1", 1, replicas, T + when).charge
    if kind == "start":
        return ledger.start("j-1", 1, T + when).charge
    return ledger.end("j-1", 1, T + when, "succeeded").charge


@given(times=facts_strategy, order=st.randoms(use_true_random=False), repeats=st.integers(1, 3))
def test_any_order_with_repeats_gives_one_identical_charge(
    times: tuple[float, float, dict[float, int]], order: object, repeats: int
) -> None:
    start, end, scales = times
    facts = [("admit", 0.0, 0), ("start", start, 0), *[("scale", t, r) for t, r in scales.items()]]
    reference = Ledger(HALF)
    for fact in facts:
        _apply(reference, fact)
    expected = reference.end("j-1", 1, T + end, "succeeded").charge
    assert expected is not None
    assert expected.gpu_seconds >= 0
    assert expected.gpu_seconds <= 8 * 8 * max((T + end) - (T + start), 0.0) * (1 + 1e-9)

    shuffled_facts = [*facts, ("end", end, 0)] * repeats
    order.shuffle(shuffled_facts)  # type: ignore[attr-defined]
    ledger = Ledger(HALF)
    charges = [c for c in (_apply(ledger, f) for f in shuffled_facts) if c is not None]
    assert len(charges) == 1
    # a scale change that arrives after the end is ignored: compare when every scale came before it
    first_end = shuffled_facts.index(("end", end, 0))
    if all(shuffled_facts.index(f) < first_end for f in facts if f[0] == "scale"):
        assert charges[0].gpu_seconds == pytest.approx(expected.gpu_seconds)
    assert charges[0].gpu_seconds >= 0


@given(start=st.floats(0, 86400), spans=st.lists(st.floats(0, 86400), min_size=1, max_size=6))
def test_accrual_is_never_negative_and_never_decreases_while_running(start: float, spans: list[float]) -> None:
    ledger = Ledger(HALF)
    ledger.admit("j-1", 1, admission())
    ledger.start("j-1", 1, T + start)
    previous = 0.0
    for now in sorted(T + s for s in spans):
        usage = ledger.queue_usage("team-a", now)
        assert usage.gpu_seconds >= previous - 1e-9
        assert usage.decayed_gpu_seconds >= 0
        previous = usage.gpu_seconds
    assert math.isfinite(previous)
