"""Scheduling policy from MUSTER_SCHEDULER_* variables."""

from __future__ import annotations

import logging

import pytest

from services.core import Policy, QueueOrderKind, SchedulerConfig, described
from services.core.policy import resolve
from services.queue_manager.main import QueueManagerMain
from services.queue_manager.settings import scheduler_config_from_env
from services.runtime.options import ServeOptions


def test_defaults_without_variables() -> None:
    assert scheduler_config_from_env({}) == SchedulerConfig()


def test_fields_are_converted_by_their_default_type() -> None:
    cfg = scheduler_config_from_env(
        {"MUSTER_SCHEDULER_MIN_RUNTIME_S": "60", "MUSTER_SCHEDULER_BACKFILL": "false",
         "MUSTER_SCHEDULER_POLICY": "fifo", "MUSTER_SCHEDULER_STATUS_DEPTH": "20"}
    )
    assert (cfg.min_runtime_s, cfg.backfill, cfg.policy, cfg.status_depth) == (60.0, False, "fifo", 20)


@pytest.mark.parametrize(("var", "value"), [("MUSTER_SCHEDULER_BACKFILL", "maybe"),
                                            ("MUSTER_SCHEDULER_STATUS_DEPTH", "many")])
def test_bad_values_name_the_variable(var: str, value: str) -> None:
    with pytest.raises(ValueError, match=var):
        scheduler_config_from_env({var: value})


def test_policy_and_queue_order_are_checked_against_their_names() -> None:
    with pytest.raises(ValueError, match=r"MUSTER_SCHEDULER_POLICY: expected one of muster, fifo, .*got 'fair'"):
        scheduler_config_from_env({"MUSTER_SCHEDULER_POLICY": "fair"})
    with pytest.raises(ValueError, match="MUSTER_SCHEDULER_QUEUE_ORDER: expected one of remaining, submit, las"):
        scheduler_config_from_env({"MUSTER_SCHEDULER_QUEUE_ORDER": "shortest"})
    cfg = scheduler_config_from_env({"MUSTER_SCHEDULER_POLICY": "drf", "MUSTER_SCHEDULER_QUEUE_ORDER": "las"})
    assert (cfg.policy, cfg.queue_order) == (Policy.MUSTER_NO_BACKFILL, QueueOrderKind.LAS)
    assert described(cfg).startswith("policy muster-no-backfill: ")


def test_a_flag_set_by_the_operator_wins_over_the_policy_preset() -> None:
    """``tiresias`` fixes min_runtime_s to 0; an operator who sets 60 gets 60 (it used to be 0, silently)."""
    cfg = scheduler_config_from_env({"MUSTER_SCHEDULER_POLICY": "tiresias", "MUSTER_SCHEDULER_MIN_RUNTIME_S": "60"})
    assert cfg.explicit == frozenset({"min_runtime_s"})
    resolved = resolve(cfg)
    assert (resolved.min_runtime_s, resolved.queue_order, resolved.backfill) == (60.0, "las", False)
    assert resolve(SchedulerConfig(policy="tiresias", min_runtime_s=60.0)).min_runtime_s == 0.0  # not set: preset
    told = described(cfg)
    assert told.startswith("policy tiresias: ") and "min_runtime_s=60.0 (set)" in told
    assert "queue_order=las (preset)" in told and "explicit" not in told


def test_the_queue_manager_logs_the_resolved_policy_at_start(caplog: pytest.LogCaptureFixture) -> None:
    cfg = scheduler_config_from_env({"MUSTER_SCHEDULER_POLICY": "tiresias", "MUSTER_SCHEDULER_MIN_RUNTIME_S": "60"})
    with caplog.at_level(logging.INFO, logger="services.queue_manager.main"):
        QueueManagerMain(ServeOptions(), scheduler_config=cfg)
    assert any("scheduling policy tiresias" in m and "min_runtime_s=60.0 (set)" in m for m in caplog.messages)
