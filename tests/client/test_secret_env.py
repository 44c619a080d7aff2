"""The client refuses plain values that look like secrets before anything leaves the machine: over HTTP
(``submit``) and straight onto the intents topic (``KafkaSubmitter``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from muster.client import AsyncClient, InvalidSpec, KafkaSubmitter, Unprocessable
from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from tests.gateway.builders import TOKENS, Harness, spec_json

SECRET_VALUE = "AKIA-not-really-but-secret"


def _with_env(env: dict[str, Any]) -> dict[str, Any]:
    body = spec_json()
    body["template"]["env"] = env
    return body


class Recording(httpx.AsyncBaseTransport):
    """The app's transport, keeping every request it was given."""

    def __init__(self, gw: Harness) -> None:
        self.inner = httpx.ASGITransport(app=gw.app)
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.inner.handle_async_request(request)


async def test_submit_refuses_before_sending(gw: Harness) -> None:
    transport = Recording(gw)
    async with AsyncClient("http://gateway", TOKENS["alice"], transport=transport) as client:
        with pytest.raises(InvalidSpec) as refused:
            await client.submit(_with_env({"AWS_SECRET_ACCESS_KEY": SECRET_VALUE}))
        assert refused.value.errors[0]["field"] == "spec.template.env.AWS_SECRET_ACCESS_KEY"
        assert "secret_ref" in str(refused.value.errors[0]["detail"]) and SECRET_VALUE not in str(refused.value)
        assert transport.requests == []
        ok = await client.submit(_with_env({"AWS_SECRET_ACCESS_KEY": {"secret_ref": {"name": "aws", "key": "secret"}},
                                            "SORT_KEY": {"value": "date", "not_secret": True}}))
    assert ok.state == "submitted"
    assert [type(m) for m in gw.publisher.on(INTENTS_TOPIC)] == [SubmitJob]


async def test_an_invalid_spec_is_still_the_gateway_s_to_list(alice: AsyncClient) -> None:
    """A spec that does not validate is sent as before: the gateway's 422 lists every field."""
    body = _with_env({"HF_TOKEN": "x"})
    body["replicas"] = 0
    with pytest.raises(Unprocessable) as refused:
        await alice.submit(body)
    assert refused.value.field == "spec.replicas"


def test_the_kafka_submitter_refuses_a_plain_secret() -> None:
    submitter = KafkaSubmitter(tenant="team-a", user="nightly-pipeline")
    with pytest.raises(InvalidSpec, match=r"spec\.template\.env\.HF_TOKEN") as refused:
        submitter.intent(_with_env({"HF_TOKEN": SECRET_VALUE, "LR": "0.1"}))
    assert SECRET_VALUE not in str(refused.value.errors)
    intent = submitter.intent(_with_env({"HF_TOKEN": {"secret_ref": {"name": "hf", "key": "token"}}}))
    assert intent.spec.template.secret_names() == ["hf"]
