"""Groups of plain Pods (``v1`` Pod): the pods of one namespace sharing the label ``muster.dev/pod-group``
are one job, complete when there are as many as their annotation ``muster.dev/pod-group-size`` says (the
same on every pod). The object this kind reads is the group as a ``v1`` ``List`` of its Pods (what
``kubectl get pods -l muster.dev/pod-group=NAME -o yaml`` prints, and what ``kubectl create -f`` takes);
``pod_group`` makes one from pods.

Roles: one per distinct pod shape, the shape being the resources of every container and init container
(``restartPolicy`` of init containers included), the pod-level ``resources``, ``overhead`` and the
``nodeSelector`` (whose ``muster.dev/gpu-type`` is the role's GPU type). One shape: role ``main``; several:
each named after the first container of its first pod (by pod name), with the shape's hash when two shapes
share that name. The kind's own name of a role is ``shape-<hash>``.

Pods cannot be suspended: each is created with the gate (a pod's gates can only be set at its creation).
Nothing is patched on a parent; preemption deletes the pods, and as no controller recreates plain pods the
group is then incomplete until its owner creates them again.

State: failed when a pod failed, succeeded when all the group's pods succeeded, running while some pod runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.jobspec import MAIN_ROLE
from schemas.kube import ADMISSION_GATE, POD_GROUP, POD_GROUP_SIZE, ROLE
from services.spec.kinds.base import (
    GroupIncomplete,
    KindIdentity,
    NotQueueable,
    Patch,
    PodSet,
    State,
    WorkloadKind,
    describe,
    fresh_manifest,
)
from services.spec.kinds.names import role_name
from services.spec.kinds.patching import gated_template
from services.spec.kube_pods import KubeObject, first_container, pod_spec_of, scheduling_gates
from services.spec.quantity import parse_quantity

POD = KindIdentity("", "v1", "Pod", "pods")


def pod_group(pods: Sequence[Mapping[str, Any]]) -> KubeObject:
    """The group object this kind reads: a ``v1`` ``List`` of the pods."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [dict(p) for p in pods]}


