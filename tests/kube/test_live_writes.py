"""Idempotent writes against a live API server: AlreadyExists, NotFound, Conflict, and 5xx retries."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from services.runtime.kube import (
    LEASES,
    ApiEventSource,
    Backoff,
    Informer,
    KubeObject,
    KubeRest,
    RetryPolicy,
    UpdateConflictError,
    create_or_get,
    delete,
    update,
)
from services.runtime.kube.resources import Resource
from tests.kube.builders import lease
from tests.kube.conftest import KubeTarget


def name() -> str:
    return f"w-{uuid.uuid4().hex[:8]}"


class InterferingRest(KubeRest):
    """Another writer changes the object right after each of the first ``times`` reads."""

    def __init__(self, base: KubeRest, times: int) -> None:
        super().__init__(base.api, base.retry, base.request_timeout)
        self.times = times
        self.reads = 0

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> KubeObject:
        obj = await super().get(resource, name, namespace)
        self.reads += 1
        if self.reads <= self.times:
            await self.patch(resource, name, {"metadata": {"labels": {f"other-{self.reads}": "x"}}}, namespace)
        return obj


async def test_create_twice_returns_the_existing_object(target: KubeTarget) -> None:
    n, ns = name(), target.namespace
    first, created = await create_or_get(target.rest, LEASES, lease(n, ns, {}))
    second, created_again = await create_or_get(target.rest, LEASES, lease(n, ns, {}, holder="other"))
    assert created and not created_again
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert second["spec"]["holderIdentity"] == "a"


async def test_delete_twice_is_success(target: KubeTarget) -> None:
    n, ns = name(), target.namespace
    await create_or_get(target.rest, LEASES, lease(n, ns, {}))
    assert await delete(target.rest, LEASES, n, ns) is True
    assert await delete(target.rest, LEASES, n, ns) is False
    with pytest.raises(ApiException) as info:
        await target.rest.get(LEASES, n, ns)
    assert info.value.status == 404


async def test_update_retries_on_conflict_with_fresh_state(target: KubeTarget) -> None:
    n, ns = name(), target.namespace
    await create_or_get(target.rest, LEASES, lease(n, ns, {}))
    rest = InterferingRest(target.rest, times=2)
    calls: list[dict[str, str]] = []

    def mutate(obj: KubeObject) -> None:
        calls.append(dict(obj["metadata"].get("labels") or {}))
        obj["spec"]["holderIdentity"] = "winner"

    result = await update(rest, LEASES, n, mutate, ns)
    assert len(calls) == 3  # two conflicts, then success on the third fresh read
    assert calls[1] == {"other-1": "x"} and calls[2] == {"other-1": "x", "other-2": "x"}
    assert result["spec"]["holderIdentity"] == "winner"
    assert result["metadata"]["labels"] == {"other-1": "x", "other-2": "x"}  # the other writes survive


async def test_update_gives_up_after_bounded_conflicts(target: KubeTarget) -> None:
    n, ns = name(), target.namespace
    await create_or_get(target.rest, LEASES, lease(n, ns, {}))
    rest = InterferingRest(target.rest, times=100)

    def mutate(obj: KubeObject) -> None:
        obj["spec"]["holderIdentity"] = "never"

    with pytest.raises(UpdateConflictError):
        await update(rest, LEASES, n, mutate, ns, attempts=3)
    assert rest.reads == 3


async def test_update_without_change_writes_nothing(target: KubeTarget) -> None:
    n, ns = name(), target.namespace
    created, _ = await create_or_get(target.rest, LEASES, lease(n, ns, {}))
    result = await update(target.rest, LEASES, n, lambda obj: None, ns)
    assert result["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_server_errors_for_a_while_are_retried(target: KubeTarget) -> None:
    sim = target.require_sim()
    n, ns = name(), target.namespace
    patient = KubeRest(target.rest.api, RetryPolicy(attempts=30, backoff=Backoff(initial=0.05, maximum=0.2)))
    async with Informer(ApiEventSource(patient, LEASES, ns), backoff=Backoff(initial=0.05, maximum=0.2)) as inf:
        async with asyncio.timeout(15):
            await inf.wait_synced()
        sim.fail_api(status=500, seconds=1.0)
        sim.drop_watches()  # the informer must watch again while the server fails
        started = time.monotonic()
        created, was_created = await create_or_get(patient, LEASES, lease(n, ns, {}))
        assert time.monotonic() - started >= 0.5  # it really had to wait the failures out
        assert was_created
        async with asyncio.timeout(15):
            await inf.wait_for(lambda objs: any(o["metadata"]["name"] == n for o in objs))
        assert inf.lists == 1 and inf.watches >= 2  # resumed from its resourceVersion, no re-list
    impatient = KubeRest(target.rest.api, RetryPolicy(attempts=2, backoff=Backoff(initial=0.01)))
    sim.fail_api(status=500, seconds=1.0)
    with pytest.raises(ApiException) as info:
        await impatient.get(LEASES, n, ns)
    assert info.value.status == 500
    await asyncio.sleep(1.1)
    got: Any = await impatient.get(LEASES, n, ns)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
