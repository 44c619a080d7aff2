"""Tenant-managed queues: the tenant's quota sum check (pure, and through the API), also when changes come
faster than the gateway reads them back from the config topic."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from schemas.config import MusterConfig, QueueConfig, QueueDefined, ResourceQuotaConfig, TenantConfig
from schemas.topics import CONFIG_TOPIC
from services.gateway.auth import Principal
from services.gateway.configs import defined_message, file_items
from services.gateway.errors import ApiError
from services.gateway.tenant_queues import PENDING_FOR_S, PendingQueues, check_queue_change
from services.gateway.views import ConfigView
from tests.gateway.builders import Harness, auth, feed, harness, muster_config

TARA = Principal("team-a", "tara", "tenant-admin")


def _config(quota: dict[str, int] | None = None) -> MusterConfig:
    """team-a: the queue team-a (16 A100) and team-a-ops (none); its queues may take ``quota`` in all."""
    base = muster_config()
    return base.model_copy(update={"tenants": [
        TenantConfig(name="team-a", namespace="team-a",
                     queue_quota={"gpu:a100": 24, "cpu": 1000} if quota is None else quota),
        TenantConfig(name="team-b", namespace="team-b")]})


def _view(config: MusterConfig) -> ConfigView:
    view = ConfigView()
    for kind, item in file_items(config):
        feed(view, defined_message(kind, item))
    return view


def _queue(name: str, a100: int = 0, cpu: int = 0, **fields: Any) -> QueueConfig:
    quotas = {}
    if a100:
        quotas["gpu:a100"] = ResourceQuotaConfig(nominal=a100)
    if cpu:
        quotas["cpu"] = ResourceQuotaConfig(nominal=cpu)
    return QueueConfig(name=name, tenant="team-a", quotas=quotas, **fields)


# ---------------------------------------------------------------- the pure check


def test_a_new_queue_may_take_what_the_other_queues_leave() -> None:
    view = _view(_config())
    check_queue_change(TARA, "dev", _queue("dev", a100=8, cpu=1000), view, {})
    with pytest.raises(ApiError) as refused:
        check_queue_change(TARA, "dev", _queue("dev", a100=9), view, {})
    err = refused.value
    assert (err.status, err.error, err.field) == (422, "tenant_quota_exceeded", "item.quotas.gpu:a100.nominal")
    # the answer names the resource, the tenant's quota and what the other queues take
    assert "gpu:a100" in err.detail and "24" in err.detail and "take 16 (team-a 16)" in err.detail
    assert "at most 8 is left" in err.detail


def test_a_resource_the_tenant_has_no_quota_of_is_refused() -> None:
    view = _view(_config({}))
    check_queue_change(TARA, "dev", _queue("dev"), view, {})  # a queue without quota is fine
    with pytest.raises(ApiError) as refused:
        check_queue_change(TARA, "dev", _queue("dev", cpu=1), view, {})
    assert refused.value.error == "tenant_quota_exceeded" and "may give its queues 0 cpu" in refused.value.detail


def test_changing_a_queue_counts_its_new_quota_not_its_old_one() -> None:
    view = _view(_config())
    check_queue_change(TARA, "team-a", _queue("team-a", a100=24, cohort="research"), view, {})  # up to the quota
    with pytest.raises(ApiError):
        check_queue_change(TARA, "team-a", _queue("team-a", a100=25, cohort="research"), view, {})
    check_queue_change(TARA, "team-a", _queue("team-a", a100=2, cohort="research"), view, {})  # down


def test_lowering_is_allowed_even_over_a_quota_an_administrator_lowered() -> None:
    view = _view(_config({"gpu:a100": 4}))  # team-a already takes 16, more than 4
    check_queue_change(TARA, "team-a", _queue("team-a", a100=10, cohort="research"), view, {})  # lower: fine
    check_queue_change(TARA, "team-a", _queue("team-a", a100=16, cohort="research"), view, {})  # unchanged: fine
    with pytest.raises(ApiError):
        check_queue_change(TARA, "team-a", _queue("team-a", a100=17, cohort="research"), view, {})
    with pytest.raises(ApiError):  # another queue may not take anything while the total is over
        check_queue_change(TARA, "dev", _queue("dev", a100=1), view, {})


def test_unread_changes_count() -> None:
    view = _view(_config())
    pending: dict[str, QueueConfig | None] = {"dev": _queue("dev", a100=8)}
    with pytest.raises(ApiError):  # 16 + 8 taken: nothing left
        check_queue_change(TARA, "dev2", _queue("dev2", a100=1), view, pending)
    pending["team-a"] = None  # deleted: its 16 are free again
    check_queue_change(TARA, "dev2", _queue("dev2", a100=16), view, pending)


def test_pending_changes_go_once_the_view_shows_them_or_they_are_old() -> None:
    view = _view(_config())
    pending = PendingQueues()
    pending.published("dev", _queue("dev", a100=8), 100.0)
    pending.published("team-a-ops", None, 100.0)
    assert set(pending.current(view, 101.0)) == {"dev", "team-a-ops"}
    feed(view, QueueDefined(item=_queue("dev", a100=8)))
    assert set(pending.current(view, 101.0)) == {"team-a-ops"}
    assert pending.current(view, 100.0 + PENDING_FOR_S + 1) == {}


# ---------------------------------------------------------------- through the API


async def _put(client: httpx.AsyncClient, queue: QueueConfig, user: str = "tara") -> httpx.Response:
    return await client.put(f"/v1/config/queues/{queue.name}", json=queue.model_dump(mode="json"),
                            headers=auth(user))


def _client(gw: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway")


async def test_create_change_up_and_down_and_delete() -> None:
    gw = harness(_config())
    async with _client(gw) as client:
        assert (await _put(client, _queue("dev", a100=4))).status_code == 202
        assert (await _put(client, _queue("dev", a100=8))).status_code == 202  # up to the quota
        over = await _put(client, _queue("dev", a100=9))
        assert (over.status_code, over.json()["error"]) == (422, "tenant_quota_exceeded")
        assert (await _put(client, _queue("dev", a100=2))).status_code == 202  # down
        refused = await _put(client, _queue("dev2", a100=7))
        assert refused.status_code == 422 and "take 18 (dev 2, team-a 16)" in refused.json()["detail"]
        assert (await _put(client, _queue("dev2", a100=6))).status_code == 202
        assert (await client.delete("/v1/config/queues/dev", headers=auth("tara"))).status_code == 202
        assert (await _put(client, _queue("dev2", a100=8))).status_code == 202  # dev's share is free again
        # an administrator is not bound by the tenant's quota, and the tenant administrator sees it counted
        assert (await _put(client, _queue("big", a100=100), user="root")).status_code == 202
        assert (await _put(client, _queue("dev3", a100=1))).status_code == 422
    assert gw.ctx.config.queue("dev") is None
    assert gw.ctx.config.queue("dev2") == _queue("dev2", a100=8)


async def test_an_unchanged_queue_publishes_nothing() -> None:
    gw = harness(_config())
    async with _client(gw) as client:
        assert (await _put(client, _queue("dev", a100=4))).status_code == 202
        again = await _put(client, _queue("dev", a100=4))
    assert again.status_code == 200 and again.json()["changed"] is False
    assert len(gw.publisher.on(CONFIG_TOPIC)) == 1


async def test_changes_faster_than_the_config_topic_cannot_overcommit() -> None:
    """The gateway reads its own changes back late (here: never): queued changes are checked one at a time
    against the view and what this gateway published since."""
    gw = harness(_config())
    del gw.publisher.views[CONFIG_TOPIC]  # published changes do not reach the view
    async with _client(gw) as client:
        answers = await asyncio.gather(*(_put(client, _queue(f"dev{i}", a100=3)) for i in range(4)))
        assert sorted(a.status_code for a in answers) == [202, 202, 422, 422]  # 16 + 3 + 3 <= 24
        deleted = await client.delete("/v1/config/queues/team-a-ops", headers=auth("tara"))
        assert deleted.status_code == 202
        # dev0..3 that were accepted are counted although the view does not show them
        assert (await _put(client, _queue("dev9", a100=3))).status_code == 422
    assert len(gw.publisher.on(CONFIG_TOPIC)) == 3


async def test_deleting_another_tenants_or_a_busy_queue() -> None:
    gw = harness(_config())
    async with _client(gw) as client:
        other = await client.delete("/v1/config/queues/team-b", headers=auth("tara"))
        missing = await client.delete("/v1/config/queues/nowhere", headers=auth("tara"))
    assert (other.status_code, other.json()["error"]) == (403, "other_tenant")
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    assert gw.publisher.sent == []
