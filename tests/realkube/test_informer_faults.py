"""The informer against the real API server's own faults: its watch-cache 410 after a crash, streams it
ends on time-out, a server that is down for a while, and watches closed when an informer stops.

kubesim's fault controls (``tests/kube``) script these; here the real kube-apiserver is killed and
started again (its watch cache then begins at the current revision, so a watch from an older
resourceVersion gets a real ``410 too old resource version``), and the watches it holds are read from
its own metrics.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from services.runtime.kube import (
    LEASES,
    NAMESPACES,
    ApiEventSource,
    Backoff,
    Informer,
    KubeRest,
    Resource,
    RetryPolicy,
    build_api_client,
    create_or_get,
    delete,
    ensure_namespace,
    patch,
)
from tests.builders.realkube import RealCluster, restart_api_server, start_api_server
from tests.kube.builders import GatedSource, eventually, lease
from tests.kube.test_live_caches import assert_consistent, drain, holder, selector

FAST = Backoff(initial=0.05, maximum=0.5)
WAIT = 60.0


@dataclass
class Target:
    rest: KubeRest
    namespace: str


@pytest.fixture
async def target(real: RealCluster) -> AsyncIterator[Target]:
    """An admin client with patient retries (they outlast a restart of the API server), in a namespace
    of the test's own."""
    api = await build_api_client(kubeconfig=str(real.admin_kubeconfig))
    async with api:
        rest = KubeRest(api, RetryPolicy(attempts=60, backoff=Backoff(initial=0.05, maximum=0.25)),
                        request_timeout=10.0)
        namespace = f"faults-{uuid.uuid4().hex[:6]}"
        await ensure_namespace(rest, namespace)
        try:
            yield Target(rest, namespace)
        finally:
            await delete(rest, NAMESPACES, namespace)


#: a resource no component of the control plane watches (Leases are, by the controllers and KWOK, which
#: watch again after the restarts of the other tests): the server's count of its watches is the test's own
PODTEMPLATES = Resource("v1", "PodTemplate", "podtemplates", namespaced=True)


async def open_watches(rest: KubeRest) -> int:
    """Watches of PodTemplates the API server holds open now (its ``apiserver_longrunning_requests``)."""
    text = await rest.api.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False,
                                   header_params={"Accept": "text/plain"})
    body = (await text.read()).decode()
    text.release()
    total = 0
    for line in body.splitlines():
        if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line \
                and f'resource="{PODTEMPLATES.plural}"' in line:
            match = re.search(r"\}\s+([0-9.e+]+)$", line)
            total += int(float(match.group(1))) if match else 0
    return total


async def until_watches(rest: KubeRest, holds: Callable[[int], bool]) -> None:
    """Poll the API server's count of open PodTemplate watches until ``holds`` it."""
    for _ in range(int(WAIT / 0.2)):
        if holds(await open_watches(rest)):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"open PodTemplate watches stayed at {await open_watches(rest)}")


async def test_informer_behind_an_api_server_crash_relists_on_the_real_410(
        real: RealCluster, target: Target) -> None:
    rest, ns = target.rest, target.namespace
    labels, sel = selector()
    for name in ("keep", "edit", "drop"):
        await create_or_get(rest, LEASES, lease(name, ns, labels))
    source = GatedSource(ApiEventSource(rest, LEASES, ns, label_selector=sel, watch_timeout_seconds=60))
    inf = Informer(source, backoff=FAST)
    source.gate.clear()  # the informer lists, then its watch waits: it falls behind
    async with inf, asyncio.timeout(WAIT):
        sub = inf.subscribe(replay=False)
        await inf.wait_synced()
        await source.waiting.wait()
        behind = inf.resource_version
        # a change the informer misses, then the crash: the new server's watch cache starts after it
        await patch(rest, LEASES, "edit", {"spec": {"holderIdentity": "b"}}, ns)
        await restart_api_server(real.plane, rest)
        await delete(rest, LEASES, "drop", ns)
        await create_or_get(rest, LEASES, lease("new", ns, labels))
        await create_or_get(rest, LEASES, lease("brief", ns, labels))
        await delete(rest, LEASES, "brief", ns)
        source.gate.set()
        await inf.wait_for(lambda objs: inf.lists == 2 and len(objs) == 3)
        await patch(rest, LEASES, "keep", {"spec": {"holderIdentity": "c"}}, ns)
        await inf.wait_for(lambda objs: holder(inf, ns, "keep") == "c")
        events = drain(sub)
    # the watch from the old version was refused (410), not served: the informer listed again once
    assert inf.lists == 2 and source.watch_versions.count(behind) == 1 and source.watch_versions[-1] != behind
    # the first list, then the relist's differences, then the watch; "brief" came and went unseen
    assert_consistent(events, {"keep": "c", "edit": "b", "new": "a"})
    assert all(o["metadata"]["name"] != "brief" for _, o in events)


async def test_streams_ended_by_the_server_resume_from_the_last_version(target: Target) -> None:
    rest, ns = target.rest, target.namespace
    labels, sel = selector()
    inf = Informer(ApiEventSource(rest, LEASES, ns, label_selector=sel, watch_timeout_seconds=1), backoff=FAST)
    async with inf, asyncio.timeout(WAIT):
        sub = inf.subscribe()
        await inf.wait_synced()
        for step in range(3):  # each change lands on a later stream than the one before
            await create_or_get(rest, LEASES, lease(f"l{step}", ns, labels))
            await patch(rest, LEASES, "l0", {"spec": {"holderIdentity": f"h{step}"}}, ns)
            want = f"h{step}"
            await inf.wait_for(lambda objs: holder(inf, ns, "l0") == want)  # noqa: B023 (awaited in the loop)
            watches = inf.watches
            await eventually(lambda w=watches: inf.watches > w)  # the server ended the stream; a new one is open
        events = drain(sub)
    assert inf.lists == 1 and inf.watches >= 4  # resumed each time, never listed again
    assert_consistent(events, {"l0": "h2", "l1": "a", "l2": "a"})


async def test_writes_and_the_informer_wait_out_an_api_server_that_is_down(
        real: RealCluster, target: Target) -> None:
    rest, ns = target.rest, target.namespace
    inf = Informer(ApiEventSource(rest, LEASES, ns), backoff=FAST)
    async with inf, asyncio.timeout(WAIT):
        await inf.wait_synced()
        real.plane.kill("kube-apiserver")
        write = asyncio.create_task(create_or_get(rest, LEASES, lease("during", ns, {})))
        await asyncio.sleep(1.5)
        assert not write.done()  # refused connections are retried, not reported
        await start_api_server(real.plane, rest)
        created, was_created = await write
        assert was_created
        await inf.wait_for(lambda objs: any(o["metadata"]["name"] == "during" for o in objs))
    assert inf.watches >= 2
    assert created["metadata"]["namespace"] == ns


async def test_stopping_informers_closes_their_watches_on_the_server(target: Target) -> None:
    rest, ns = target.rest, target.namespace
    before = await open_watches(rest)
    informers = [Informer(ApiEventSource(rest, PODTEMPLATES, ns, label_selector=f"muster.dev/test-run=w{i}"),
                          backoff=FAST) for i in range(3)]
    for inf in informers:
        inf.start()
    async with asyncio.timeout(WAIT):
        for inf in informers:
            await inf.wait_synced()
        await until_watches(rest, lambda n: n >= before + 3)
        for inf in informers:
            await inf.stop()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("informer")]
        await until_watches(rest, lambda n: n <= before)  # the server sees the connections close
