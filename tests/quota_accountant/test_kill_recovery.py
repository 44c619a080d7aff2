"""The Faust accountant killed (SIGKILL) mid-stream and restarted, compared figure by figure with an
accountant that was never killed and got the same inputs on a broker of its own.

Both run as processes (``tests.quota_accountant.accountant_process``) with the same frozen clock, so every
report is comparable. After the stream, the killed run's input topics are emptied (as retention would
after a week) and it is killed once more: what it reports after that restart comes from its changelog
tables alone, and must still match, running attempts included.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from schemas.envelope import Envelope, make_envelope
from schemas.topics import CONFIG_TOPIC, DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC
from schemas.usage import BudgetStatusReported, ChargebackRecorded, QueueUsageReported
from services.quota_accountant.stream import CONSUMER_GROUP
from services.runtime.broker import BOOTSTRAP_ENV, ResolvedBroker
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from tests.builders.broker import client_settings, registry_broker_at
from tests.integration.builders import consumer, eventually
from tests.quota_accountant.builders import (
    admitted,
    at,
    queue_defined,
    scaled,
    started,
    stopped,
    succeeded,
    tenant_defined,
)
from tests.quota_accountant.test_service_integration import UsageLog

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NOW = at(200_000).timestamp()  # the frozen clock of both accountants
INPUTS = (DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)
QUEUES = ("team-a", "team-b", "team-c", "team-d")
JOBS = 400


def workload(seed: int = 7) -> list[tuple[str, Envelope]]:
    """(topic, envelope) in publication order: admissions, starts, some scale changes, ends; one job in ten
    is still running at the end, one in ten is preempted."""
    rng = random.Random(seed)
    timed: list[tuple[float, int, str, Envelope]] = []
    for n in range(JOBS):
        job, queue = f"job-{n}", QUEUES[n % len(QUEUES)]
        tenant = "tenant-x" if n % 2 else "tenant-y"
        t0 = rng.uniform(0, 150_000)
        replicas = rng.choice([1, 2, 4])
        timed.append((t0, n, DECISIONS_TOPIC, admitted(job, queue=queue, tenant=tenant, replicas=replicas, when=t0)))
        timed.append((t0 + 30, n, RUNS_TOPIC, started(job, when=t0 + 30)))
        if n % 7 == 0:
            timed.append((t0 + 600, n, DECISIONS_TOPIC, scaled(job, 1, replicas + 1, t0 + 600)))
        if n % 10 == 3:
            continue  # still running
        end = t0 + rng.uniform(900, 40_000)
        if n % 10 == 5:
            timed.append((end, n, DISPATCHES_TOPIC, stopped(job, when=end)))
        else:
            timed.append((end, n, RUNS_TOPIC, succeeded(job, when=end)))
    timed.sort(key=lambda item: (item[0], item[1]))
    return [(topic, envelope) for _, _, topic, envelope in timed]


@pytest.fixture(scope="module")
def reference_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResolvedBroker]:
    """The never-killed accountant's broker: a second one, so both runs see the same input offsets."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"needs two brokers of its own; {BOOTSTRAP_ENV} names one external broker")
    with registry_broker_at(tmp_path_factory.mktemp("reference-kafka")) as broker:
        yield broker


