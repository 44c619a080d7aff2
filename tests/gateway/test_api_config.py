"""Queues (quotas + usage) and configuration changes through the API; seeding from a cluster file."""

from __future__ import annotations

from pathlib import Path

import httpx

from schemas.config import CohortDefined, ConfigItemDeleted, QueueDefined, RecurringJobDefined, TenantDefined
from schemas.topics import CONFIG_TOPIC
from schemas.usage import QueueUsageReported
from services.gateway.main import seed_config
from services.runtime.options import ServeOptions
from tests.gateway.builders import T0, Harness, auth, feed, muster_config, recurring_job, status_changed


async def test_queue_view_joins_quota_usage_and_job_counts(client: httpx.AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.usage, QueueUsageReported(queue="team-a", cohort="research", as_of=T0, allocated={"gpu:a100": 12},
                                          nominal={"gpu:a100": 16}, borrowed={}, decayed_gpu_seconds=3600.0,
                                          half_life_s=86400))
    feed(gw.ctx.status, status_changed("r1", state="running", gpus=8))
    feed(gw.ctx.status, status_changed("r2", state="admitted", gpus=4))
    feed(gw.ctx.status, status_changed("p1", state="pending", gpus=16))
    q = (await client.get("/v1/queues/team-a", headers=auth("alice"))).json()
    assert q["quotas"]["gpu:a100"] == {"nominal": 16, "borrowing_limit": 8, "lending_limit": None}
    assert q["usage"]["allocated"] == {"gpu:a100": 12} and q["usage"]["decayed_gpu_seconds"] == 3600.0
    assert q["jobs"] == {"admitted": 1, "pending": 1, "running": 1}
    assert (q["gpus_running"], q["gpus_pending"]) == (12, 16)


async def test_admin_defines_a_queue_and_it_is_published_once(client: httpx.AsyncClient, gw: Harness) -> None:
    body = {"name": "team-c", "tenant": "team-c", "cohort": "research",
            "quotas": {"gpu:t4": {"nominal": 4}}}
    first = await client.put("/v1/config/queues/team-c", json=body, headers=auth("root"))
    assert first.status_code == 202 and first.json()["changed"] is True
    again = await client.put("/v1/config/queues/team-c", json=body, headers=auth("root"))
    assert again.status_code == 200 and again.json() == {"kind": "queue", "name": "team-c", "changed": False,
                                                         "event_id": ""}
    [published] = gw.publisher.on(CONFIG_TOPIC)
    assert isinstance(published, QueueDefined) and published.item.quotas["gpu:t4"].nominal == 4
    assert published.key() == "queue/team-c"
    listed = (await client.get("/v1/config", headers=auth("root"))).json()
    assert "team-c" in [q["name"] for q in listed["queues"]]


async def test_config_changes_are_checked(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.put("/v1/config/queues/team-c", json={"name": "other"}, headers=auth("root"))
    assert (r.status_code, r.json()["field"]) == (422, "item.name")
    r = await client.put("/v1/config/queues/team-c", json={"name": "team-c", "cohort": "ghost"},
                         headers=auth("root"))
    assert (r.status_code, r.json()["field"]) == (422, "item.cohort")
    r = await client.put("/v1/config/queues/team-c", json={"name": "team-c", "weight": -1}, headers=auth("root"))
    assert (r.status_code, r.json()["field"]) == (422, "item.weight")
    r = await client.put("/v1/config/cohorts/c1", json={"name": "c1", "parent": "c1"}, headers=auth("root"))
    assert (r.status_code, r.json()["field"]) == (422, "item.parent")
    assert gw.publisher.on(CONFIG_TOPIC) == []


async def test_deletions_refuse_items_in_use_and_unknown_ones(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.delete("/v1/config/cohorts/research", headers=auth("root"))
    assert (r.status_code, r.json()["error"]) == (409, "in_use")
    assert "queue/team-a" in r.json()["detail"]
    assert (await client.delete("/v1/config/queues/ghost", headers=auth("root"))).status_code == 404
    assert (await client.delete("/v1/config/widgets/x", headers=auth("root"))).status_code == 422
    r = await client.delete("/v1/config/queues/team-a-ops", headers=auth("root"))
    assert r.status_code == 202
    assert gw.publisher.on(CONFIG_TOPIC) == [ConfigItemDeleted(kind="queue", name="team-a-ops")]
    assert gw.ctx.config.queue("team-a-ops") is None


async def test_seeding_publishes_only_items_that_differ(gw: Harness, tmp_path: Path) -> None:
    import yaml

    cfg = muster_config()
    changed = cfg.model_copy(update={
        "tenants": [cfg.tenants[0], cfg.tenants[1].model_copy(update={"gpu_hour_budget": 100.0})],
        "cohorts": [*cfg.cohorts, cfg.cohorts[0].model_copy(update={"name": "prod"})],
    })
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(changed.model_dump(mode="json")), encoding="utf-8")
    published = await seed_config(gw.ctx, ServeOptions(config_file=path))
    sent = gw.publisher.on(CONFIG_TOPIC)
    assert published == 2 == len(sent)
    assert {type(m) for m in sent} == {TenantDefined, CohortDefined}
    assert await seed_config(gw.ctx, ServeOptions(config_file=path)) == 0


async def test_deleting_a_queue_or_class_with_unfinished_jobs_is_refused(client: httpx.AsyncClient,
                                                                          gw: Harness) -> None:
    """Their jobs would be orphaned: no queue to hold their quota, no priority to order them."""
    feed(gw.ctx.status, status_changed("p1", queue="team-a-ops", state="pending"))
    feed(gw.ctx.status, status_changed("s1", queue="team-a-ops", state="suspended"))
    r = await client.delete("/v1/config/queues/team-a-ops", headers=auth("root"))
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (409, "has_unfinished_jobs", "name")
    assert "1 pending, 1 suspended: p1, s1" in r.json()["detail"]
    r = await client.delete("/v1/config/priority-classes/normal", headers=auth("root"))
    assert (r.status_code, r.json()["error"]) == (409, "has_unfinished_jobs")
    assert (await client.delete("/v1/config/priority-classes/high", headers=auth("root"))).status_code == 202
    feed(gw.ctx.status, status_changed("p1", queue="team-a-ops", state="cancelled"))
    feed(gw.ctx.status, status_changed("s1", queue="team-a-ops", state="failed"))
    assert (await client.delete("/v1/config/queues/team-a-ops", headers=auth("root"))).status_code == 202
    assert gw.publisher.on(CONFIG_TOPIC) == [ConfigItemDeleted(kind="priority-class", name="high"),
                                             ConfigItemDeleted(kind="queue", name="team-a-ops")]


async def test_a_queue_that_recurring_jobs_fire_into_is_in_use(client: httpx.AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.config, RecurringJobDefined(item=recurring_job("nightly", queue="team-a-ops")))
    r = await client.delete("/v1/config/queues/team-a-ops", headers=auth("root"))
    assert (r.status_code, r.json()["error"]) == (409, "in_use")
    assert "recurring-job/team-a.nightly" in r.json()["detail"]


async def test_members_may_not_change_or_delete_configuration(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.put("/v1/config/cohorts/mine", json={"name": "mine"}, headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (403, "admin_required")
    r = await client.delete("/v1/config/queues/team-a-ops", headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (403, "admin_required")
    assert gw.publisher.on(CONFIG_TOPIC) == []
