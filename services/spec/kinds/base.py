"""What every workload kind shares: its identity, its pod sets, the roles Muster queues, holding it back
(``spec.suspend`` or the scheduling gate ``muster.dev/admission`` in every pod template), releasing it, and
reading its state. Each kind's module subclasses ``WorkloadKind`` and says where its pod sets are; the
generic parts (roles, the gate check, the release patch, the held-back manifest) are here.

Pure: objects are the plain ``dict``s the API server sends; nothing here does I/O.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

import jsonpatch
from pydantic import ValidationError

from schemas.jobspec import MAX_ROLES, RoleSpec
from schemas.kube import ADMISSION_GATE, HOSTNAME_LABEL, POD_GROUP, ROLE
from services.spec.kinds.names import role_name
from services.spec.kinds.patching import (
    JsonPatch,
    Path,
    dotted,
    gated_template,
    get_at,
    map_ops,
    pointer,
    set_at,
    template_ops,
)
from services.spec.kube_pods import KubeObject, plain_env_names, pod_spec_of, pod_template, scheduling_gates


def _most_pods() -> int:
    for constraint in RoleSpec.model_fields["replicas"].metadata:
        bound = getattr(constraint, "le", None)
        if isinstance(bound, int):
            return bound
    return 4096


#: a role's pods at most (the bound of ``RoleSpec.replicas``)
MAX_ROLE_PODS = _most_pods()

Phase = Literal["running", "succeeded", "failed"]

#: metadata the API server owns; a manifest Muster creates must not carry it
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "managedFields", "selfLink", "ownerReferences")


class NotQueueable(ValueError):
    """Muster cannot queue this object; ``reason`` (also ``str(exc)``) says why, for the object's owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GroupIncomplete(NotQueueable):
    """A pod group whose pods are not all created yet: wait for the rest, do not refuse."""


class UnknownKind(NotQueueable):
    """No workload kind Muster knows has this apiVersion and kind."""


@dataclass(frozen=True, slots=True)
class KindIdentity:
    """A Kubernetes resource type as the REST API names it."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Another object a kind needs in order to read its roles (a TrainJob's training runtime)."""

    identity: KindIdentity
    name: str
    namespace: str | None = None  # None: cluster-scoped

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        return (self.identity.matches(obj) and meta.get("name") == self.name
                and (self.namespace is None or meta.get("namespace") in (None, self.namespace)))

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.identity.kind} {where}{self.name}"


@dataclass(frozen=True, slots=True)
class PodSet:
    """One pod set of an object as its kind defines it (a replicatedJob, a Ray worker group, an LWS leader).

    ``template`` is the ``PodTemplateSpec`` (``metadata`` + ``spec``) its pods are made from; ``path`` is where
    that template lives in the object (``None``: not in the object, e.g. a TrainJob's pod sets live in its
    runtime); ``present`` False means the kind's controller uses a default template that the object does
    not spell out yet (RayJob's submitter), which a release writes at ``path``. ``guards`` are
    ``(path, value)`` pairs a JSON patch tests before touching ``path`` (the name at a list index).
    ``extra_containers`` are containers the controller adds to the pods (counted in the resources only);
    ``named`` is the role's name when it is not ``role_name(name)`` (a pod group's shapes)."""

    name: str
    count: int
    template: KubeObject
    what: str  # for messages: "replicatedJob workers"
    path: Path | None = None
    present: bool = True
    guards: tuple[tuple[Path, Any], ...] = ()
    extra_containers: tuple[KubeObject, ...] = ()
    named: str | None = None

    @property
    def role(self) -> str:
        return self.named or role_name(self.name)

    @property
    def gated(self) -> bool:
        return self.present and ADMISSION_GATE in scheduling_gates(pod_spec_of(self.template))

    def reading_spec(self) -> KubeObject:
        """The pod spec whose resources the pods ask for (with the controller's extra containers)."""
        spec = pod_spec_of(self.template)
        if not self.extra_containers:
            return spec
        return {**spec, "containers": [*(spec.get("containers") or []), *self.extra_containers]}


