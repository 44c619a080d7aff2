"""Broken records on every input topic of the running system: dead-lettered with their reason where a
``ConsumerLoop`` reads the topic, logged and skipped where a ``CompactedTable`` does; no service stops and
a job submitted afterwards still runs to success."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter

import pytest

from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DECISIONS_TOPIC,
    DISPATCHES_TOPIC,
    INTENTS_TOPIC,
    RUNS_TOPIC,
    USAGE_TOPIC,
    dlq_topic,
)
from services.dispatcher.dispatcher import passes_over
from services.runtime.kafka.headers import MAX_DEAD_VALUE_BYTES
from tests.e2e.system import System
from tests.hostile.builders import assert_all_running, run_valid_job
from tests.hostile.kafka import produce, read_dead_letters
from tests.hostile.records import hostile_records

pytestmark = pytest.mark.e2e

#: topic -> how many consumer groups read it through a ConsumerLoop (each dead-letters on its own)
LOOP_READERS = {INTENTS_TOPIC: 1, RUNS_TOPIC: 2, DISPATCHES_TOPIC: 1, DECISIONS_TOPIC: 1}
#: topics read only through CompactedTable (queue manager, accountant, gateway): skipped, never dead-lettered
TABLE_ONLY = (CAPACITY_TOPIC, USAGE_TOPIC, CONFIG_TOPIC)
ALL_INPUTS = (*LOOP_READERS, *TABLE_ONLY)


async def test_broken_records_on_every_input_topic(system: System, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    expected: Counter[tuple[str, str, str | None]] = Counter()
    for topic in ALL_INPUTS:
        records = [dataclasses.replace(r, key=f"{topic}:{r.case}".encode()) for r in hostile_records(topic)]
        await produce(system.settings, topic, records)
        for record in records:
            # the dispatcher passes over, undecoded, a record naming a type of its topic it ignores: the queue
            # manager alone dead-letters such a record of the runs topic, nobody one of the decisions topic
            ignored = topic in (RUNS_TOPIC, DECISIONS_TOPIC) and passes_over(topic, record.key, record.value)
            expected[(dlq_topic(topic), record.case, record.reason)] += LOOP_READERS.get(topic, 0) - ignored

    letters = await read_dead_letters(system.settings, ALL_INPUTS, count=sum(expected.values()))
    seen = Counter((d.topic, (d.key or b"").decode().split(":", 1)[1], d.reason) for d in letters)
    assert seen == +expected
    assert all(d.source_topic == d.topic.removesuffix(".dlq") for d in letters)
    assert len({d.group for d in letters if d.topic == dlq_topic(RUNS_TOPIC)}) == 2  # queue manager, dispatcher
    oversized = [d for d in letters if d.reason == "too_large"]
    assert oversized and all(d.value_bytes == MAX_DEAD_VALUE_BYTES and d.original_bytes and
                             d.original_bytes > d.value_bytes for d in oversized)
    skipped = {r.getMessage().split(":", 1)[0] for r in caplog.records if "skipping undecodable" in r.getMessage()}
    assert set(TABLE_ONLY) <= skipped

    assert_all_running(system)
    assert (await run_valid_job(system))["state"] == "succeeded"
    assert_all_running(system)

    # a restart reads the broken records of the compacted topics again and still comes up
    await system.stop("queue-manager")
    await system.start_queue_manager()
    assert (await run_valid_job(system, "after-restart"))["state"] == "succeeded"
    assert_all_running(system)
    letters_after = await read_dead_letters(system.settings, ALL_INPUTS, count=len(letters), settle_s=1.0)
    assert len(letters_after) == len(letters)  # committed past its dead letters: none is dead-lettered twice
