"""Watches (history replay, selectors, bookmarks, 410 Gone) and the fault injection endpoints."""

from __future__ import annotations

import asyncio

import aiohttp

from services.kubesim import KubeSim
from tests.kubesim.builders import Api, eventually, pod

PODS = "/api/v1/namespaces/team-a/pods"
HOLD = [{"name": "hold"}]


async def test_watch_replays_history_and_streams_changes(api: Api) -> None:
    _, listed = await api.get(PODS)
    rv = listed["metadata"]["resourceVersion"]
    await api.post(PODS, pod("w1", schedulingGates=HOLD))
    await api.patch(f"{PODS}/w1", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    await api.delete(f"{PODS}/w1")
    events = await api.watch(PODS, 20, resourceVersion=rv, timeoutSeconds="1")
    types = [e["type"] for e in events]
    assert "MODIFIED" in types
    assert types[0] == "ADDED" and types[-1] == "DELETED" and set(types) <= {"ADDED", "MODIFIED", "DELETED"}
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_watch_live_events_with_label_selector(api: Api, sim: KubeSim) -> None:
    _, listed = await api.get(PODS)
    task = asyncio.create_task(api.watch(PODS, 50, resourceVersion=listed["metadata"]["resourceVersion"],
                                         labelSelector="app=web", timeoutSeconds="1"))
    await eventually(lambda: sim.store.watch_count == 1, what="the watch open")  # the changes come live
    await api.post(PODS, pod("other", schedulingGates=HOLD))
    await api.post(PODS, pod("web", labels={"app": "web"}, schedulingGates=HOLD))
    await api.patch(f"{PODS}/other", {"metadata": {"labels": {"app": "web"}}}, "application/merge-patch+json")
    await api.patch(f"{PODS}/web", {"metadata": {"labels": {"app": "db"}}}, "application/merge-patch+json")
    events = await task
    assert all(e["object"]["metadata"]["labels"].get("app") == "web" for e in events[:-1])
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "MODIFIED"] == [
        ("ADDED", "web"), ("ADDED", "other"), ("DELETED", "web")
    ]


async def test_watch_without_resource_version_starts_with_current_objects(api: Api) -> None:
    await api.post(PODS, pod("existing", schedulingGates=HOLD))
    events = await api.watch(PODS, 1)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "existing"


async def test_bookmarks_and_timeout(api: Api, sim: KubeSim) -> None:
    _, listed = await api.get(PODS)
    events = await api.watch(PODS, 2, resourceVersion=listed["metadata"]["resourceVersion"],
                             allowWatchBookmarks="true")
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[0]["object"]["kind"] == "Pod"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) == sim.store.resource_version
    loop = asyncio.get_running_loop()
    start = loop.time()
    ended = await api.watch(PODS, 10, resourceVersion=listed["metadata"]["resourceVersion"], timeoutSeconds="1")
    assert ended == [] and 0.9 <= loop.time() - start < 3


async def test_compact_makes_old_watches_gone(api: Api, sim: KubeSim) -> None:
    _, listed = await api.get(PODS)
    old_rv = listed["metadata"]["resourceVersion"]
    await api.post(PODS, pod("p", schedulingGates=HOLD))
    sim.compact()
    events = await api.watch(PODS, 1, resourceVersion=old_rv)
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    fresh = str(sim.store.resource_version)
    task = asyncio.create_task(api.watch(PODS, 1, resourceVersion=fresh))
    await eventually(lambda: sim.store.watch_count == 1, what="the watch open")
    await api.post(PODS, pod("q", schedulingGates=HOLD))
    assert (await task)[0]["object"]["metadata"]["name"] == "q"


async def test_history_bound_expires_old_resource_versions() -> None:
    from tests.kubesim.builders import CLUSTER_FILE

    sim = KubeSim.from_cluster_file(CLUSTER_FILE, history_limit=5)
    async with sim.serve() as url, aiohttp.ClientSession() as session:
        api = Api(session, url)
        for i in range(6):
            await api.post(PODS, pod(f"p{i}", schedulingGates=HOLD))
        events = await api.watch(PODS, 1, resourceVersion="2")
        assert events[0]["object"]["code"] == 410


async def test_drop_watches_ends_streams(api: Api, sim: KubeSim) -> None:
    _, listed = await api.get(PODS)
    tasks = [asyncio.create_task(api.watch(PODS, 5, resourceVersion=listed["metadata"]["resourceVersion"]))
             for _ in range(3)]
    await eventually(lambda: sim.store.watch_count == 3, what="three watches open")
    status, body = await api.post("/kubesim/watches/drop", {})
    assert status == 200 and body["dropped"] == 3
    results = await asyncio.wait_for(asyncio.gather(*tasks), 3)
    assert results == [[], [], []]
    assert sim.store.watch_count == 0


async def test_api_failure_injection(api: Api, sim: KubeSim) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    sim.fail_api(503, 0.3)
    status, body = await api.get(PODS)
    assert (status, body["code"]) == (503, 503)
    assert (await api.get("/kubesim/state"))[0] == 200
    await eventually(lambda: answers(api, PODS, 200), what="the API answering again")
    assert loop.time() - start >= 0.3  # not before the failure's time was up
    start = loop.time()
    status, _ = await api.post("/kubesim/api-failure", {"status": 500, "seconds": 0.2})
    assert status == 200
    assert (await api.get("/api/v1/nodes"))[0] == 500
    await eventually(lambda: answers(api, "/api/v1/nodes", 200), what="the API answering again")
    assert loop.time() - start >= 0.2


async def answers(api: Api, path: str, status: int) -> bool:
    return (await api.get(path))[0] == status


async def test_admin_compact_and_state(api: Api, sim: KubeSim) -> None:
    status, state = await api.get("/kubesim/state")
    assert status == 200 and state["nodes"] == 6 and state["cluster"] == "east"
    status, body = await api.post("/kubesim/compact", {})
    assert status == 200 and body["resourceVersion"] == sim.store.resource_version
    events = await api.watch(PODS, 1, resourceVersion="1")
    assert events[0]["type"] == "ERROR"
