"""A fake cloud for local clusters: it plays cluster-autoscaler's part for ``ProvisioningRequest``s, with KWOK
nodes for machines on a real control plane (on kubesim, nodes it makes Ready itself). Not part of Muster's
services: on a real cluster, cluster-autoscaler (or the cloud's own provisioner) answers the requests the
dispatcher makes, and removes the nodes it marks.

For each request of class ``best-effort-atomic-scale-up`` naming a node group of the cluster file
(``muster.dev/node-group`` parameter) that can grow:

- ``Accepted`` at once; after the group's ``provision_delay_s`` (from the request's creation) the nodes are created
  as KWOK nodes of the group (named ``<cluster>-<group>-b<n>``, labelled with the request), and once KWOK made them
  Ready the request is ``Provisioned``;
- ``Failed`` when the group is unknown or cannot grow, or when the cloud has fewer nodes of it left than asked
  (``stock``: by default the group's ``autoscale.max`` less its nodes; a test may give less to see a failure).

A node with the ``muster.dev/scale-down`` taint and no pod left that is not done is deleted (the machine given
back). The cloud polls the API every ``poll_s``; everything it does is idempotent, so a restarted cloud carries on
from the objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas.config import ClusterConfig, NodeGroupConfig
from schemas.kube import NODE_GROUP, NODE_GROUP_PARAMETER, PROVISIONING_CLASS, PROVISIONING_REQUEST, SCALE_DOWN
from services.kubereal.bootstrap import kwok_node
from services.kubesim.meta import now_rfc3339
from services.kubesim.nodes import node_object, node_ready
from services.runtime.kube import NODES, PODS, KubeObject, KubeRest, PatchType, create_or_get, delete, patch
from services.runtime.kube.errors import status_of
from services.runtime.kube.resources import PROVISIONING_REQUESTS

log = logging.getLogger(__name__)

_DONE_PHASES = ("Succeeded", "Failed")


def _conditions(obj: KubeObject) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def _condition(kind: str, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message[:1000],
            "lastTransitionTime": now_rfc3339(), "observedGeneration": generation}


@dataclass
class _Answer:
    kind: str  # Provisioned or Failed
    reason: str
    message: str


class FakeCloud:
    """The cloud of one cluster (``cluster``: its file entry, whose growable groups it sells)."""

    def __init__(self, rest: KubeRest, cluster: ClusterConfig, *, stock: Mapping[str, int] | None = None,
                 poll_s: float = 1.0, kwok: bool = True) -> None:
        self.rest = rest
        self.cluster = cluster
        self.groups = {g.name: g for g in cluster.node_groups if g.autoscale is not None}
        self.stock = {name: (stock or {}).get(name, g.autoscale.max - g.count if g.autoscale else 0)
                      for name, g in self.groups.items()}
        self.poll_s = poll_s
        self.kwok = kwok  # the nodes are KWOK's to make Ready (a real control plane); else made Ready (kubesim)
        self.removed: list[str] = []  # nodes given back, in order

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.step()
            except Exception:
                log.exception("fake cloud of %s: a step failed; trying again", self.cluster.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.poll_s)

    async def step(self, now: datetime | None = None) -> None:
        """One look at the requests and the nodes to give back."""
        now = now or datetime.now(UTC)
        requests, _ = await self.rest.list(PROVISIONING_REQUESTS)
        nodes, _ = await self.rest.list(NODES)
        for request in requests:
            await self._serve(request, nodes, now)
        for node in nodes:
            await self._maybe_remove(node)

    async def _serve(self, request: KubeObject, nodes: list[KubeObject], now: datetime) -> None:
        meta = request["metadata"]
        conditions = _conditions(request)
        if "Provisioned" in conditions or "Failed" in conditions:
            return
        generation = int(meta.get("generation", 1))
        if "Accepted" not in conditions:
            await self._set(request, [_condition("Accepted", "Accepted", "the fake cloud took the request",
                                                 generation)])
            conditions = _conditions(request)
        answer = await self._provision(request, nodes, now)
        if answer is not None:
            await self._set(request, [*conditions.values(),
                                      _condition(answer.kind, answer.reason, answer.message, generation)])

    async def _provision(self, request: KubeObject, nodes: list[KubeObject], now: datetime) -> _Answer | None:
        """The answer to a request once there is one: its nodes (those labelled with it) are made after the
        group's delay, then it is ``Provisioned`` once KWOK made them all Ready."""
        spec = request.get("spec") or {}
        wanted = sum(int(p.get("count") or 0) for p in spec.get("podSets") or [])
        group_name = (spec.get("parameters") or {}).get(NODE_GROUP_PARAMETER, "")
        group = self.groups.get(group_name)
        if spec.get("provisioningClassName") != PROVISIONING_CLASS:
            return _Answer("Failed", "UnsupportedClass", f"this cloud serves only {PROVISIONING_CLASS}")
        if group is None or group.autoscale is None:
            return _Answer("Failed", "UnknownNodeGroup", f"cluster {self.cluster.name} has no node group "
                           f"{group_name!r} that can grow")
        name = request["metadata"]["name"]
        mine = [n["metadata"]["name"] for n in nodes
                if (n["metadata"].get("labels") or {}).get(PROVISIONING_REQUEST) == name]
        if not mine and (now - (_created(request) or now)).total_seconds() < group.autoscale.provision_delay_s:
            return None  # the machines are on their way
        missing = wanted - len(mine)
        if missing > 0:
            if missing > self.stock[group_name]:
                return _Answer("Failed", "OutOfCapacity", f"the cloud has {self.stock[group_name]} {group.gpu_type} "
                               f"node(s) of group {group_name} left; the request asks for {wanted}")
            self.stock[group_name] -= missing
            await self._make_nodes(group, name, missing, nodes)
            return None
        ready = {n["metadata"]["name"] for n in nodes if node_ready(n)}
        if not set(mine) <= ready:
            return None  # KWOK has not made them Ready yet
        return _Answer("Provisioned", "Provisioned", f"{len(mine)} node(s) of group {group_name} ready: "
                       f"{', '.join(mine)}")

    async def _make_nodes(self, group: NodeGroupConfig, request: str, count: int,
                          nodes: list[KubeObject]) -> None:
        prefix = f"{self.cluster.name}-{group.name}-b"
        taken = {int(n["metadata"]["name"][len(prefix):]) for n in nodes
                 if n["metadata"]["name"].startswith(prefix) and n["metadata"]["name"][len(prefix):].isdigit()}
        names: list[str] = []
        serial = 0
        while len(names) < count:
            serial += 1
            if serial in taken:
                continue
            name = f"{prefix}{serial}"
            made = node_object(self.cluster.name, group, group.count + serial, name, "10.255.0.1")
            obj = kwok_node(made) if self.kwok else {"apiVersion": "v1", "kind": "Node", **made}
            obj["metadata"]["labels"][PROVISIONING_REQUEST] = request
            await create_or_get(self.rest, NODES, obj)
            names.append(name)
        log.info("fake cloud of %s: made %s for %s", self.cluster.name, ", ".join(names), request)

    async def _maybe_remove(self, node: KubeObject) -> None:
        taints = (node.get("spec") or {}).get("taints") or []
        if not any(t.get("key") == SCALE_DOWN for t in taints):
            return
        name = node["metadata"]["name"]
        pods, _ = await self.rest.list(PODS, field_selector=f"spec.nodeName={name}")
        if any((p.get("status") or {}).get("phase") not in _DONE_PHASES for p in pods):
            return
        await delete(self.rest, NODES, name)
        group = (node["metadata"].get("labels") or {}).get(NODE_GROUP, "")
        if group in self.stock:
            self.stock[group] += 1
        self.removed.append(name)
        log.info("fake cloud of %s: gave back node %s", self.cluster.name, name)

    async def _set(self, request: KubeObject, conditions: list[dict[str, Any]]) -> None:
        meta = request["metadata"]
        try:
            updated = await patch(self.rest, PROVISIONING_REQUESTS, meta["name"],
                                  {"status": {"conditions": conditions}}, meta.get("namespace"), PatchType.MERGE,
                                  subresource="status")
        except Exception as exc:
            if status_of(exc) == 404:
                return  # deleted meanwhile
            raise
        request["status"] = updated.get("status") or {}


def _created(obj: KubeObject) -> datetime | None:
    stamp = obj["metadata"].get("creationTimestamp")
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
