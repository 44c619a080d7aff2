"""Garbage-collector settings of a service process (``services.runtime.collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.runtime.collector import DEFAULT_THRESHOLDS, ENV_VAR, configure_collector, thresholds_from_env


@pytest.fixture
def restored_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_thresholds_default_and_from_the_environment() -> None:
    assert thresholds_from_env({}) == DEFAULT_THRESHOLDS
    assert thresholds_from_env({ENV_VAR: " 700, 10,10 "}) == (700, 10, 10)


@pytest.mark.parametrize("raw", ["50000", "a,b,c", "1,2,3,4", "-1,10,10", "1.5,10,10"])
def test_malformed_thresholds_are_refused_with_the_variable_named(raw: str) -> None:
    with pytest.raises(ValueError, match=ENV_VAR):
        thresholds_from_env({ENV_VAR: raw})


def test_configure_collector_sets_the_process_thresholds(restored_thresholds: None) -> None:
    configure_collector((12_345, 7, 3))
    assert gc.get_threshold() == (12_345, 7, 3)
