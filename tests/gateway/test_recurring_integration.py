"""Recurring jobs on the real broker: two gateway replicas on one injected clock fire the same job ids."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from schemas.codec import decode
from schemas.config import RecurringJobDefined
from schemas.intents import SubmitJob
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from services.gateway.cron import RECURRING_LABEL, firing_job_id
from services.runtime.kafka import KafkaSettings
from services.runtime.options import ServeOptions
from tests.builders.clock import T0, FakeClock
from tests.gateway.builders import auth, client_of, running_gateway, spec_json
from tests.integration.builders import eventually, read_all

pytestmark = pytest.mark.integration

NAME = "team-a.every-minute"


async def fired_ids(settings: KafkaSettings) -> Counter[str]:
    envelopes = [decode(r.value, topic=INTENTS_TOPIC) for r in await read_all(settings, INTENTS_TOPIC)]
    submissions = [e.payload for e in envelopes if isinstance(e.payload, SubmitJob)]
    ours = [s for s in submissions if s.spec.labels.get(RECURRING_LABEL) == NAME]
    assert all(s.spec.schedule is None and s.tenant == "team-a" and s.user == "alice" for s in ours)
    assert all(s.job_id == firing_job_id(NAME, "every-minute", s.submitted_at) for s in ours)
    return Counter(s.job_id for s in ours)


async def test_two_replicas_fire_every_minute_with_the_same_ids(gateway_options: ServeOptions) -> None:
    options = gateway_options
    clock = FakeClock(T0 + timedelta(seconds=10))
    async with running_gateway(options, clock) as a, running_gateway(options, clock) as b:
        replicas = (a, b)
        async with client_of(a) as client:
            r = await client.post("/v1/jobs", json=spec_json("every-minute", schedule="* * * * *"),
                                  headers=auth("alice"))
        assert (r.status_code, r.json()["name"]) == (201, NAME)
        await eventually(lambda: all(s.context is not None and s.context.config.recurring(NAME) is not None
                                     for s in replicas), within=20)

        expected: list[str] = []
        for step in (timedelta(seconds=55), timedelta(minutes=1), timedelta(minutes=10)):
            now = clock.advance(seconds=step.total_seconds())  # 12:01:05, 12:02:05, then 12:12:05 (no backlog)
            firing = now.replace(second=0)
            expected.append(firing_job_id(NAME, "every-minute", firing))
            for server in replicas:
                assert server.firing is not None
                server.firing.wake()
            await eventually(lambda: all(s.context is not None and s.context.recent.get(expected[-1]) is not None
                                         for s in replicas), within=20)

    fired = await fired_ids(options.kafka)
    assert fired == Counter({job_id: 2 for job_id in expected})  # each replica once, under the same id
    config = [decode(r.value, topic=CONFIG_TOPIC).payload for r in await read_all(options.kafka, CONFIG_TOPIC)]
    assert [m.item.name for m in config if isinstance(m, RecurringJobDefined)] == [NAME]
