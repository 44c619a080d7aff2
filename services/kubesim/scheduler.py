"""The scheduler: binds pending pods to nodes by selector, required affinity, taints and capacity.

GPU sharing is modelled as the cluster sees it: MIG slices are the node's ``nvidia.com/mig-<profile>``
extended resources; a fractional pod (KAI's ``gpu-fraction`` annotation) takes its fraction of the
shared GPU ``muster.dev/gpu-slots`` names for its completion index, and the fractions on one shared GPU
(of the node's ``muster.dev/shared-gpus``) never exceed it.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from schemas.kube import GPU_FRACTION, GPU_SLOTS, SHARED_GPUS
from services.kubesim.controller import Reconciler
from services.kubesim.events import EventRecorder
from services.kubesim.meta import Obj, set_condition
from services.kubesim.nodes import node_ready
from services.kubesim.registry import TERMINAL_PHASES, Registry
from services.kubesim.resources import NODES, PODS
from services.kubesim.selectors import Requirement, labels_match
from services.kubesim.store import Key, StoreEvent, key_of
from services.spec.quantity import parse_quantity

SCHEDULER_NAME = "default-scheduler"
_ALL = "__all__"


#: kubesim's own resource name for the share of shared GPU ``i`` of a node (capacity 1 each)
SHARED_GPU_RESOURCE = "kubesim.muster.dev/shared-gpu-"
_INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def pod_requests(pod: Obj) -> dict[str, Decimal]:
    """Summed container requests (limits stand in for missing requests), plus one ``pods`` slot, plus a
    fractional pod's share of its shared GPU."""
    total: dict[str, Decimal] = {"pods": Decimal(1)}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, qty in merged.items():
            total[name] = total.get(name, Decimal(0)) + parse_quantity(qty)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    fraction = annotations.get(GPU_FRACTION)
    if fraction is not None:
        try:
            share = Decimal(str(fraction))
        except InvalidOperation:
            share = Decimal(1)
        total[SHARED_GPU_RESOURCE + str(_slot(annotations))] = share
    return total


def _slot(annotations: Mapping[str, Any]) -> int:
    """The shared GPU the plan gave this pod's completion index (0 when it says none)."""
    try:
        slots = json.loads(str(annotations.get(GPU_SLOTS, "[]")))
        slot = int(slots[int(str(annotations.get(_INDEX_KEY, "0")))])
    except (ValueError, IndexError, TypeError):
        return 0
    return max(slot, 0)


def node_allocatable(node: Obj) -> dict[str, Any]:
    """The node's allocatable resources, plus one unit of each shared GPU (its ``muster.dev/shared-gpus``)."""
    allocatable = dict((node.get("status") or {}).get("allocatable") or {})
    labels = (node.get("metadata") or {}).get("labels") or {}
    try:
        shared = int(labels.get(SHARED_GPUS, "0"))
    except ValueError:
        shared = 0
    for i in range(shared):
        allocatable[SHARED_GPU_RESOURCE + str(i)] = "1"
    return allocatable


