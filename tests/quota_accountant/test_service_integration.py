"""The accountant on the real broker: inputs on the real topics in, usage out, and a restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest

from schemas.codec import decode
from schemas.envelope import Envelope, Message, make_envelope
from schemas.topics import CONFIG_TOPIC, DECISIONS_TOPIC, RUNS_TOPIC, USAGE_TOPIC
from schemas.usage import BudgetStatusReported, ChargebackRecorded, QueueUsageReported
from services.core.fairshare import interval_value
from services.quota_accountant.accountant import Accountant, AccountantSettings
from services.quota_accountant.main import QuotaAccountantMain
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceRunner
from tests.builders.clock import FakeClock
from tests.integration.builders import consumer, eventually
from tests.quota_accountant.builders import admitted, at, queue_defined, started, succeeded, tenant_defined

pytestmark = pytest.mark.integration
HALF = 7 * 86400.0


class UsageLog:
    """Every envelope on ``muster.usage``, collected in the background."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._reader = consumer(settings, USAGE_TOPIC)
        self.envelopes: list[Envelope] = []
        self._task: asyncio.Task[None] | None = None

    async def _follow(self) -> None:
        while True:
            batch = await self._reader.getmany(timeout_ms=100)
            for records in batch.values():
                self.envelopes.extend(decode(r.value, topic=USAGE_TOPIC) for r in records)

    async def __aenter__(self) -> UsageLog:
        await self._reader.start()
        self._task = asyncio.create_task(self._follow())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._reader.stop()

    def of(self, kind: type[Message], key: str) -> list[Message]:
        return [e.payload for e in self.envelopes if isinstance(e.payload, kind) and e.payload.key() == key]

    def queue(self, name: str) -> list[QueueUsageReported]:
        return [m for m in self.of(QueueUsageReported, f"queue/{name}") if isinstance(m, QueueUsageReported)]

    def budget(self, tenant: str) -> list[BudgetStatusReported]:
        return [m for m in self.of(BudgetStatusReported, f"budget/{tenant}") if isinstance(m, BudgetStatusReported)]

    def charges(self, job: str) -> list[ChargebackRecorded]:
        found = [m for m in self.envelopes if isinstance(m.payload, ChargebackRecorded) and m.payload.job_id == job]
        return [e.payload for e in found if isinstance(e.payload, ChargebackRecorded)]


