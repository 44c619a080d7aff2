"""The fake kubelet: runs bound pods for the duration in their annotations, then ends them.

Like a real kubelet it admits each bound pod against its node's allocatable resources, counting
every pod it admitted earlier that has not reached a terminal phase (terminating pods included):
a pod that does not fit fails at once with reason ``OutOf<resource>``. Pods bound directly (a
``pods/binding`` from another scheduler, or ``spec.nodeName`` in the manifest) are held to the same
check as the ones the default scheduler places.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Hashable
from dataclasses import dataclass
from decimal import Decimal

from schemas.kube import JOB_ID
from services.kubesim.controller import Reconciler
from services.kubesim.events import EventRecorder
from services.kubesim.meta import Obj, annotations_of, now_rfc3339, set_condition
from services.kubesim.nodes import node_ready
from services.kubesim.registry import TERMINAL_PHASES, Registry
from services.kubesim.resources import NODES, PODS
from services.kubesim.scheduler import node_allocatable, pod_requests, shortage
from services.kubesim.store import StoreEvent

DURATION_ANNOTATION = "kubesim.muster.dev/duration-seconds"
EXIT_CODE_ANNOTATION = "kubesim.muster.dev/exit-code"
PLAIN_JOB_POD_SECONDS = 1.0
COMPONENT = "kubelet"


@dataclass(frozen=True)
class KubeletProfile:
    """Timings of the fake kubelet: start delay range, image pull time, and the cap on termination grace."""

    name: str
    start_delay: tuple[float, float]
    image_pull_seconds: float
    max_grace_seconds: float


PROFILES: dict[str, KubeletProfile] = {
    "zero": KubeletProfile("zero", (0.0, 0.0), 0.0, 0.0),
    "realistic": KubeletProfile("realistic", (1.0, 3.0), 2.0, 5.0),
}

PodKey = tuple[str, str, str]  # namespace, name, uid


def run_seconds(pod: Obj) -> float | None:
    """How long a started pod runs: its duration annotation; else about a second for a plain Job's pod
    (``kubectl create job x --image=busybox -- true`` completes, as with KWOK); else until deleted (a
    Muster gang pod without a duration, like a long training run, and any pod no Job owns)."""
    duration = annotations_of(pod).get(DURATION_ANNOTATION)
    if duration is not None:
        try:
            return float(duration)
        except ValueError:
            return 0.0
    meta = pod.get("metadata") or {}
    owned_by_job = any(ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or [])
    if owned_by_job and JOB_ID not in (meta.get("labels") or {}):
        return PLAIN_JOB_POD_SECONDS
    return None


def _container_statuses(pod: Obj, state: dict[str, object], ready: bool, restarts: int = 0) -> list[Obj]:
    return [
        {
            "name": c.get("name"),
            "image": c.get("image"),
            "imageID": f"kubesim://{c.get('image')}",
            "containerID": f"kubesim://{pod['metadata']['uid'][:12]}-{c.get('name')}",
            "ready": ready,
            "started": "running" in state,
            "restartCount": restarts,
            "state": state,
        }
        for c in (pod.get("spec") or {}).get("containers") or []
    ]


class Kubelet(Reconciler):
    """Moves pods Pending -> Running -> Succeeded/Failed with ``call_later`` timers; evicts from lost nodes."""

    name = "kubelet"

    def __init__(self, registry: Registry, events: EventRecorder, profile: KubeletProfile, seed: int = 0) -> None:
        super().__init__()
        self.registry = registry
        self.events = events
        self.profile = profile
        self._rng = random.Random(seed)
        self._timers: dict[PodKey, tuple[asyncio.TimerHandle, str]] = {}
        self._ip_counter = 0
        #: node -> requests of the pods admitted there and not yet terminal
        self._admitted: dict[str, dict[PodKey, dict[str, Decimal]]] = {}

    def stop(self) -> None:
        for handle, _ in self._timers.values():
            handle.cancel()
        self._timers.clear()
        super().stop()

    def on_event(self, ev: StoreEvent) -> None:
        if ev.rtype is NODES:
            if not node_ready(ev.obj) and ev.type != "DELETED":
                self.enqueue(("node", ev.obj["metadata"]["name"]))
        elif ev.rtype is PODS:
            m = ev.obj["metadata"]
            key = (m["namespace"], m["name"], m["uid"])
            if ev.type == "DELETED":
                self._cancel(key)
                self._release(key, ev.obj)
            elif (ev.obj.get("spec") or {}).get("nodeName"):
                self.enqueue(("pod", key))

    def _cancel(self, key: PodKey) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer[0].cancel()

    def _later(self, key: PodKey, delay: float, step: str) -> None:
        if self.loop is None:
            return
        self._cancel(key)
        self._timers[key] = (self.loop.call_later(max(delay, 0.0), self._fire, key, step), step)

    def _fire(self, key: PodKey, step: str) -> None:
        self._timers.pop(key, None)
        self.enqueue((step, key))

    def _get(self, key: PodKey) -> Obj | None:
        pod = self.registry.store.try_get(PODS, key[0], key[1])
        return pod if pod is not None and pod["metadata"]["uid"] == key[2] else None

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        kind, target = key
        if kind == "node":
            self._evict_node(str(target))
            return
        pod = self._get(target)
        if pod is None:
            return
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if pod["metadata"].get("deletionTimestamp"):
            self._terminate(target, pod, kind == "removal")
        elif kind == "start" and phase == "Pending":
            self._start(pod)
        elif kind == "finish" and phase == "Running":
            self.finish(pod, self._exit_code(pod))
        elif kind == "pod" and phase == "Pending" and target not in self._timers:
            self._admit(target, pod)

    def _admit(self, key: PodKey, pod: Obj) -> None:
        node = self.registry.store.try_get(NODES, "", pod["spec"]["nodeName"])
        if node is None or not node_ready(node):
            self.fail(pod, "NodeLost", f"Node {pod['spec']['nodeName']} which was running pod "
                      f"{pod['metadata']['name']} is unresponsive", exit_code=137)
            return
        problem = self._fit(key, pod, node)
        if problem is not None:
            reason, message = problem
            pod.setdefault("status", {}).update({"reason": reason, "message": message})
            self.events.record(self.finish(pod, 1, reason, message), "Warning", reason, message, COMPONENT)
            return
        low, high = self.profile.start_delay
        delay = self._rng.uniform(low, high) if high > 0 else 0.0
        if self.profile.image_pull_seconds > 0:
            for c in pod["spec"].get("containers") or []:
                self.events.record(pod, "Normal", "Pulling", f'Pulling image "{c.get("image")}"', COMPONENT)
            delay += self.profile.image_pull_seconds
        self._later(key, delay, "start")

    def _fit(self, key: PodKey, pod: Obj, node: Obj) -> tuple[str, str] | None:
        """Admit the pod on its node (None), or ``(reason, message)`` saying which resource ran out.

        Only the resources the node lists are checked (the scheduler, not the kubelet, refuses the rest).
        """
        on_node = self._admitted.setdefault(node["metadata"]["name"], {})
        allocatable = node_allocatable(node)
        requests = pod_requests(pod)
        used: dict[str, Decimal] = {}
        for other, held in on_node.items():
            if other != key:
                for name, amount in held.items():
                    used[name] = used.get(name, Decimal(0)) + amount
        short = shortage({n: a for n, a in requests.items() if n in allocatable}, allocatable, used)
        if short is not None:
            name, taken, capacity = short
            return (f"OutOf{name}", f"Pod was rejected: Node didn't have enough resource: {name}, "
                    f"requested: {requests[name]}, used: {taken}, capacity: {capacity}")
        on_node[key] = requests
        return None

    def _release(self, key: PodKey, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self._admitted.get(node, {}).pop(key, None)

    def _start(self, pod: Obj) -> None:
        m = pod["metadata"]
        self._ip_counter += 1
        status = pod.setdefault("status", {})
        status.update(
            {
                "phase": "Running",
                "startTime": status.get("startTime") or now_rfc3339(),
                "podIP": f"10.244.{self._ip_counter // 250 % 250}.{self._ip_counter % 250 + 1}",
                "hostIP": pod["spec"]["nodeName"],
                "containerStatuses": _container_statuses(pod, {"running": {"startedAt": now_rfc3339()}}, True),
            }
        )
        status["podIPs"] = [{"ip": status["podIP"]}]
        conds = status.setdefault("conditions", [])
        for ctype in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
            set_condition(conds, ctype, "True")
        started = self.registry.write(PODS, pod)
        for c in pod["spec"].get("containers") or []:
            self.events.record(started, "Normal", "Started", f"Started container {c.get('name')}", COMPONENT)
        seconds = run_seconds(pod)
        if seconds is not None:
            self._later((m["namespace"], m["name"], m["uid"]), seconds, "finish")

    @staticmethod
    def _exit_code(pod: Obj) -> int:
        try:
            return int(annotations_of(pod).get(EXIT_CODE_ANNOTATION, "0"))
        except ValueError:
            return 1

    def finish(self, pod: Obj, exit_code: int, reason: str | None = None, message: str = "") -> Obj:
        """End every container with ``exit_code``: phase Succeeded on 0, otherwise Failed."""
        m = pod["metadata"]
        self._cancel((m["namespace"], m["name"], m["uid"]))
        self._release((m["namespace"], m["name"], m["uid"]), pod)
        status = pod.setdefault("status", {})
        started = ((status.get("containerStatuses") or [{}])[0].get("state") or {}).get("running", {})
        terminated = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": started.get("startedAt", now_rfc3339()),
            "finishedAt": now_rfc3339(),
        }
        if message:
            terminated["message"] = message
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        status["containerStatuses"] = _container_statuses(pod, {"terminated": terminated}, False)
        conds = status.setdefault("conditions", [])
        for ctype in ("ContainersReady", "Ready"):
            set_condition(conds, ctype, "False", "PodCompleted" if exit_code == 0 else "PodFailed")
        return self.registry.write(PODS, pod)

    def fail(self, pod: Obj, reason: str, message: str, exit_code: int = 1) -> Obj:
        """Fail the pod with a pod-level reason (NodeLost, Evicted) and a DisruptionTarget condition."""
        status = pod.setdefault("status", {})
        status["reason"], status["message"] = reason, message
        set_condition(status.setdefault("conditions", []), "DisruptionTarget", "True", "DeletionByTaintManager",
                      message)
        failed = self.finish(pod, exit_code, reason, message)
        self.events.record(failed, "Warning", reason, message, COMPONENT)
        return failed

    def _evict_node(self, node_name: str) -> None:
        node = self.registry.store.try_get(NODES, "", node_name)
        if node is None or node_ready(node):
            return
        for pod in list(self.registry.store.view(PODS)):
            if (pod.get("spec") or {}).get("nodeName") != node_name:
                continue
            if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                continue
            self.fail(
                self.registry.store.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"]),
                "NodeLost",
                f"Node {node_name} which was running pod {pod['metadata']['name']} is unresponsive",
                exit_code=137,
            )

    def _terminate(self, key: PodKey, pod: Obj, grace_elapsed: bool) -> None:
        grace = float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        wait = min(grace, self.profile.max_grace_seconds)
        phase = (pod.get("status") or {}).get("phase")
        if grace_elapsed or wait <= 0 or phase in TERMINAL_PHASES:
            m = pod["metadata"]
            if m.get("finalizers"):
                if phase not in TERMINAL_PHASES:
                    self.finish(pod, 137 if grace_elapsed else 0)
                return
            self._cancel(key)
            self.registry.store.remove(PODS, m["namespace"], m["name"])
            return
        if self._timers.get(key, (None, ""))[1] != "removal":
            self.events.record(pod, "Normal", "Killing", "Stopping container", COMPONENT)
            self._later(key, wait, "removal")

