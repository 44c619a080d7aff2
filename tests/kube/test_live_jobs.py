"""Rendered Jobs on a live API server: they run on the planned nodes, and node loss shows in the caches."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from schemas.kube import JOB_ID
from services.dispatcher.render import render_job
from services.runtime.kube import (
    JOBS,
    NODES,
    Backoff,
    create_or_get,
    job_cache,
    node_cache,
    pod_cache,
)
from tests.kube.builders import placement, template
from tests.kube.conftest import KubeTarget

FAST = Backoff(initial=0.05, maximum=0.5)
DURATION = "kubesim.muster.dev/duration-seconds"


def condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def node_ready(node: dict[str, Any] | None) -> bool:
    return node is not None and condition(node, "Ready")


def taint_keys(node: dict[str, Any]) -> set[str]:
    return {t["key"] for t in (node.get("spec") or {}).get("taints") or []}


async def pick_nodes(target: KubeTarget, count: int) -> tuple[list[str], frozenset[str]]:
    """``count`` node names to plan on (repeating when the cluster is small) and their taints."""
    if target.simulated:
        return [f"east-a100-{i}" for i in range(count)], frozenset()
    nodes, _ = await target.rest.list(NODES)
    usable = sorted((n for n in nodes if node_ready(n) and not (n.get("spec") or {}).get("unschedulable")),
                    key=lambda n: len(taint_keys(n)))
    chosen = (usable * count)[:count]
    assert chosen, "the cluster has no Ready schedulable node"
    return [n["metadata"]["name"] for n in chosen], frozenset().union(*(taint_keys(n) for n in chosen))


def job_template(target: KubeTarget, job_id: str, replicas: int, seconds: float,
                 tolerations: frozenset[str] = frozenset()) -> Any:
    if target.simulated:
        return template(job_id=job_id, namespace=target.namespace, replicas=replicas, gpus_per_pod=4,
                        annotations={DURATION: str(seconds)})
    return template(job_id=job_id, namespace=target.namespace, replicas=replicas, gpus_per_pod=0,
                    gpu_type="", cpu_m=10, memory_mb=16, priority_class="", tolerations=tolerations,
                    command=("sleep", str(int(seconds))), annotations={DURATION: str(seconds)})


async def test_rendered_gang_runs_on_its_planned_nodes(target: KubeTarget) -> None:
    job_id = f"gang-{uuid.uuid4().hex[:6]}"
    nodes, taints = await pick_nodes(target, 2)
    place = placement((nodes[0], 2), (nodes[1], 1))
    manifest = render_job(job_template(target, job_id, replicas=3, seconds=1, tolerations=taints), 1, place)
    sel = f"{JOB_ID}={job_id}"
    pods = pod_cache(target.rest, target.namespace, label_selector=sel, backoff=FAST)
    jobs = job_cache(target.rest, target.namespace, label_selector=sel, backoff=FAST)
    async with pods, jobs, asyncio.timeout(60):
        created, was_created = await create_or_get(target.rest, JOBS, manifest)
        again, was_created_again = await create_or_get(target.rest, JOBS, manifest)
        assert was_created and not was_created_again
        assert again["metadata"]["uid"] == created["metadata"]["uid"]
        await jobs.wait_for(lambda objs: len(objs) == 1 and condition(objs[0], "Complete"))
        await pods.wait_for(lambda objs: len(objs) == 3 and all(
            (o.get("status") or {}).get("phase") == "Succeeded" for o in objs))
        ran_on = sorted(o["spec"]["nodeName"] for o in pods.items())
    assert set(ran_on) <= {nodes[0], nodes[1]}
    if target.simulated:
        assert ran_on == sorted([nodes[0], nodes[0], nodes[1]])
    assert all(o["metadata"]["labels"]["muster.dev/attempt"] == "1" for o in pods.items())


async def test_node_loss_shows_in_node_cache_and_fails_pods(target: KubeTarget) -> None:
    sim = target.require_sim()
    job_id = f"lost-{uuid.uuid4().hex[:6]}"
    lost = "east-a100-1"
    manifest = render_job(job_template(target, job_id, replicas=2, seconds=600), 0, placement((lost, 2)))
    sel = f"{JOB_ID}={job_id}"
    nodes = node_cache(target.rest, backoff=FAST)
    pods = pod_cache(target.rest, target.namespace, label_selector=sel, backoff=FAST)
    jobs = job_cache(target.rest, target.namespace, label_selector=sel, backoff=FAST)
    async with nodes, pods, jobs, asyncio.timeout(30):
        await create_or_get(target.rest, JOBS, manifest)
        await pods.wait_for(lambda objs: len(objs) == 2 and all(
            (o.get("status") or {}).get("phase") == "Running" for o in objs))
        await nodes.wait_synced()
        assert node_ready(nodes.get(lost))
        sim.set_node_ready(lost, False)
        await nodes.wait_for(lambda objs: not node_ready(nodes.get(lost)))
        await pods.wait_for(lambda objs: bool(objs) and all(
            (o.get("status") or {}).get("phase") == "Failed" for o in objs))
        await jobs.wait_for(lambda objs: len(objs) == 1 and condition(objs[0], "Failed"))
        reasons = {(o.get("status") or {}).get("reason") for o in pods.items()}
        assert node_ready(nodes.get("east-a100-0"))
    assert reasons == {"NodeLost"}