def start(bootstrap: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.quota_accountant.accountant_process", bootstrap, repr(NOW)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def input_ends(settings: KafkaSettings) -> dict[TopicPartition, int]:
    reader = consumer(settings, *INPUTS)
    await reader.start()
    try:
        tps = [TopicPartition(t, p) for t in INPUTS for p in (reader.partitions_for_topic(t) or set())]
        ends: dict[TopicPartition, int] = await reader.end_offsets(tps)
        return ends
    finally:
        await reader.stop()


async def committed_all(settings: KafkaSettings) -> bool:
    """Has the accountant's group committed every input record (so every output was acknowledged)?"""
    ends = await input_ends(settings)
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(CONSUMER_GROUP)
    except KafkaError:  # the group coordinator is not there yet
        return False
    finally:
        await admin.close()
    return all(end == 0 or (tp in offsets and offsets[tp].offset >= end) for tp, end in ends.items())


async def wait_committed(settings: KafkaSettings, within: float = 180.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if await committed_all(settings):
                return
            await asyncio.sleep(0.5)


async def empty_inputs(settings: KafkaSettings) -> None:
    """Delete every input record, as retention would once they are older than a week."""
    ends = await input_ends(settings)
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        await admin.delete_records({tp: RecordsToDelete(end) for tp, end in ends.items() if end > 0})
    finally:
        await admin.close()


def figures(usage: UsageLog) -> tuple[dict[str, QueueUsageReported], dict[str, BudgetStatusReported],
                                      dict[str, ChargebackRecorded]]:
    """The latest report per queue and tenant, and every chargeback (duplicates must be identical)."""
    queues: dict[str, QueueUsageReported] = {}
    budgets: dict[str, BudgetStatusReported] = {}
    charges: dict[str, ChargebackRecorded] = {}
    for envelope in usage.envelopes:
        payload = envelope.payload
        if isinstance(payload, QueueUsageReported):
            queues[payload.queue] = payload
        elif isinstance(payload, BudgetStatusReported):
            budgets[payload.tenant] = payload
        elif isinstance(payload, ChargebackRecorded):
            key = payload.key()
            assert charges.get(key, payload) == payload, f"chargeback {key} published twice with other figures"
            charges[key] = payload
    return queues, budgets, charges


def assert_same_queue(got: QueueUsageReported, want: QueueUsageReported) -> None:
    assert got.model_dump(exclude={"decayed_gpu_seconds"}) == want.model_dump(exclude={"decayed_gpu_seconds"})
    # settlements fold into the decayed sum in arrival order, which differs between the runs
    assert got.decayed_gpu_seconds == pytest.approx(want.decayed_gpu_seconds, rel=1e-9)


def assert_same_budget(got: BudgetStatusReported, want: BudgetStatusReported) -> None:
    assert got.model_dump(exclude={"gpu_hours_used"}) == want.model_dump(exclude={"gpu_hours_used"})
    assert got.gpu_hours_used == pytest.approx(want.gpu_hours_used, rel=1e-9)


async def publish_all(settings: KafkaSettings, items: list[tuple[str, Envelope]]) -> None:
    async with EnvelopeProducer(settings) as producer:
        futures = [await producer.send(topic, envelope) for topic, envelope in items]
        await asyncio.gather(*futures)


async def test_killed_accountant_reports_what_a_never_killed_one_does(
    registry_broker: ResolvedBroker, reference_broker: ResolvedBroker, tmp_path: Path,
) -> None:
    killed = client_settings(registry_broker, "muster-test")
    stream = workload()
    config = [make_envelope(queue_defined(q, nominal=8, tenant="tenant-x"), "test") for q in QUEUES]
    config += [make_envelope(tenant_defined(t, budget=500.0), "test") for t in ("tenant-x", "tenant-y")]
    if True:
        reference = client_settings(reference_broker, "muster-test")
        for settings in (killed, reference):
            await publish_all(settings, [(CONFIG_TOPIC, e) for e in config])
        async with UsageLog(killed) as killed_usage, UsageLog(reference) as reference_usage:
            never_killed = start(reference.bootstrap, tmp_path / "reference.log")
            victim = start(killed.bootstrap, tmp_path / "killed.log")
            recoveries: list[float] = []
            try:
                chunks = [stream[i:i + 100] for i in range(0, len(stream), 100)]
                kill_at = {len(chunks) // 4, len(chunks) // 2, 3 * len(chunks) // 4}
                for n, chunk in enumerate(chunks):
                    # a chunk's records are folded one input topic at a time, decisions, then run reports, then
                    # dispatch reports: an attempt that settled before a scale change of it arrived from another
                    # topic is charged without it, and a stop read before its start ends the attempt as never
                    # started (arrival order across topics is not something the two runs share; under load it
                    # differed between them and so did their decayed usage)
                    for i, topic in enumerate(INPUTS):
                        if i:
                            await wait_committed(reference)
                            await wait_committed(killed)
                        for settings in (reference, killed):
                            await publish_all(settings, [(t, e) for t, e in chunk if t == topic])
                    await asyncio.sleep(0.3)  # the kill below lands while the last topic's records are folded
                    if n in kill_at:
                        victim.kill()  # SIGKILL: no commit, no flush, no leaving the group
                        victim.wait()
                        victim = start(killed.bootstrap, tmp_path / "killed.log")
                await wait_committed(reference)
                await wait_committed(killed)

                # the inputs expire; the last restart has only the changelogs to go on
                await empty_inputs(killed)
                victim.kill()
                victim.wait()
                seen = len(killed_usage.envelopes)
                began = time.monotonic()
                victim = start(killed.bootstrap, tmp_path / "killed.log")
                reports = len(QUEUES) + 2
                await eventually(lambda: len(killed_usage.envelopes) >= seen + reports, within=120)
                recoveries.append(time.monotonic() - began)
                await asyncio.sleep(1.0)
            finally:
                stop(victim)
                stop(never_killed)

        got_queues, got_budgets, got_charges = figures(killed_usage)
        want_queues, want_budgets, want_charges = figures(reference_usage)
    settled = sum(1 for n in range(JOBS) if n % 10 != 3)
    assert len(want_charges) == settled
    assert got_charges == want_charges
    assert set(got_queues) == set(want_queues) == set(QUEUES)
    for queue in QUEUES:
        assert_same_queue(got_queues[queue], want_queues[queue])
    # the attempts still running (their inputs deleted) hold their GPUs and keep accruing
    assert sum(sum(r.allocated.values()) for r in got_queues.values()) > 0
    assert set(got_budgets) == set(want_budgets) == {"tenant-x", "tenant-y"}
    for tenant in got_budgets:
        assert_same_budget(got_budgets[tenant], want_budgets[tenant])
    print(f"recovery after SIGKILL with emptied inputs: {recoveries[0]:.1f} s to the first reports")
