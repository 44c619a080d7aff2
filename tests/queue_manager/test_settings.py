"""Scheduling policy from MUSTER_SCHEDULER_* variables."""

from __future__ import annotations

import pytest

from services.core import SchedulerConfig
from services.queue_manager.settings import scheduler_config_from_env


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