@asynccontextmanager
async def accountant(settings: KafkaSettings, clock: FakeClock) -> AsyncIterator[tuple[ServiceRunner, Accountant]]:
    options = ServeOptions(kafka=settings, http_port=0)
    main = QuotaAccountantMain(options, settings=AccountantSettings(publish_interval_s=3600), clock=clock.timestamp)
    service = main.accountant
    task = asyncio.create_task(main.run(handle_signals=False))
    try:
        ready = asyncio.ensure_future(service.ready.wait())
        done, _ = await asyncio.wait({ready, task}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            await asyncio.gather(ready, return_exceptions=True)
            if task in done:
                task.result()
            raise TimeoutError("accountant did not become ready")
        assert main.runner is not None
        yield main.runner, service
    finally:
        main.stop()
        await task


async def publish(settings: KafkaSettings, topic: str, *items: Envelope | Message) -> None:
    async with EnvelopeProducer(settings) as producer:
        for item in items:
            envelope = item if isinstance(item, Envelope) else make_envelope(item, "test")
            await producer.send_and_wait(topic, envelope)


async def test_admit_run_succeed_reports_allocation_charge_and_budget(registry_settings: KafkaSettings) -> None:
    await publish(registry_settings, CONFIG_TOPIC, queue_defined("team-a", nominal=16), tenant_defined("team-a", 10))
    clock = FakeClock(at(0))
    async with UsageLog(registry_settings) as usage, accountant(registry_settings, clock) as (runner, _):
        await eventually(lambda: any(r.allocated == {"gpu:a100": 0} for r in usage.queue("team-a")))

        await publish(registry_settings, DECISIONS_TOPIC, admitted("j-a", queue="team-a", tenant="team-a"))
        await eventually(lambda: any(r.allocated == {"gpu:a100": 32} for r in usage.queue("team-a")))
        assert usage.queue("team-a")[-1].borrowed == {"gpu:a100": 16}

        clock.set(at(60))
        await publish(registry_settings, RUNS_TOPIC, started("j-a", when=60))
        await eventually(lambda: len(usage.budget("team-a")) >= 3)
        assert not usage.budget("team-a")[-1].exhausted

        clock.set(at(1860))
        await publish(registry_settings, RUNS_TOPIC, succeeded("j-a", when=1860))
        await eventually(lambda: bool(usage.charges("j-a")))
        await eventually(lambda: usage.queue("team-a")[-1].allocated == {"gpu:a100": 0})
        await eventually(lambda: usage.budget("team-a")[-1].exhausted)

        (charge,) = usage.charges("j-a")
        assert charge.gpu_seconds == pytest.approx(32 * 1800)
        assert (charge.outcome, charge.gpus, charge.started_at, charge.ended_at) == ("succeeded", 32, at(60), at(1860))
        final = usage.queue("team-a")[-1]
        assert final.decayed_gpu_seconds == pytest.approx(
            interval_value(32, at(60).timestamp(), at(1860).timestamp(), at(1860).timestamp(), HALF))
        budget = usage.budget("team-a")[-1]
        assert budget.gpu_hours_used == pytest.approx(16.0) and budget.gpu_hour_budget == 10
        assert [b.exhausted for b in usage.budget("team-a")].count(False) >= 2

        async with aiohttp.ClientSession() as http, http.get(f"{runner.url}/metrics") as response:
            text = await response.text()
        assert 'muster_quota_accountant_gpu_seconds{queue="team-a"} 57600.0' in text
        assert 'muster_quota_accountant_budget_exhausted{tenant="team-a"} 1.0' in text
        assert "muster_quota_accountant_active_accruals 0.0" in text


async def test_restart_keeps_open_accruals_and_settled_usage(registry_settings: KafkaSettings) -> None:
    clock = FakeClock(at(1000))
    async with UsageLog(registry_settings) as usage:
        async with accountant(registry_settings, clock):
            await publish(registry_settings, DECISIONS_TOPIC, admitted("j-b", queue="team-b", tenant="team-b"))
            await publish(registry_settings, RUNS_TOPIC, started("j-b", when=100))
            await eventually(lambda: any(r.decayed_gpu_seconds > 0 for r in usage.queue("team-b")))
        before = usage.queue("team-b")[-1]
        expected = interval_value(32, at(100).timestamp(), at(1000).timestamp(), at(1000).timestamp(), HALF)
        assert before.decayed_gpu_seconds == pytest.approx(expected)
        assert before.allocated == {"gpu:a100": 32}
        seen = len(usage.queue("team-b"))

        async with accountant(registry_settings, clock):
            await eventually(lambda: len(usage.queue("team-b")) > seen)
            restarted = usage.queue("team-b")[-1]
            assert restarted.allocated == before.allocated
            assert restarted.decayed_gpu_seconds == pytest.approx(before.decayed_gpu_seconds)

            clock.set(at(2000))
            await publish(registry_settings, RUNS_TOPIC, succeeded("j-b", when=2000))
            await eventually(lambda: bool(usage.charges("j-b")))
            await eventually(lambda: usage.queue("team-b")[-1].allocated == {})
        settled = usage.queue("team-b")[-1]
        assert settled.decayed_gpu_seconds == pytest.approx(
            interval_value(32, at(100).timestamp(), at(2000).timestamp(), at(2000).timestamp(), HALF))
        seen = len(usage.queue("team-b"))
        budgets = len(usage.budget("team-b"))

        # a second restart restores the settled attempt from its chargeback and does not charge it again
        async with accountant(registry_settings, clock):
            await eventually(lambda: len(usage.queue("team-b")) > seen)
            again = usage.queue("team-b")[-1]
            assert again.decayed_gpu_seconds == pytest.approx(settled.decayed_gpu_seconds)
            assert again.allocated == {}
            await eventually(lambda: len(usage.budget("team-b")) > budgets)
            assert usage.budget("team-b")[-1].gpu_hours_used == pytest.approx(32 * 1900 / 3600)
        assert len(usage.charges("j-b")) == 1
        assert usage.charges("j-b")[0].gpu_seconds == pytest.approx(32 * 1900)


async def test_reports_are_refreshed_periodically_while_a_job_runs(registry_settings: KafkaSettings) -> None:
    clock = FakeClock(at(0))
    options = ServeOptions(kafka=registry_settings, http_port=0)
    main = QuotaAccountantMain(options, settings=AccountantSettings(publish_interval_s=0.2), clock=clock.timestamp)
    service = main.accountant
    async with UsageLog(registry_settings) as usage:
        task = asyncio.create_task(main.run(handle_signals=False))
        try:
            await asyncio.wait_for(service.ready.wait(), 60)
            await publish(registry_settings, DECISIONS_TOPIC, admitted("j-c", queue="team-c", tenant="team-c"))
            await publish(registry_settings, RUNS_TOPIC, started("j-c", when=0))
            await eventually(lambda: bool(usage.queue("team-c")))
            clock.set(at(3600))  # no input: only the periodic publication can report the new time
            await eventually(lambda: usage.queue("team-c")[-1].as_of == at(3600))
            latest = usage.queue("team-c")[-1]
            start, now = at(0).timestamp(), at(3600).timestamp()
            assert latest.decayed_gpu_seconds == pytest.approx(interval_value(32, start, now, now, HALF))
            assert service.ledger.active_accruals == 1
        finally:
            main.stop()
            await task
