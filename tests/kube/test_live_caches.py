"""List-then-watch caches against a live API server (kubesim, or the real cluster when KUBECONFIG is set)."""

from __future__ import annotations

import asyncio
import uuid

from services.runtime.kube import (
    ADDED,
    DELETED,
    LEASES,
    MODIFIED,
    NODES,
    ApiEventSource,
    Backoff,
    Informer,
    KubeObject,
    PatchType,
    Subscription,
    create_or_get,
    delete,
    patch,
)
from tests.kube.builders import GatedSource, eventually, lease
from tests.kube.conftest import KubeTarget

FAST = Backoff(initial=0.05, maximum=0.5)
WAIT = 15.0


def holder(inf: Informer, namespace: str, name: str) -> str | None:
    obj = inf.get(name, namespace)
    return None if obj is None else str(obj["spec"]["holderIdentity"])


def selector() -> tuple[dict[str, str], str]:
    run = uuid.uuid4().hex[:8]
    return {"muster.dev/test-run": run}, f"muster.dev/test-run={run}"


def lease_informer(target: KubeTarget, label_selector: str) -> tuple[Informer, GatedSource]:
    source = GatedSource(ApiEventSource(target.rest, LEASES, target.namespace, label_selector=label_selector,
                                        watch_timeout_seconds=30))
    return Informer(source, backoff=FAST), source


def history(events: list[tuple[str, KubeObject]]) -> list[tuple[str, str, str]]:
    return [(t, o["metadata"]["name"], o["metadata"]["resourceVersion"]) for t, o in events]


def drain(sub: Subscription) -> list[tuple[str, KubeObject]]:
    out = []
    while not sub._queue.empty():
        item = sub._queue.get_nowait()
        out.append(item)
    return out


def assert_consistent(events: list[tuple[str, KubeObject]], final: dict[str, str]) -> None:
    """Replaying the stream gives the final state; no (object, version) is delivered twice."""
    seen = [(o["metadata"]["name"], o["metadata"]["resourceVersion"], t) for t, o in events]
    assert len({(n, rv) for n, rv, t in seen if t != DELETED}) == len([s for s in seen if s[2] != DELETED])
    state: dict[str, str] = {}
    for kind, obj in events:
        name = obj["metadata"]["name"]
        if kind == ADDED:
            assert name not in state, f"{name} added twice"
            state[name] = obj["spec"]["holderIdentity"]
        elif kind == MODIFIED:
            assert name in state, f"{name} modified before added"
            state[name] = obj["spec"]["holderIdentity"]
        else:
            assert state.pop(name, None) is not None, f"{name} deleted twice or never added"
    assert state == final


async def test_cache_lists_then_watches(target: KubeTarget) -> None:
    labels, sel = selector()
    ns = target.namespace
    await create_or_get(target.rest, LEASES, lease("before", ns, labels))
    inf, _ = lease_informer(target, sel)
    async with inf, asyncio.timeout(WAIT):
        sub = inf.subscribe()
        await inf.wait_synced()
        await create_or_get(target.rest, LEASES, lease("after", ns, labels))
        await create_or_get(target.rest, LEASES, lease("other", ns, {"muster.dev/test-run": "not-this-one"}))
        await patch(target.rest, LEASES, "before", {"spec": {"holderIdentity": "b"}}, ns)
        await delete(target.rest, LEASES, "after", ns)
        await inf.wait_for(lambda objs: len(objs) == 1 and holder(inf, ns, "before") == "b")
        events = drain(sub)
    assert [(t, n) for t, n, _ in history(events)] == [
        (ADDED, "before"), (ADDED, "after"), (MODIFIED, "before"), (DELETED, "after")]
    assert inf.lists == 1
    assert inf.resource_version


