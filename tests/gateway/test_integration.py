"""The gateway on the real broker: config seeding, submissions onto the intents topic, the status view."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from schemas.codec import decode
from schemas.config import CohortDefined, PriorityClassDefined, QueueDefined, TenantDefined
from schemas.envelope import make_envelope
from schemas.intents import SubmitJob
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC, STATUS_TOPIC
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.options import ServeOptions
from tests.gateway.builders import TOKENS, auth, client_of, running_gateway, spec_json, status_changed
from tests.integration.builders import eventually, read_all

pytestmark = pytest.mark.integration

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "config" / "team-c.yaml"


async def config_messages(settings: KafkaSettings) -> list[object]:
    return [decode(r.value, topic=CONFIG_TOPIC).payload for r in await read_all(settings, CONFIG_TOPIC)]


async def test_gateway_end_to_end_on_kafka(gateway_options: ServeOptions) -> None:
    options = gateway_options
    async with running_gateway(options) as server, client_of(server) as client:
        # seeding: every item of the file is on the config topic, and the gateway reads it back
        seeded = await config_messages(options.kafka)
        assert sum(isinstance(m, QueueDefined) for m in seeded) == 3
        assert sum(isinstance(m, CohortDefined) for m in seeded) == 1
        assert sum(isinstance(m, PriorityClassDefined) for m in seeded) == 2
        assert sum(isinstance(m, TenantDefined) for m in seeded) == 2
        queues = (await client.get("/v1/queues", headers=auth("alice"))).json()["items"]
        assert [q["name"] for q in queues] == ["team-a", "team-a-ops"]

        # a submission lands on the intents topic as a valid SubmitJob
        r = await client.post("/v1/jobs", json=spec_json(), headers={**auth("alice"), "Idempotency-Key": "it-1"})
        assert r.status_code == 202
        job_id = r.json()["job_id"]
        intents = [decode(rec.value, topic=INTENTS_TOPIC) for rec in await read_all(options.kafka, INTENTS_TOPIC)]
        [submitted] = [e.payload for e in intents if isinstance(e.payload, SubmitJob)]
        assert submitted.job_id == job_id and submitted.tenant == "team-a" and submitted.idempotency_key == "it-1"
        assert (await client.get(f"/v1/jobs/{job_id}", headers=auth("alice"))).json()["state"] == "submitted"

        # the queue manager's status becomes visible through the API
        async with EnvelopeProducer(options.kafka) as producer:
            status = status_changed(job_id, state="pending", position=0, reason="QuotaExhausted")
            await producer.send_and_wait(STATUS_TOPIC, make_envelope(status, "queue_manager"))
        context = server.context
        assert context is not None
        await eventually(lambda: job_id in context.status, within=20)
        job = (await client.get(f"/v1/jobs/{job_id}", headers=auth("alice"))).json()
        assert (job["state"], job["reason"], job["position"]) == ("pending", "QuotaExhausted", 0)

        # an admin's configuration change goes onto the config topic and comes back into the view
        body = {"name": "team-z", "tenant": "team-a"}
        assert (await client.put("/v1/config/queues/team-z", json=body, headers=auth("root"))).status_code == 202
        await eventually(lambda: context.config.queue("team-z") is not None, within=20)
        metrics = (await client.get("/metrics")).text
        assert "muster_gateway_status_view_jobs 1.0" in metrics

    # a restart re-reads the status view and seeds nothing new
    before = len(await config_messages(options.kafka))
    async with running_gateway(replace(options)) as server, client_of(server) as client:
        job = (await client.get(f"/v1/jobs/{job_id}", headers=auth("alice"))).json()
        assert job["state"] == "pending"
        again = await client.post("/v1/jobs", json=spec_json(), headers={**auth("alice"), "Idempotency-Key": "it-1"})
        assert (again.status_code, again.json()["job_id"]) == (200, job_id)
    assert len(await config_messages(options.kafka)) == before


async def test_apply_on_kafka_sends_a_cohort_before_the_queue_that_names_it(gateway_options: ServeOptions) -> None:
    """The gateway checks a queue's cohort against the configuration it has read back from the config topic:
    ``muster apply`` waits for the new cohort to show there before it sends the queue."""
    from click.testing import CliRunner

    from services.cli.configure import apply, delete

    example, options = EXAMPLE_CONFIG, gateway_options
    assert options.config_file is not None

    def write(text: str, n: int) -> Path:
        path = options.config_file.parent / f"fresh-{n}.yaml"  # type: ignore[union-attr]
        path.write_text(text, encoding="utf-8")
        return path

    async with running_gateway(options) as server:
        env = {"MUSTER_URL": server.url or "", "MUSTER_TOKEN": TOKENS["root"], "MUSTER_CLI_CONFIG": ""}

        def cli(command: object, args: list[str]) -> tuple[int, str]:
            result = CliRunner().invoke(command, args, env=env)  # type: ignore[arg-type]
            return result.exit_code, result.output

        code, out = await asyncio.to_thread(cli, apply, ["-f", str(example)])
        assert code == 0, out
        assert out.splitlines()[-1] == "queue/team-c created"
        code, out = await asyncio.to_thread(cli, apply, ["-f", str(example)])
        assert code == 0 and out.count("unchanged") == 4, out
        code, out = await asyncio.to_thread(cli, delete, ["queue", "team-c"])
        assert (code, out.strip()) == (0, "queue/team-c deleted")
        # a queue right after the new cohort it names (nothing else in between to give the gateway time)
        for n in range(3):
            text = f"kind: Cohort\nname: fresh-{n}\n---\nkind: Queue\nname: q-{n}\ncohort: fresh-{n}\n"
            code, out = await asyncio.to_thread(cli, apply, ["-f", str(write(text, n))])
            assert code == 0 and out.splitlines() == [f"cohort/fresh-{n} created", f"queue/q-{n} created"], out
        await eventually(lambda: server.context is not None and server.context.config.queue("team-c") is None,
                         within=20)
