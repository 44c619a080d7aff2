"""The consumer loop's settings (``LoopSettings``): wrong combinations have no spelling, wrong values are
refused when built. No broker: these build values and loops, and never run one."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from services.runtime.kafka import (
    Batched,
    ConsumerLoop,
    EnvelopeProducer,
    KafkaSettings,
    LoopSettings,
    OutputOrder,
    Pattern,
    PerRecord,
    RetryPolicy,
    Topics,
)
from tests.integration.builders import collector


def test_topics_are_kept_as_an_immutable_tuple() -> None:
    names = ["a", "b"]
    topics = Topics(names)
    names.append("c")
    assert topics.names == ("a", "b")
    assert topics == Topics(("a", "b")) and hash(topics) == hash(Topics(["a", "b"]))


@pytest.mark.parametrize("names", [[], (), "muster.intents.v1", ["a", ""], ["a", None]])
def test_topics_refuse_no_name_a_bare_string_and_empty_names(names: Any) -> None:
    with pytest.raises(ValueError):
        Topics(names)


@pytest.mark.parametrize("regex", ["", "muster.intents.(", None])
def test_a_pattern_is_a_non_empty_regular_expression(regex: Any) -> None:
    with pytest.raises(ValueError):
        Pattern(regex)


def test_a_valid_pattern_is_kept_as_written() -> None:
    assert Pattern(r"muster\.intents(\.[a-z0-9-]+)?\.v1").regex == r"muster\.intents(\.[a-z0-9-]+)?\.v1"


@pytest.mark.parametrize("concurrency", [0, -1, True, 1.5, "2"])
def test_per_record_concurrency_is_an_integer_of_at_least_one(concurrency: Any) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        PerRecord(concurrency=concurrency)


def test_per_record_settling_takes_no_output_order_and_batch_settling_no_concurrency() -> None:
    with pytest.raises(TypeError):
        PerRecord(order=OutputOrder())  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Batched(concurrency=2)  # type: ignore[call-arg]
    assert PerRecord().concurrency == 1 and PerRecord(concurrency=16).concurrency == 16
    assert Batched().order is None


def test_batched_order_is_an_output_order() -> None:
    order = OutputOrder()
    assert Batched(order=order).order is order
    with pytest.raises(ValueError, match="OutputOrder"):
        Batched(order="fifo")  # type: ignore[arg-type]


def test_loop_settings_defaults() -> None:
    config = LoopSettings(Topics(["t"]))
    assert config.settle == PerRecord(concurrency=1)
    assert config.group_id is None and config.max_records == 100 and config.retry == RetryPolicy()


@pytest.mark.parametrize("subscription", [["t"], "t", None, ("t",)])
def test_loop_settings_need_topics_or_a_pattern(subscription: Any) -> None:
    with pytest.raises(ValueError, match="subscription"):
        LoopSettings(subscription)


def test_topics_and_a_pattern_together_cannot_be_given() -> None:
    with pytest.raises(ValueError, match="settle"):
        LoopSettings(Topics(["t"]), Pattern("t.*"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        LoopSettings(Topics(["t"]), pattern=Pattern("t.*"))  # type: ignore[call-arg]


@pytest.mark.parametrize("settle", ["batch", "record", None, OutputOrder()])
def test_the_settle_mode_is_per_record_or_batched(settle: Any) -> None:
    with pytest.raises(ValueError, match="settle"):
        LoopSettings(Topics(["t"]), settle=settle)


@pytest.mark.parametrize("max_records", [0, -5, True, 2.0])
def test_max_records_is_an_integer_of_at_least_one(max_records: Any) -> None:
    with pytest.raises(ValueError, match="max_records"):
        LoopSettings(Topics(["t"]), max_records=max_records)


@pytest.mark.parametrize("group_id", ["", 7])
def test_a_group_id_is_a_non_empty_string_when_given(group_id: Any) -> None:
    with pytest.raises(ValueError, match="group_id"):
        LoopSettings(Topics(["t"]), group_id=group_id)


@pytest.mark.parametrize("kwargs", [
    {"attempts": 0}, {"attempts": -1}, {"attempts": True},
    {"initial_backoff_s": -0.1}, {"initial_backoff_s": 1.0, "max_backoff_s": 0.5}, {"max_backoff_s": float("nan")},
])
def test_retry_policy_bounds(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


def test_retry_policy_is_a_retry_policy() -> None:
    with pytest.raises(ValueError, match="retry"):
        LoopSettings(Topics(["t"]), retry=3)  # type: ignore[arg-type]


def test_the_settings_are_frozen() -> None:
    config = LoopSettings(Topics(["t"]), settle=PerRecord(concurrency=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_records = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.settle.concurrency = 0  # type: ignore[misc, union-attr]


def test_the_loop_takes_its_group_from_the_settings_or_from_kafka_settings() -> None:
    kafka = KafkaSettings(group_id="from-env")
    producer = EnvelopeProducer(kafka)
    explicit = LoopSettings(Topics(["t"]), group_id="mine")
    assert ConsumerLoop(kafka, explicit, collector([]), producer).group_id == "mine"
    loop = ConsumerLoop(kafka, LoopSettings(Pattern("t.*"), settle=Batched()), collector([]), producer)
    assert loop.group_id == "from-env" and loop.config.settle == Batched()
    with pytest.raises(ValueError, match="consumer group"):
        ConsumerLoop(KafkaSettings(group_id=None), LoopSettings(Topics(["t"])), collector([]), producer)


def test_the_loop_refuses_anything_but_loop_settings() -> None:
    kafka = KafkaSettings(group_id="g")
    with pytest.raises(TypeError, match="LoopSettings"):
        ConsumerLoop(kafka, ["t"], collector([]), EnvelopeProducer(kafka))  # type: ignore[arg-type]
