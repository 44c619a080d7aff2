"""Ground truth from the simulated cluster: every pod's node, GPUs and lifetime, recorded as it changes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from schemas.kube import ATTEMPT, JOB_ID
from services.kubesim.resources import PODS
from services.kubesim.store import StoreEvent
from services.spec.pod_resources import pod_gpus

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass
class PodLife:
    """One pod of a Muster job: ``bound_at`` when it got a node, ``running_at`` / ``ended_at`` (monotonic s)."""

    namespace: str
    name: str
    job_id: str
    attempt: int
    owner: str
    gpus: int
    node: str | None = None
    bound_at: float | None = None
    running_at: float | None = None
    ended_at: float | None = None
    phase: str = "Pending"

    @property
    def held(self) -> tuple[float, float] | None:
        """The interval the pod held its node's GPUs (None if it never got a node)."""
        if self.bound_at is None:
            return None
        return self.bound_at, self.ended_at if self.ended_at is not None else float("inf")

    @property
    def ran(self) -> tuple[float, float] | None:
        """The interval its containers ran (None if they never started)."""
        if self.running_at is None:
            return None
        return self.running_at, self.ended_at if self.ended_at is not None else float("inf")


@dataclass
class PodRecorder:
    """A kubesim store listener: the lifetime of every pod labelled with a Muster job id."""

    pods: dict[tuple[str, str, str], PodLife] = field(default_factory=dict)

    def __call__(self, ev: StoreEvent) -> None:
        if ev.rtype != PODS:
            return
        meta = ev.obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if JOB_ID not in labels:
            return
        uid = meta.get("uid", "")
        key = (meta.get("namespace", ""), meta.get("name", ""), uid)
        now = time.monotonic()
        life = self.pods.get(key)
        if life is None:
            owners = meta.get("ownerReferences") or [{}]
            life = PodLife(key[0], key[1], labels[JOB_ID], int(labels.get(ATTEMPT, "0")),
                           owners[0].get("name", ""), pod_gpus(ev.obj))
            self.pods[key] = life
        if life.ended_at is not None:
            return
        node = (ev.obj.get("spec") or {}).get("nodeName")
        phase = (ev.obj.get("status") or {}).get("phase") or "Pending"
        if node and life.bound_at is None:
            life.node, life.bound_at = node, now
        if phase == "Running" and life.running_at is None:
            life.running_at = now
        life.phase = phase
        if ev.type == "DELETED" or phase in TERMINAL_PHASES:
            life.ended_at = now
