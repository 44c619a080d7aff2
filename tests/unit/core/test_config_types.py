"""Policies and queue orders are enums: a name is checked when the configuration is built, not mid-cycle."""

from __future__ import annotations

import pytest

from services.core import PRESETS, Policy, QueueOrderKind, SchedulerConfig, described, schedule
from services.core.policy import resolve

from .builders import job, node, queue, state


def test_names_given_as_strings_become_the_enums() -> None:
    cfg = SchedulerConfig(policy="tiresias", queue_order="las")  # type: ignore[arg-type]
    assert cfg.policy is Policy.TIRESIAS and cfg.queue_order is QueueOrderKind.LAS
    assert cfg == SchedulerConfig(policy=Policy.TIRESIAS, queue_order=QueueOrderKind.LAS)


@pytest.mark.parametrize(("field", "value", "known"), [
    ("policy", "fair", "muster, fifo, fifo-global, tiresias, priority, muster-no-backfill"),
    ("queue_order", "shortest", "remaining, submit, las"),
])
def test_an_unknown_name_is_refused_when_the_configuration_is_built(field: str, value: str, known: str) -> None:
    with pytest.raises(ValueError) as caught:
        SchedulerConfig(**{field: value})  # type: ignore[arg-type]
    assert repr(value) in str(caught.value) and known in str(caught.value)


def test_every_policy_has_a_preset_and_every_preset_resolves() -> None:
    assert set(PRESETS) == set(Policy)
    for policy in Policy:
        resolved = resolve(SchedulerConfig(policy=policy))
        assert isinstance(resolved.queue_order, QueueOrderKind)
        assert described(SchedulerConfig(policy=policy)).startswith(f"policy {policy.value}")


def test_drf_the_old_name_of_muster_without_backfill_is_still_understood() -> None:
    cfg = SchedulerConfig(policy="drf")  # type: ignore[arg-type]
    assert cfg.policy is Policy.MUSTER_NO_BACKFILL
    assert resolve(cfg).backfill is False and resolve(cfg).fair_share is True


def test_fifo_presets_by_enum_and_by_name_decide_the_same() -> None:
    st = state([queue("q", 8)], [node("n1")], [job(f"j{i}", gpus_per_pod=4 + i % 2, submit=i) for i in range(4)])
    for policy in (Policy.FIFO, Policy.FIFO_GLOBAL, Policy.TIRESIAS):
        by_enum = schedule(st, 5, SchedulerConfig(policy=policy))
        by_name = schedule(st, 5, SchedulerConfig(policy=policy.value))  # type: ignore[arg-type]
        assert by_enum == by_name and by_enum.decisions
