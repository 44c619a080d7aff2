"""Ledger + configuration -> the messages published on ``muster.usage`` (pure; time passed in)."""

from __future__ import annotations

from schemas.usage import BudgetStatusReported, BurstSpendReported, ChargebackRecorded, QueueUsageReported
from services.quota_accountant.attempts import Charge
from services.quota_accountant.config_view import ConfigView
from services.quota_accountant.ledger import Ledger, QueueUsage
from services.quota_accountant.windows import to_datetime


def queue_report(ledger: Ledger, view: ConfigView, queue: str, now: float) -> QueueUsageReported:
    """Allocation per ``gpu:<type>`` (configured resources listed even at zero), nominal quota, the
    amount above nominal (borrowed from the cohort) and decayed GPU-seconds."""
    return queue_report_of(ledger.queue_usage(queue, now), view, queue, ledger.half_life_s)


def queue_report_of(usage: QueueUsage, view: ConfigView, queue: str, half_life_s: float) -> QueueUsageReported:
    nominal = view.nominal(queue)
    allocated: dict[str, int | float] = {res: 0 for res in nominal}
    allocated.update(usage.allocated)
    borrowed = {res: amount - nominal.get(res, 0) for res, amount in allocated.items() if amount > nominal.get(res, 0)}
    return QueueUsageReported(
        queue=queue,
        cohort=view.cohort(queue),
        as_of=to_datetime(usage.as_of),
        allocated=allocated,
        nominal=nominal,
        borrowed=borrowed,
        decayed_gpu_seconds=max(usage.decayed_gpu_seconds, 0.0),
        half_life_s=half_life_s,
    )


def budget_report(ledger: Ledger, view: ConfigView, tenant: str, now: float) -> BudgetStatusReported:
    """GPU-hours the tenant used in its current window; exhausted once usage reaches the budget."""
    window, budget = view.budget(tenant)
    start, used_s = ledger.window_usage(tenant, window, now)
    hours = max(used_s, 0.0) / 3600.0
    return BudgetStatusReported(
        tenant=tenant,
        window=window,
        window_start=to_datetime(start),
        gpu_hours_used=hours,
        gpu_hour_budget=budget,
        exhausted=budget is not None and hours >= budget,
    )


def burst_report(ledger: Ledger, view: ConfigView, queue: str, now: float) -> BurstSpendReported:
    """What the queue's bought nodes cost in the current window of its burst budget (a month without one)."""
    spend = ledger.burst.report(queue, view.burst_window(queue) or "month", now)
    return BurstSpendReported(
        queue=queue,
        window=spend.window,
        window_start=to_datetime(spend.window_start),
        window_end=to_datetime(spend.window_end),
        as_of=to_datetime(spend.as_of),
        gpu_hours=max(spend.gpu_hours, 0.0),
        money=max(spend.money, 0.0),
        nodes_held=spend.nodes_held,
    )


def chargeback(charge: Charge) -> ChargebackRecorded:
    return ChargebackRecorded(
        job_id=charge.job_id,
        attempt=charge.attempt,
        tenant=charge.tenant,
        queue=charge.queue,
        gpu_type=charge.gpu_type,
        gpus=charge.gpus,
        started_at=to_datetime(charge.started_at),
        ended_at=to_datetime(charge.ended_at),
        gpu_seconds=charge.gpu_seconds,
        outcome=charge.outcome,
        roles=dict(charge.roles),
    )


def charge_of(record: ChargebackRecorded) -> Charge:
    """A chargeback read back from the usage topic, as the ledger restores it."""
    return Charge(
        job_id=record.job_id,
        attempt=record.attempt,
        tenant=record.tenant,
        queue=record.queue,
        gpu_type=record.gpu_type,
        gpus=record.gpus,
        started_at=record.started_at.timestamp(),
        ended_at=record.ended_at.timestamp(),
        gpu_seconds=record.gpu_seconds,
        outcome=record.outcome,
        roles=dict(record.roles),
    )