def _tolerates(tolerations: list[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        op = tol.get("operator", "Equal")
        if not tol.get("key") and op == "Exists":
            return True
        if tol.get("key") != taint.get("key"):
            continue
        if op == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _affinity_terms(pod: Obj) -> list[list[Requirement]]:
    required = (
        ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    ).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    terms: list[list[Requirement]] = []
    for term in required.get("nodeSelectorTerms") or []:
        reqs = []
        for expr in term.get("matchExpressions") or []:
            op = ops.get(str(expr.get("operator")))
            if op is None:
                continue
            reqs.append(Requirement(str(expr.get("key")), op, tuple(str(v) for v in expr.get("values") or ())))
        terms.append(reqs)
    return terms


def fit_problem(pod: Obj, node: Obj, used: Mapping[str, Decimal]) -> str | None:
    """Why the pod cannot go on the node, or None when it fits."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    terms = _affinity_terms(pod)
    if terms and not any(labels_match(t, labels) for t in terms):
        return "node(s) didn't match Pod's node affinity/selector"
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    if not node_ready(node):
        return "node(s) were not ready"
    short = shortage(pod_requests(pod), node_allocatable(node), used)
    return f"Insufficient {short[0]}" if short is not None else None


def shortage(requests: Mapping[str, Decimal], allocatable: Mapping[str, Any],
             used: Mapping[str, Decimal]) -> tuple[str, Decimal, Decimal] | None:
    """The first requested resource that does not fit beside ``used``: ``(name, used, capacity)``, else None.

    A resource the node does not list has capacity 0.
    """
    for name, amount in requests.items():
        if amount <= 0:
            continue
        capacity = parse_quantity(allocatable.get(name, 0))
        taken = used.get(name, Decimal(0))
        if taken + amount > capacity:
            return name, taken, capacity
    return None


def _waits(pod: Obj) -> bool:
    """Whether the default scheduler has ``pod`` to bind: unbound, pending, its own, not being deleted."""
    spec = pod.get("spec") or {}
    return (not spec.get("nodeName") and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and spec.get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME)


class Scheduler(Reconciler):
    """Binds pods of the default scheduler in creation order; unschedulable pods wait for changes."""

    name = "scheduler"

    def __init__(self, registry: Registry, events: EventRecorder) -> None:
        super().__init__()
        self.registry = registry
        self.events = events
        #: the pods it may bind (unbound, pending, of this scheduler, not being deleted), kept from the store's
        #: events: a reconcile reads these, not every pod the cluster ever ran
        self._waiting: dict[Key, None] = {key_of(p): None for p in registry.store.view(PODS) if _waits(p)}

    def on_event(self, ev: StoreEvent) -> None:
        if ev.rtype is PODS:
            key = key_of(ev.obj)
            if ev.type != "DELETED" and _waits(ev.obj):
                self._waiting[key] = None
            else:
                self._waiting.pop(key, None)
        if ev.rtype is NODES or (ev.rtype is PODS and ev.type == "DELETED"):
            self.enqueue(_ALL)
        elif ev.rtype is PODS:
            phase = (ev.obj.get("status") or {}).get("phase")
            if not (ev.obj.get("spec") or {}).get("nodeName") or phase in TERMINAL_PHASES:
                self.enqueue(_ALL)

    def _usage(self) -> dict[str, dict[str, Decimal]]:
        usage: dict[str, dict[str, Decimal]] = {}
        for pod in self.registry.store.view(PODS):
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                continue
            acc = usage.setdefault(node, {})
            for name, amount in pod_requests(pod).items():
                acc[name] = acc.get(name, Decimal(0)) + amount
        return usage

    def reconcile(self, key: Hashable) -> None:
        if not self._waiting:
            return
        store = self.registry.store
        pending = [p for p in (store.stored(PODS, *k) for k in self._waiting) if p is not None and _waits(p)]
        if not pending:
            return
        pending.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0),
                                    p["metadata"]["creationTimestamp"], int(p["metadata"]["resourceVersion"])))
        nodes = sorted(store.view(NODES), key=lambda n: n["metadata"]["name"])
        usage = self._usage()
        for pod in pending:
            self._schedule_one(pod, nodes, usage)

    def _schedule_one(self, pod: Obj, nodes: list[Obj], usage: dict[str, dict[str, Decimal]]) -> None:
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            self._mark_unschedulable(pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling "
                                     "gates")
            return
        reasons: dict[str, int] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            problem = fit_problem(pod, node, usage.get(name, {}))
            if problem is None:
                self._bind(pod, name)
                acc = usage.setdefault(name, {})
                for res, amount in pod_requests(pod).items():
                    acc[res] = acc.get(res, Decimal(0)) + amount
                return
            reasons[problem] = reasons.get(problem, 0) + 1
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        message = f"0/{len(nodes)} nodes are available: {detail}." if nodes else "no nodes available to schedule pods"
        self._mark_unschedulable(pod, "Unschedulable", message)

    def _bind(self, pod: Obj, node: str) -> None:
        current = self.registry.store.try_get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
        if current is None:
            return
        current["spec"]["nodeName"] = node
        status = current.setdefault("status", {})
        set_condition(status.setdefault("conditions", []), "PodScheduled", "True")
        bound = self.registry.write(PODS, current)
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.events.record(bound, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node}",
                           SCHEDULER_NAME)

    def _mark_unschedulable(self, pod: Obj, reason: str, message: str) -> None:
        current = self.registry.store.try_get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
        if current is None:
            return
        conds = current.setdefault("status", {}).setdefault("conditions", [])
        before = next((dict(c) for c in conds if c.get("type") == "PodScheduled"), None)
        set_condition(conds, "PodScheduled", "False", reason, message)
        after = next(c for c in conds if c.get("type") == "PodScheduled")
        if before and (before.get("reason"), before.get("message")) == (after.get("reason"), after.get("message")):
            return
        updated = self.registry.write(PODS, current)
        if reason == "Unschedulable":
            self.events.record(updated, "Warning", "FailedScheduling", message, SCHEDULER_NAME)
