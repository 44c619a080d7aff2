"""Ledger + configuration -> usage messages."""

from __future__ import annotations

import pytest

from schemas.config import ConfigItemDeleted, MusterConfig, QueueConfig, ResourceQuotaConfig, TenantConfig
from schemas.envelope import make_envelope
from services.quota_accountant.config_view import ConfigView, build_view
from services.quota_accountant.handlers import apply
from services.quota_accountant.ledger import Ledger
from services.quota_accountant.reports import budget_report, charge_of, chargeback, queue_report
from tests.quota_accountant.builders import T0, admitted, at, queue_defined, started, succeeded, tenant_defined


def view(nominal: int = 16, budget: float | None = 10.0) -> ConfigView:
    rows = [make_envelope(m, "test") for m in (queue_defined(nominal=nominal, cohort="research"),
                                                tenant_defined(budget=budget))]
    return build_view(None, rows)


def test_queue_report_allocated_nominal_borrowed() -> None:
    ledger = Ledger()
    apply(ledger, admitted(replicas=4, gpus=8), {})
    report = queue_report(ledger, view(), "team-a", at(0).timestamp())
    assert report.allocated == {"gpu:a100": 32}
    assert report.nominal == {"gpu:a100": 16}
    assert report.borrowed == {"gpu:a100": 16}
    assert report.cohort == "research"
    assert report.as_of == T0


def test_idle_configured_queue_reports_zero_allocation() -> None:
    report = queue_report(Ledger(), view(), "team-a", at(0).timestamp())
    assert report.allocated == {"gpu:a100": 0} and report.borrowed == {} and report.decayed_gpu_seconds == 0


def test_budget_report_crossing_sets_exhausted() -> None:
    ledger = Ledger()
    config = view(budget=10.0)
    apply(ledger, admitted(replicas=4, gpus=8), {})
    apply(ledger, started(when=0), {})
    early = budget_report(ledger, config, "team-a", at(600).timestamp())
    assert early.gpu_hours_used == pytest.approx(32 * 600 / 3600) and not early.exhausted
    late = budget_report(ledger, config, "team-a", at(1200).timestamp())
    assert late.gpu_hours_used == pytest.approx(32 / 3) and late.exhausted
    assert late.window == "month" and late.window_start.day == 1 and late.gpu_hour_budget == 10.0


def test_chargeback_round_trips_through_the_wire_model() -> None:
    ledger = Ledger()
    apply(ledger, admitted(), {})
    apply(ledger, started(when=0), {})
    charge = apply(ledger, succeeded(when=90), {}).charge
    assert charge is not None
    record = chargeback(charge)
    assert record.gpu_seconds == pytest.approx(32 * 90) and record.key() == "charge/j-1/1"
    assert charge_of(record) == charge


def test_config_topic_overrides_and_deletes_file_entries() -> None:
    base = MusterConfig(
        queues=[QueueConfig(name="team-a", quotas={"gpu:a100": ResourceQuotaConfig(nominal=4)}),
                QueueConfig(name="old")],
        tenants=[TenantConfig(name="team-a", namespace="team-a", gpu_hour_budget=1)],
    )
    rows = [make_envelope(queue_defined(nominal=16), "test"),
            make_envelope(ConfigItemDeleted(kind="queue", name="old"), "test")]
    result = build_view(base, rows)
    assert result.nominal("team-a") == {"gpu:a100": 16}
    assert "old" not in result.queues
    assert result.budget("team-a") == ("month", 1)
    assert result.budget("nobody") == ("month", None)
