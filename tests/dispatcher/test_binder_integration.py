"""The binder on the simulated cluster: a pod planned onto GPUs that a terminating pod still holds waits
unbound until they are free, instead of being rejected by the kubelet."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from services.dispatcher.binder import Binder
from services.kubesim import KubeSim
from services.kubesim.kubelet import DURATION_ANNOTATION, KubeletProfile
from services.runtime.kube import (
    PODS,
    KubeObject,
    KubeRest,
    build_api_client,
    delete,
    ensure_namespace,
)
from services.spec.cluster_file import load_cluster_file
from tests.dispatcher.builders import CLUSTER
from tests.dispatcher.harness import TEST_RETRY, eventually_true
from tests.node_watcher.builders import CLUSTER_FILE

pytestmark = pytest.mark.integration

NODE = "east-a100-1"
#: pods take this long to stop after their deletion (the kubelet caps the grace period at it)
STOP_S = 1.5


def gang_pod(name: str, gpus: int, seconds: float = 60.0) -> KubeObject:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "team-a", "labels": {"muster.dev/job-id": name},
            "annotations": {"muster.dev/placement": json.dumps([NODE]),
                            "batch.kubernetes.io/job-completion-index": "0",
                            DURATION_ANNOTATION: str(seconds)},
        },
        "spec": {
            "schedulerName": "muster", "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "main", "image": "registry.example/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
    }


@asynccontextmanager
async def binder_on_cluster() -> AsyncIterator[tuple[KubeRest, Binder]]:
    profile = KubeletProfile("slow-stop", (0.0, 0.0), 0.0, STOP_S)
    sim = KubeSim(load_cluster_file(CLUSTER_FILE), cluster_name=CLUSTER, profile=profile)
    async with sim.serve(port=0) as url:
        api = await build_api_client(url)
        async with api:
            rest = KubeRest(api, retry=TEST_RETRY, request_timeout=10.0)
            await ensure_namespace(rest, "team-a")
            binder = Binder(rest)
            stop = asyncio.Event()
            task = asyncio.create_task(binder.run(stop))
            try:
                yield rest, binder
            finally:
                stop.set()
                await task


async def read_pod(rest: KubeRest, name: str) -> KubeObject | None:
    try:
        return await rest.get(PODS, name, "team-a")
    except Exception:
        return None


async def test_a_pod_waits_for_the_gpus_a_terminating_pod_still_holds() -> None:
    async with binder_on_cluster() as (rest, binder):
        await rest.create(PODS, gang_pod("victim", 8), "team-a")

        async def victim_running() -> bool:
            pod = await read_pod(rest, "victim")
            return pod is not None and pod["status"].get("phase") == "Running"

        await eventually_true(victim_running)
        await delete(rest, PODS, "victim", "team-a", grace_period_seconds=30)
        await rest.create(PODS, gang_pod("next", 8), "team-a")

        async def next_waits() -> bool:
            return binder.pods_waiting == 1

        await eventually_true(next_waits)
        held = await read_pod(rest, "next")
        assert held is not None and not held["spec"].get("nodeName")
        assert await read_pod(rest, "victim") is not None  # still terminating, still holding the node's GPUs

        async def next_running() -> bool:
            pod = await read_pod(rest, "next")
            return pod is not None and pod["status"].get("phase") in ("Running", "Failed")

        await eventually_true(next_running, within=STOP_S + 10)
        bound = await read_pod(rest, "next")
        assert bound is not None
        assert bound["status"]["phase"] == "Running", bound["status"]
        assert bound["spec"]["nodeName"] == NODE
        assert await read_pod(rest, "victim") is None and binder.pods_waiting == 0


async def test_pods_that_fit_beside_each_other_bind_at_once() -> None:
    async with binder_on_cluster() as (rest, binder):
        for name in ("left", "right"):
            await rest.create(PODS, gang_pod(name, 4), "team-a")

        async def both_running() -> bool:
            pods = [await read_pod(rest, name) for name in ("left", "right")]
            return all(p is not None and p["status"].get("phase") == "Running" for p in pods)

        await eventually_true(both_running)
        assert binder.bound == 2 and binder.pods_waiting == 0
        assert binder.room.free(NODE) == 0


def plain_pod(name: str, gpus: int, seconds: float = 60.0) -> KubeObject:
    """A pod of a plain Pod group as the dispatcher creates it: Muster's scheduler, its node in its selector."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"muster.dev/job-id": name},
                     "annotations": {DURATION_ANNOTATION: str(seconds)}},
        "spec": {
            "schedulerName": "muster", "nodeSelector": {"kubernetes.io/hostname": NODE},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "main", "image": "registry.example/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
    }


async def test_a_pod_placed_at_its_creation_needs_no_binding_and_one_with_no_room_left_waits() -> None:
    async with binder_on_cluster() as (rest, binder):
        async def listed() -> bool:
            return binder.ready

        await eventually_true(listed)
        first = binder.place(plain_pod("first", 8), "team-a")
        assert first["spec"]["nodeName"] == NODE and binder.room.free(NODE) == 0  # reserved before it exists
        await rest.create(PODS, first, "team-a")
        second = binder.place(plain_pod("second", 8), "team-a")
        assert "nodeName" not in second["spec"]  # no room: created unbound, for the binder to bind
        await rest.create(PODS, second, "team-a")

        async def second_waits() -> bool:
            return binder.pods_waiting == 1

        async def first_running() -> bool:
            pod = await read_pod(rest, "first")
            return pod is not None and pod["status"].get("phase") == "Running"

        await eventually_true(second_waits)
        await eventually_true(first_running)
        assert binder.bound == 0  # the first went onto its node at its creation, with no binding

        await delete(rest, PODS, "first", "team-a", grace_period_seconds=0)

        async def second_bound() -> bool:
            pod = await read_pod(rest, "second")
            return pod is not None and pod["spec"].get("nodeName") == NODE

        await eventually_true(second_bound, within=STOP_S + 10)
        assert binder.bound == 1


def test_place_leaves_a_pod_alone_behind_pods_waiting_and_unplace_gives_its_gpus_back() -> None:
    binder = Binder(rest=None)  # type: ignore[arg-type]  # place and unplace make no request
    binder.room.set_node({"metadata": {"name": NODE}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert binder.place(plain_pod("early", 4), "team-a") == plain_pod("early", 4)  # caches not listed yet
    binder.ready = True
    placed = binder.place(plain_pod("a", 4), "team-a")
    assert placed["spec"]["nodeName"] == NODE and binder.room.free(NODE) == 4
    binder.unplace(placed)  # its creation failed
    assert binder.room.free(NODE) == 8
    binder.waiting[NODE] = {"team-a/older": plain_pod("older", 8)}
    assert "nodeName" not in binder.place(plain_pod("b", 4), "team-a")["spec"]  # first come, first bound