def group_pods(obj: Mapping[str, Any]) -> list[KubeObject]:
    """The pods of a group object (a ``List``, or one Pod), by name, those being deleted left out."""
    items = obj.get("items") if obj.get("kind") == "List" else [obj]
    pods = [p for p in items or [] if isinstance(p, dict) and p.get("kind", "Pod") == "Pod"]
    return sorted((p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")),
                  key=lambda p: str((p.get("metadata") or {}).get("name", "")))


def _quantities(values: object) -> dict[str, str]:
    """A resource list with each quantity in one canonical form (``4``, ``"4"`` and ``4000m`` alike)."""
    if not isinstance(values, dict):
        return {}
    out: dict[str, str] = {}
    for name, value in values.items():
        try:
            out[str(name)] = format(parse_quantity(value).normalize(), "f")
        except ValueError:
            out[str(name)] = str(value)
    return out


def _requirements(resources: object) -> dict[str, dict[str, str]]:
    if not isinstance(resources, dict):
        return {}
    return {key: _quantities(resources.get(key)) for key in ("limits", "requests") if resources.get(key)}


def shape_key(pod: Mapping[str, Any]) -> str:
    """A short hash of what the pod asks the scheduler for (see the module)."""
    spec = pod_spec_of(pod)
    shape = {
        "containers": [_requirements(c.get("resources")) for c in spec.get("containers") or []
                       if isinstance(c, dict)],
        "init": [[_requirements(c.get("resources")), c.get("restartPolicy")] for c in spec.get("initContainers") or []
                 if isinstance(c, dict)],
        "pod": _requirements(spec.get("resources")),
        "overhead": _quantities(spec.get("overhead")),
        "nodeSelector": spec.get("nodeSelector") or {},
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:8]


def shapes(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The pods by shape, shapes in the order of their first pod."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        found.setdefault(shape_key(pod), []).append(pod)
    return found


def shape_roles(by_shape: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, str]:
    """Shape -> role name (see the module)."""
    if len(by_shape) == 1:
        return {key: MAIN_ROLE for key in by_shape}
    first = {key: str((first_container(pod_spec_of(pods[0])) or {}).get("name") or "pods")
             for key, pods in by_shape.items()}
    return {key: role_name(name if list(first.values()).count(name) == 1 else f"{name}-{key[:6]}")
            for key, name in first.items()}


def _one(values: set[str], what: str, who: str) -> str:
    if len(values) != 1:
        found = ", ".join(sorted(values)) or "none"
        raise NotQueueable(f"{who}: its pods must all carry the same {what} (found: {found})")
    return next(iter(values))


class PodGroupKind(WorkloadKind):
    identity = POD
    suspendable = False

    def group_name(self, obj: Mapping[str, Any]) -> str:
        pods = group_pods(obj)
        return _one({str(((p.get("metadata") or {}).get("labels") or {}).get(POD_GROUP, "")) for p in pods} - {""},
                    f"label {POD_GROUP}", describe(obj))

    def size(self, obj: Mapping[str, Any]) -> int:
        pods = group_pods(obj)
        text = _one({str(((p.get("metadata") or {}).get("annotations") or {}).get(POD_GROUP_SIZE, "")) for p in pods}
                    - {""}, f"annotation {POD_GROUP_SIZE}", describe(obj))
        if not text.isdigit() or int(text) < 1:
            raise NotQueueable(f"{describe(obj)}: annotation {POD_GROUP_SIZE} must be a positive count, not {text!r}")
        return int(text)

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        pods = group_pods(obj)
        self.group_name(obj)
        size = self.size(obj)
        if len(pods) < size:
            raise GroupIncomplete(f"{describe(obj)} has {len(pods)} of its {size} pods; waiting for the rest")
        if len(pods) > size:
            raise NotQueueable(f"{describe(obj)} has {len(pods)} pods, more than its {POD_GROUP_SIZE} {size}")
        by_shape = shapes(pods)
        names = shape_roles(by_shape)
        sets: list[PodSet] = []
        for key, members in by_shape.items():
            first = members[0]
            pod_names = ", ".join(str((p.get("metadata") or {}).get("name", "")) for p in members)
            sets.append(PodSet(f"shape-{key}", len(members), {"metadata": dict(first.get("metadata") or {}),
                                                              "spec": pod_spec_of(first)},
                               f"pods {pod_names}", named=names[key]))
        return sets

    def why_not_held(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> str | None:
        pods = group_pods(obj)
        if not pods:
            return f"{describe(obj)} has no pods"
        loose = [str((p.get("metadata") or {}).get("name", "")) for p in pods
                 if ADMISSION_GATE not in scheduling_gates(pod_spec_of(p))]
        if not loose:
            return None
        return (f"{describe(obj)}: pods cannot be suspended, so each must be created with the scheduling gate "
                f"{ADMISSION_GATE} (spec.schedulingGates: [{{name: {ADMISSION_GATE}}}]); not gated: "
                + ", ".join(loose))

    def release_patch(self, obj: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> tuple[Patch, ...] | None:
        return None

    def hold_manifest(self, manifest: Mapping[str, Any], *, name: str, namespace: str,
                      labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> KubeObject:
        """The group to create: each pod named ``<name>-<its name>`` (or ``<name>-<index>``), in
        ``namespace``, labelled with the group ``name`` and its role, annotated with the group's size,
        gated. A ``List`` of Pods."""
        pods = [p for p in (manifest.get("items") if manifest.get("kind") == "List" else [manifest]) or []
                if isinstance(p, dict)]
        if not pods:
            raise NotQueueable("the pod group manifest has no pods")
        names = shape_roles(shapes(pods))
        out: list[KubeObject] = []
        for i, pod in enumerate(pods):
            own = (pod.get("metadata") or {}).get("name")
            role = names[shape_key(pod)]
            created = fresh_manifest(POD, pod, name=f"{name}-{own or i}", namespace=namespace,
                                     labels={**labels, POD_GROUP: name, ROLE: role},
                                     annotations={**annotations, POD_GROUP_SIZE: str(len(pods))})
            created["spec"] = gated_template({"spec": pod_spec_of(created)}, {}, {})["spec"]
            out.append(created)
        return pod_group(out)

    def suspend_patch(self, obj: Mapping[str, Any]) -> Patch | None:
        return None

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        try:
            return [{POD_GROUP: self.group_name(obj)}]
        except NotQueueable:
            return []

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        try:
            if labels.get(POD_GROUP) != self.group_name(obj):
                return None
        except NotQueueable:
            return None
        return shape_roles(shapes(group_pods(obj))).get(shape_key(pod))

    def state(self, obj: Mapping[str, Any]) -> State:
        pods = group_pods(obj)
        phases = {str((p.get("metadata") or {}).get("name", "")): str((p.get("status") or {}).get("phase", ""))
                  for p in pods}
        failed = sorted(name for name, phase in phases.items() if phase == "Failed")
        if failed:
            return State("failed", "pod " + ", ".join(failed) + " failed")
        try:
            size = self.size(obj)
        except NotQueueable:
            size = len(pods)
        done = sum(phase == "Succeeded" for phase in phases.values())
        if pods and done >= size:
            return State("succeeded", f"all {done} pods succeeded")
        running = sum(phase == "Running" for phase in phases.values())
        if running or done:
            return State("running", f"{running} pods running, {done} succeeded")
        return State(None, "no pod running")


POD_GROUP_KIND = PodGroupKind()
