"""No token, token digest or Kafka password in the logs of a running system, at DEBUG, while tokens are
used (valid, unknown, malformed) and a client connects with SASL/SCRAM credentials."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from services.gateway.auth import token_digest
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.producer import EnvelopeProducer
from tests.e2e.builders import ADMIN_TOKEN, job_spec, member_token
from tests.e2e.system import System

pytestmark = pytest.mark.e2e

SASL_PASSWORD = "scram-secret-2b7e151628aed2a6"
WRONG_TOKEN = "e2e-member-token-team-c-guess"


def _secrets() -> list[str]:
    tokens = [ADMIN_TOKEN, member_token("team-a"), member_token("team-b"), WRONG_TOKEN]
    return [*tokens, *(token_digest(t) for t in tokens), SASL_PASSWORD]


def _leaks(caplog: pytest.LogCaptureFixture) -> list[str]:
    text = caplog.text + "".join(repr(r.args) + str(r.exc_info) for r in caplog.records)
    return [secret for secret in _secrets() if secret in text]


async def test_no_secret_in_debug_logs(system: System, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    http = system.api.http
    job_id = await system.api.submit(job_spec("logged", duration_s=0.3))
    assert (await system.api.wait_state(job_id, "succeeded", within=60))["state"] == "succeeded"
    await system.api.job(job_id, tenant=None)
    for headers in ({"Authorization": f"Bearer {WRONG_TOKEN}"}, {"Authorization": f"Basic {ADMIN_TOKEN}"},
                    {"Authorization": f"Bearer {member_token('team-b')}"}):
        assert (await http.get(f"/v1/jobs/{job_id}", headers=headers)).status_code in (401, 404)

    # a client with SCRAM credentials against a broker that does not speak SASL: it fails, and says nothing secret
    sasl = KafkaSettings(bootstrap=system.settings.bootstrap, security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism="SCRAM-SHA-512", sasl_username="muster", sasl_password=SASL_PASSWORD,
                         request_timeout_ms=3000)
    producer = EnvelopeProducer(sasl)
    with pytest.raises(Exception) as failed:
        async with asyncio.timeout(20):
            await producer.start()
    await producer.stop()
    assert SASL_PASSWORD not in str(failed.value)
    logging.getLogger("tests.security").debug("settings in use: %s / %r", sasl, sasl)

    assert len(caplog.records) > 50  # the run was really logged at DEBUG
    assert _leaks(caplog) == []


async def test_unauthenticated_answers_echo_no_token(system: System) -> None:
    async with httpx.AsyncClient(base_url=system.gateway_url or "", timeout=10) as http:
        r = await http.get("/v1/jobs", headers={"Authorization": f"Bearer {WRONG_TOKEN}"})
    assert r.status_code == 401 and WRONG_TOKEN not in r.text and token_digest(WRONG_TOKEN) not in r.text
