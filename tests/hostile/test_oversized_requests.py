"""Requests that are valid but larger than a message on the wire may be: the gateway answers 413 before
publishing (instead of a broker error and a 503 that a retry could never cure)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from services.gateway.context import MAX_ENVELOPE_BYTES
from tests.gateway.builders import Harness, auth, spec_json

VALUE_BYTES = 32768  # the largest env value a spec may carry


def _spec_with_env(count: int, *, schedule: str | None = None) -> dict[str, Any]:
    body = spec_json()
    body["template"]["env"] = {f"BLOB_{i}": "x" * VALUE_BYTES for i in range(count)}
    if schedule is not None:
        body["schedule"] = schedule
    return body


async def test_a_submission_too_large_for_the_wire_is_413(client: httpx.AsyncClient, gw: Harness) -> None:
    body = _spec_with_env(40)  # about 1.3 MB, each part within the schema's limits
    assert len(orjson.dumps(body)) > MAX_ENVELOPE_BYTES
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (413, "too_large")
    assert gw.publisher.sent == []
    assert (await client.post("/v1/jobs", json=_spec_with_env(30), headers=auth("alice"))).status_code == 202


async def test_a_recurring_definition_too_large_for_the_wire_is_413(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.post("/v1/jobs", json=_spec_with_env(40, schedule="0 2 * * *"), headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (413, "too_large")
    assert gw.publisher.sent == []