@dataclass(frozen=True, slots=True)
class RolePlan:
    """An object's roles, in the kind's order, and which pod set of the kind each role is."""

    roles: list[RoleSpec]
    pod_sets: dict[str, str] = field(default_factory=dict)  # role name -> the kind's own pod-set name

    def role_of(self, pod_set: str) -> str | None:
        return next((role for role, name in self.pod_sets.items() if name == pod_set), None)


@dataclass(frozen=True, slots=True)
class Patch:
    """One PATCH request: a JSON merge patch (RFC 7386, ``type="merge"``, a dict) or a JSON patch (RFC 6902,
    ``type="json"``, a list of operations, used where the change is inside a list, which a merge patch can
    only replace whole)."""

    type: Literal["merge", "json"]
    body: dict[str, Any] | JsonPatch

    @property
    def content_type(self) -> str:
        return "application/merge-patch+json" if self.type == "merge" else "application/json-patch+json"


class State(NamedTuple):
    """What the object's status says: ``running``, ``succeeded``, ``failed``, or ``None`` (not started,
    suspended, or nothing conclusive), and why."""

    phase: Phase | None
    reason: str


def describe(obj: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` for messages (``pod group namespace/name`` for a list of grouped pods)."""
    if obj.get("kind") == "List":
        items = [i for i in obj.get("items") or [] if isinstance(i, dict)]
        first = (items[0].get("metadata") or {}) if items else {}
        where = f"{first['namespace']}/" if first.get("namespace") else ""
        return f"pod group {where}{(first.get('labels') or {}).get(POD_GROUP, '<unnamed>')}"
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', 'object')} {where}{meta.get('name', '<unnamed>')}"


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def spec_of(obj: Mapping[str, Any]) -> KubeObject:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def count_of(value: object, default: int) -> int:
    """An integer field (``replicas``, ``parallelism``) or its default when absent."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not a count: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"not a count: {value!r}") from None


def true_condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of this type when its status is ``True``."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def ended_by_conditions(obj: Mapping[str, Any], done: str = "Complete") -> State | None:
    """``succeeded`` or ``failed`` when the object's ``done`` or ``Failed`` condition is true (the Job and
    TrainJob way of saying it ended), else None."""
    if (cond := true_condition(obj, done)) is not None:
        return State("succeeded", condition_reason(cond))
    if (cond := true_condition(obj, "Failed")) is not None:
        return State("failed", condition_reason(cond))
    return None


def condition_reason(cond: Mapping[str, Any]) -> str:
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
    return f"{reason}: {message}" if reason and message else reason or message or str(cond.get("type", ""))


def match_labels(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a ``LabelSelector`` (``matchLabels`` and ``matchExpressions``) selects these labels."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class WorkloadKind(ABC):
    """One kind of object Muster queues. Subclasses give ``identity``, ``suspendable`` and ``pod_sets``,
    ``pod_selectors``, ``pod_role`` and ``state``; a kind whose templates do not live in the object
    (TrainJob) or that is not one object (a pod group) overrides the rest.

    ``related`` is what ``references`` names, fetched by the caller (a TrainJob's runtime)."""

    identity: ClassVar[KindIdentity]
    #: held back by ``spec.suspend`` (True) or only by the gate in every pod template (False)
    suspendable: ClassVar[bool]
    #: a serving or interactive kind: its status never says it ended
    serving: ClassVar[bool] = False

    # -- reading ---------------------------------------------------------------------------------------
    def references(self, obj: Mapping[str, Any]) -> list[ObjectRef]:
        """Other objects ``roles`` needs (passed back as ``related``)."""
        return []

    def check(self, obj: Mapping[str, Any]) -> None:
        """Raise ``NotQueueable`` for an object Muster cannot queue although its pod sets read well."""
        return None

    @abstractmethod
    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        """The object's pod sets in the kind's order, with their pod counts (possibly 0)."""

    def read_pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        """``pod_sets``, a malformed object (a manifest; the API server's objects are typed) refused with
        ``NotQueueable`` rather than crashing."""
        try:
            return self.pod_sets(obj, related)
        except NotQueueable:
            raise
        except (ValueError, AttributeError, KeyError, TypeError, IndexError) as exc:
            raise NotQueueable(f"{describe(obj)}: unreadable: {exc}") from None

    def roles(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> RolePlan:
        """The roles Muster queues: one per pod set that makes pods. ``NotQueueable`` says why not."""
        try:
            self.check(obj)
        except NotQueueable:
            raise
        except (ValueError, AttributeError, KeyError, TypeError, IndexError) as exc:
            raise NotQueueable(f"{describe(obj)}: unreadable: {exc}") from None
        return plan_roles(obj, [s for s in self.read_pod_sets(obj, related) if s.count > 0])

    # -- holding back and releasing --------------------------------------------------------------------
    def suspended(self, obj: Mapping[str, Any]) -> bool:
        return self.suspendable and spec_of(obj).get("suspend") is True

    def why_not_held(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> str | None:
        """None when the object is held back (suspended, or the gate in every pod template); else why not,
        for its owner."""
        if self.suspended(obj):
            return None
        try:
            sets = self.read_pod_sets(obj, related)
        except NotQueueable as exc:
            return exc.reason
        missing = [s for s in sets if not s.gated]
        if not missing:
            return None
        return not_held_reason(self, obj, missing)

    def held(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> bool:
        return self.why_not_held(obj, related) is None

    def release_patch(self, obj: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> tuple[Patch, ...] | None:
        """The patches, applied in order while the object is still held, that put the gate, ``labels``,
        ``annotations`` and the role label ``muster.dev/role`` into every pod template and unsuspend it.
        None for a kind that cannot be suspended (its templates carry the gate already: nothing to patch).

        Default: one JSON patch (RFC 6902). The templates are inside lists (``replicatedJobs``,
        ``workerGroupSpecs``) and ``schedulingGates`` is a list: a merge patch would have to replace those
        lists whole; the JSON patch adds to them in place, and ``test`` operations first check that each
        list index still holds the pod set it was computed for. Applying it again changes nothing more."""
        if not self.suspendable:
            return None
        ops: JsonPatch = []
        for s in self.read_pod_sets(obj, related):
            if s.path is None:
                continue
            for where, value in s.guards:
                ops.append({"op": "test", "path": pointer(where), "value": value})
            role_labels = {**labels, ROLE: s.role}
            if s.present:
                ops.extend(template_ops(s.path, s.template, role_labels, annotations))
            else:
                ops.append({"op": "add", "path": pointer(s.path),
                            "value": gated_template(s.template, role_labels, annotations)})
        ops.append({"op": "add", "path": "/spec/suspend", "value": False})
        return (Patch("json", ops),)

    def suspend_patch(self, obj: Mapping[str, Any]) -> Patch | None:
        """The merge patch that suspends the object (its controller then deletes its pods; the gate stays in
        the templates). None for a kind that cannot be suspended: the caller deletes its pods instead."""
        return Patch("merge", {"spec": {"suspend": True}}) if self.suspendable else None

    def hold_manifest(self, manifest: Mapping[str, Any], *, name: str, namespace: str,
                      labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> KubeObject:
        """The object Muster creates for a job submitted with ``workload.manifest``: named ``name`` in
        ``namespace``, ``labels`` and ``annotations`` on it and on every pod template with the gate and the
        role label, not suspended (its pods are created gated and released onto the admitted nodes)."""
        obj = fresh_manifest(self.identity, manifest, name=name, namespace=namespace, labels=labels,
                             annotations=annotations)
        for s in self.read_pod_sets(obj, related):
            if s.path is None:
                continue
            set_at(obj, s.path, gated_template(s.template, {**labels, ROLE: s.role}, annotations))
        if self.suspendable:
            obj.setdefault("spec", {})["suspend"] = False
        return obj

    # -- after release ---------------------------------------------------------------------------------
    @abstractmethod
    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        """Label selectors (equality only) that together select the object's pods: a pod of the object
        matches at least one. Empty when the status does not tell yet (a RayJob before its cluster)."""

    @abstractmethod
    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        """The role of one pod the kind's controller created for this object; None when it is not one."""

    @abstractmethod
    def state(self, obj: Mapping[str, Any]) -> State:
        """What the object's status says about its run."""


def not_held_reason(kind: WorkloadKind, obj: Mapping[str, Any], missing: Sequence[PodSet]) -> str:
    where = "; ".join(f"{s.what} ({dotted(s.path) + '.spec' if s.path else 'its pod spec'}.schedulingGates)"
                      for s in missing)
    gate = f"[{{name: {ADMISSION_GATE}}}]"
    if kind.suspendable:
        return (f"{describe(obj)} is not held back: create it with spec.suspend: true (or with the scheduling "
                f"gate {gate} in every pod template); not gated: {where}")
    return (f"{describe(obj)} cannot be suspended, so its pods must be created held back: give every pod template "
            f"the scheduling gate {gate}; missing in {where}")


def plan_roles(obj: Mapping[str, Any], sets: Sequence[PodSet]) -> RolePlan:
    """Roles from pod sets that make pods: names (``role_name``), at most ``MAX_ROLES``, each pod set's
    template read as ``kube_pods.pod_template``; one GPU type over the roles that ask for GPUs."""
    who = describe(obj)
    if not sets:
        raise NotQueueable(f"{who} makes no pods: nothing to queue")
    if len(sets) > MAX_ROLES:
        listed = ", ".join(s.name for s in sets)
        raise NotQueueable(f"{who} has {len(sets)} pod sets ({listed}); a Muster job has at most {MAX_ROLES} roles")
    plain_ok = plain_env_names(annotations_of(obj))
    roles: list[RoleSpec] = []
    names: dict[str, str] = {}
    seen: dict[str, str] = {}  # role -> what made it
    for s in sets:
        role = s.role
        if role in seen:
            raise NotQueueable(f"{who}: {seen[role]} and {s.what} would both be role {role!r}; rename one")
        seen[role] = s.what
        if s.count > MAX_ROLE_PODS:
            raise NotQueueable(f"{who}: {s.what} makes {s.count} pods; a role has at most {MAX_ROLE_PODS}")
        try:
            template = pod_template(s.reading_spec(), plain_ok)
            roles.append(RoleSpec(name=role, replicas=s.count, template=template))
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(p) for p in first["loc"])
            raise NotQueueable(f"{who}: {s.what}: {at}: {first['msg']}") from None
        except (ValueError, AttributeError, KeyError, TypeError) as exc:
            raise NotQueueable(f"{who}: {s.what}: {exc}") from None
        names[role] = s.name
    types = {r.template.resources.gpu_type for r in roles if r.template.resources.gpus}
    if len(types) > 1:
        asks = ", ".join(f"{r.name}: {r.template.resources.gpu_type or 'any'}" for r in roles
                         if r.template.resources.gpus)
        raise NotQueueable(f"{who}: the roles that ask for GPUs ask for different GPU types ({asks}); "
                           "give every GPU pod template the same muster.dev/gpu-type node selector")
    return RolePlan(roles=roles, pod_sets=names)


def fresh_manifest(identity: KindIdentity, manifest: Mapping[str, Any], *, name: str, namespace: str,
                   labels: Mapping[str, str], annotations: Mapping[str, str]) -> KubeObject:
    """A deep copy of ``manifest`` to create: apiVersion and kind set, metadata the server owns and status
    dropped, named ``name`` in ``namespace``, with ``labels`` and ``annotations`` added."""
    obj: KubeObject = copy.deepcopy(dict(manifest))
    if obj.get("kind", identity.kind) != identity.kind:
        raise NotQueueable(f"the manifest is a {obj.get('kind')}, not a {identity.kind}")
    obj["apiVersion"], obj["kind"] = identity.api_version, identity.kind
    obj.pop("status", None)
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    for key in (*SERVER_METADATA, "generateName"):
        meta.pop(key, None)
    meta["name"], meta["namespace"] = name, namespace
    if labels:
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    obj["metadata"] = meta
    return obj


def template_at(obj: Mapping[str, Any], path: Path) -> tuple[KubeObject, bool]:
    """The pod template at ``path`` and whether it is there."""
    found = get_at(obj, path)
    return (found, True) if isinstance(found, dict) else ({}, False)


def released_pod(pod: Mapping[str, Any], node: str, labels: Mapping[str, str],
                 tolerations: Sequence[Mapping[str, Any]] = ()) -> KubeObject:
    """A gated pod not yet created, as ``ungate_pod_patch`` would leave it once created: what Muster creates
    when it makes a workload's pods itself, so that they need no release afterwards. Pure."""
    ops = ungate_pod_patch(pod, node, labels, tolerations=tolerations).body
    assert isinstance(ops, list)  # a JSON patch
    patched: KubeObject = jsonpatch.apply_patch(pod, ops)  # a copy: ``pod`` is left as it is
    return patched


def ungate_pod_patch(pod: Mapping[str, Any], node: str, labels: Mapping[str, str],
                     annotations: Mapping[str, str] | None = None,
                     tolerations: Sequence[Mapping[str, Any]] = ()) -> Patch:
    """The JSON patch that releases one gated pod onto ``node``: ``nodeSelector`` on the node's hostname
    (Kubernetes lets a gated pod gain node-selector entries, never change one), ``labels`` and
    ``annotations``, the ``tolerations`` it lacks added (any pod may gain tolerations: the taints of the node
    Muster chose for it, such as the GPU taint), and the gate removed (tested first, so a pod whose gates
    changed since it was read is not patched blindly). ``ValueError`` when the pod is not gated or already
    selects another node."""
    spec = pod_spec_of(pod)
    gates = spec.get("schedulingGates") or []
    index = next((i for i, g in enumerate(gates) if isinstance(g, dict) and g.get("name") == ADMISSION_GATE), None)
    if index is None:
        raise ValueError(f"pod {(pod.get('metadata') or {}).get('name')} is not gated by {ADMISSION_GATE}")
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and selector.get(HOSTNAME_LABEL) not in (None, node):
        raise ValueError(f"pod {(pod.get('metadata') or {}).get('name')} already selects node "
                         f"{selector[HOSTNAME_LABEL]}, not {node}")
    meta = pod.get("metadata") or {}
    ops: JsonPatch = [*map_ops(("spec", "nodeSelector"), selector, {HOSTNAME_LABEL: node}),
                      *map_ops(("metadata", "labels"), meta.get("labels"), labels),
                      *map_ops(("metadata", "annotations"), meta.get("annotations"), annotations or {})]
    have = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    missing = [dict(t) for t in tolerations if dict(t) not in have]
    if missing:
        if "tolerations" in spec:
            ops.extend({"op": "add", "path": "/spec/tolerations/-", "value": t} for t in missing)
        else:
            ops.append({"op": "add", "path": "/spec/tolerations", "value": missing})
    ops += [{"op": "test", "path": pointer(("spec", "schedulingGates", index)), "value": gates[index]},
            {"op": "remove", "path": pointer(("spec", "schedulingGates", index))}]
    return Patch("json", ops)