async def test_node_cache(target: KubeTarget) -> None:
    async with Informer(ApiEventSource(target.rest, NODES), backoff=FAST) as inf, asyncio.timeout(WAIT):
        await inf.wait_synced()
        nodes = inf.items()
    assert nodes and all(n["kind"] == "Node" for n in nodes)
    if target.simulated:
        assert len(nodes) == 6
        assert inf.get("east-a100-0") is not None


async def test_compaction_while_behind_relists_without_missing_or_repeating(target: KubeTarget) -> None:
    sim = target.require_sim()
    labels, sel = selector()
    ns = target.namespace
    for name in ("keep", "edit"):
        await create_or_get(target.rest, LEASES, lease(name, ns, labels))
    inf, source = lease_informer(target, sel)
    async with inf, asyncio.timeout(WAIT):
        sub = inf.subscribe(replay=False)
        await inf.wait_synced()
        await create_or_get(target.rest, LEASES, lease("drop", ns, labels))
        await inf.wait_for(lambda objs: len(objs) == 3)  # seen on the watch: the watch is open
        source.gate.clear()  # the next watch waits: the informer falls behind
        sim.drop_watches()
        await source.waiting.wait()
        behind = source.watch_versions[-1]
        await patch(target.rest, LEASES, "edit", {"spec": {"holderIdentity": "b"}}, ns)
        await delete(target.rest, LEASES, "drop", ns)
        await create_or_get(target.rest, LEASES, lease("new", ns, labels))
        await create_or_get(target.rest, LEASES, lease("brief", ns, labels))
        await delete(target.rest, LEASES, "brief", ns)
        sim.compact()
        source.gate.set()
        await inf.wait_for(lambda objs: inf.lists == 2 and len(objs) == 3)
        await patch(target.rest, LEASES, "keep", {"spec": {"holderIdentity": "c"}}, ns)
        await inf.wait_for(lambda objs: holder(inf, ns, "keep") == "c")
        events = drain(sub)
    assert source.watch_versions.count(behind) == 1 and inf.lists == 2
    assert_consistent(events, {"keep": "c", "edit": "b", "new": "a"})
    after_gap = [(t, n) for t, n, _ in history(events)][3:]
    assert sorted(after_gap[:3]) == sorted([(MODIFIED, "edit"), (DELETED, "drop"), (ADDED, "new")])
    assert after_gap[3:] == [(MODIFIED, "keep")]


async def test_dropped_watch_resumes_from_last_version(target: KubeTarget) -> None:
    sim = target.require_sim()
    labels, sel = selector()
    ns = target.namespace
    inf, source = lease_informer(target, sel)
    async with inf, asyncio.timeout(WAIT):
        sub = inf.subscribe()
        await inf.wait_synced()
        await create_or_get(target.rest, LEASES, lease("a", ns, labels))
        await inf.wait_for(lambda objs: len(objs) == 1)
        sim.drop_watches()
        await create_or_get(target.rest, LEASES, lease("b", ns, labels))
        await patch(target.rest, LEASES, "a", {"spec": {"holderIdentity": "z"}}, ns, PatchType.STRATEGIC)
        await inf.wait_for(lambda objs: len(objs) == 2 and holder(inf, ns, "a") == "z")
        events = drain(sub)
    assert inf.lists == 1 and len(source.watch_versions) >= 2
    assert source.watch_versions[1] != source.watch_versions[0]  # resumed from a later version, not re-listed
    assert_consistent(events, {"a": "z", "b": "a"})


async def test_stopping_closes_watches_and_leaves_no_tasks(target: KubeTarget) -> None:
    sim = target.require_sim()
    informers = [Informer(ApiEventSource(target.rest, r, ns), backoff=FAST)
                 for r, ns in ((NODES, None), (LEASES, target.namespace))]
    for inf in informers:
        inf.start()
    async with asyncio.timeout(WAIT):
        for inf in informers:
            await inf.wait_synced()
        await eventually(lambda: sim.store.watch_count >= 2)
        for inf in informers:
            await inf.stop()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("informer")]
        await eventually(lambda: sim.store.watch_count == 0)  # the server sees the connections close
