"""The job spec a Kubernetes object of a workload kind describes (JobSet, TrainJob, RayJob, RayCluster,
LeaderWorkerSet, Deployment, StatefulSet, a group of Pods; ``services.spec.kinds``), and whether the roles a
spec declares beside a workload manifest are the manifest's own. Pure: objects in, a ``JobSpec`` out, or
``NotQueueable`` with a reason for the object's owner (one line, naming the field).

    spec_from_workload(obj, related, kube_native=True)     # the gateway's watch of held-back objects
    spec_from_workload(obj, related, queue="team-a", kube_native=False)   # muster submit FILE, the client

The spec:

- ``name``: ``metadata.name`` (a pod group's: its ``muster.dev/pod-group`` label);
- ``queue``: the given one, else the label ``muster.dev/queue``;
- ``priority_class``, ``runtime_estimate_s``, ``preemptible``: the annotations ``muster.dev/priority-class``,
  ``muster.dev/runtime-estimate``, ``muster.dev/preemptible``, as for ``batch/v1`` Jobs
  (``services.spec.kube_annotations``); ``muster.dev/plain-env`` marks plain environment entries that are no
  secrets;
- ``roles``: ``kind.roles(obj, related).roles`` (``related``: what ``kind.references(obj)`` names, e.g. a
  TrainJob's training runtime);
- ``workload``: kube-native, the existing object (apiVersion, kind, name, namespace, uid; a pod group has no
  uid of its own); through Muster, the object as ``manifest``, without what the API server owns
  (uid, resourceVersion, generation, timestamps, managedFields, ownerReferences, status).

A group of plain Pods is a ``v1`` ``List`` of them (``services.spec.kinds.pods``); its labels and annotations
are its first pod's (by name), and every pod that carries ``muster.dev/queue`` must name the same queue.
Submitted through Muster, a list of pods needs no group label or size annotation: the manifest gets them
(``workload_manifest``; the dispatcher renames the group after the job when it creates the pods).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from schemas.jobspec import JobSpec, RoleSpec, WorkloadObject
from schemas.kube import POD_GROUP, POD_GROUP_SIZE, PRIORITY_CLASS, QUEUE, RUNTIME_ESTIMATE
from services.spec.kinds import NotQueueable, WorkloadKind, kind_for, kind_of
from services.spec.kinds.base import SERVER_METADATA, describe
from services.spec.kinds.pods import POD_GROUP_KIND, group_pods
from services.spec.kube_annotations import submission_annotations
from services.spec.kube_pods import KubeObject

#: the refusal of a spec whose declared roles are not the ones its workload manifest makes
ROLES_DO_NOT_MATCH_WORKLOAD = "roles_do_not_match_workload"
#: the refusal of a spec whose workload manifest Muster cannot queue
WORKLOAD_NOT_QUEUEABLE = "workload_not_queueable"

#: where each field of the spec comes from in the object, for messages
_SOURCES = {
    "name": "metadata.name",
    "queue": f"label {QUEUE}",
    "priority_class": f"annotation {PRIORITY_CLASS}",
    "runtime_estimate_s": f"annotation {RUNTIME_ESTIMATE}",
    "workload": "the object's identity",
}


def is_kube_object(doc: object) -> bool:
    """Whether a document (a parsed YAML file) is a Kubernetes object rather than a job spec: it has
    ``apiVersion`` and ``kind``, which a job spec never has."""
    return isinstance(doc, Mapping) and "apiVersion" in doc and "kind" in doc


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """What names the object and what its owner wrote on it."""

    name: str
    namespace: str | None
    uid: str | None
    labels: dict[str, str]
    annotations: dict[str, str]


def _group_meta(obj: Mapping[str, Any]) -> ObjectMeta:
    pods = group_pods(obj)
    if not pods:
        raise NotQueueable(f"{describe(obj)} has no pods")
    first: Mapping[str, Any] = pods[0].get("metadata") or {}
    labels = dict(first.get("labels") or {})
    queues = {str(((p.get("metadata") or {}).get("labels") or {}).get(QUEUE)) for p in pods
              if QUEUE in ((p.get("metadata") or {}).get("labels") or {})}
    if len(queues) > 1:
        raise NotQueueable(f"{describe(obj)}: its pods name different queues in {QUEUE} ({', '.join(sorted(queues))})")
    if queues:
        labels[QUEUE] = next(iter(queues))
    name = str(labels.get(POD_GROUP) or first.get("name") or "")
    return ObjectMeta(name, first.get("namespace"), None, labels, dict(first.get("annotations") or {}))


def object_meta(obj: Mapping[str, Any]) -> ObjectMeta:
    """The object's name, namespace, uid, labels and annotations (a pod group's: see the module)."""
    if kind_of(obj) is POD_GROUP_KIND:
        return _group_meta(obj)
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise NotQueueable(f"{describe(obj)}: metadata.name is missing")
    return ObjectMeta(str(meta["name"]), meta.get("namespace"), meta.get("uid"), dict(meta.get("labels") or {}),
                      dict(meta.get("annotations") or {}))


def _readable(kind: WorkloadKind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object as its kind reads it: a list of pods none of which names its group (one submitted through
    Muster, which groups them itself) gets the group label and size annotation on a copy."""
    if kind is not POD_GROUP_KIND:
        return obj
    pods = group_pods(obj)
    if not pods or any(POD_GROUP in ((p.get("metadata") or {}).get("labels") or {}) for p in pods):
        return obj
    name = str((pods[0].get("metadata") or {}).get("name") or "pods")
    grouped = copy.deepcopy(pods)
    for pod in grouped:
        meta = pod.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), POD_GROUP: name}
        meta["annotations"] = {**(meta.get("annotations") or {}), POD_GROUP_SIZE: str(len(grouped))}
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": grouped}


def workload_roles(obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[RoleSpec]:
    """The roles the object makes (``kind.roles``); ``NotQueueable`` (``UnknownKind`` for a kind Muster does
    not know, ``GroupIncomplete`` for a pod group still missing pods) says why not."""
    kind = kind_of(obj)
    return kind.roles(_readable(kind, obj), related).roles


def manifest_of(obj: Mapping[str, Any]) -> KubeObject:
    """A deep copy of the object without what the API server owns (see ``SERVER_METADATA``) and its status;
    a list's pods each so."""
    out: KubeObject = copy.deepcopy(dict(obj))
    out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in SERVER_METADATA:
            meta.pop(key, None)
    if out.get("kind") == "List":
        out["items"] = [manifest_of(item) for item in out.get("items") or [] if isinstance(item, Mapping)]
    return out


def workload_manifest(obj: Mapping[str, Any]) -> KubeObject:
    """The manifest a job submitted through Muster carries: the object without what the server owns
    (``manifest_of``); a list of pods none of which names its group gets the group label (its first pod's
    name) and size annotation, so that every reader of the manifest reads the same roles (the dispatcher
    names the group after the job when it creates the pods)."""
    return manifest_of(_readable(kind_of(obj), obj))


def spec_error(obj: Mapping[str, Any], exc: ValidationError) -> NotQueueable:
    """A pydantic error of the spec as one line naming the field (and where in the object it came from)."""
    first = exc.errors()[0]
    loc = [str(p) for p in first["loc"]]
    where = ".".join(loc) or "spec"
    source = _SOURCES.get(loc[0]) if loc else None
    named = f"{where} ({source})" if source else where
    return NotQueueable(f"{describe(obj)}: {named}: {first['msg']}")


def spec_from_workload(obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = (), *,
                       queue: str | None = None, kube_native: bool) -> JobSpec:
    """The job spec the object describes (see the module); ``NotQueueable`` says why there is none."""
    kind = kind_of(obj)
    meta = object_meta(obj)
    chosen = queue or meta.labels.get(QUEUE)
    if not chosen:
        raise NotQueueable(f"{describe(obj)} names no queue: label it {QUEUE}: <queue> (or name the queue when "
                           "submitting it)")
    try:
        fields = submission_annotations(meta.annotations)
    except ValueError as exc:
        raise NotQueueable(f"{describe(obj)}: {exc}") from None
    roles = kind.roles(_readable(kind, obj), related).roles
    identity = kind.identity
    try:
        if kube_native:
            workload = WorkloadObject(api_version=identity.api_version, kind=identity.kind, name=meta.name,
                                      namespace=meta.namespace or "default", uid=meta.uid or None)
        else:
            workload = WorkloadObject(api_version=identity.api_version, kind=identity.kind,
                                      manifest=workload_manifest(obj))
        return JobSpec(name=meta.name, queue=chosen, priority_class=fields.priority_class,
                       runtime_estimate_s=fields.runtime_estimate_s, preemptible=fields.preemptible, roles=roles,
                       workload=workload, idle_timeout_s=fields.idle_timeout_s)
    except ValidationError as exc:
        raise spec_error(obj, exc) from None


# -- a spec's declared roles against its manifest ----------------------------------------------------

def manifest_object(api_version: str, kind: str, manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """The manifest of a ``WorkloadObject`` as an object of its kind: apiVersion and kind set where it leaves
    them out (a ``List`` of Pods stays a list)."""
    if manifest.get("kind") == "List":
        return manifest
    return {**manifest, "apiVersion": manifest.get("apiVersion") or api_version, "kind": manifest.get("kind") or kind}


def _differences(given: object, derived: object, path: str, out: list[str]) -> None:
    if given == derived:
        return
    if isinstance(given, dict) and isinstance(derived, dict):
        for key in sorted(given.keys() | derived.keys(), key=str):
            _differences(given.get(key), derived.get(key), f"{path}.{key}" if path else str(key), out)
        return
    out.append(f"{path or 'role'}: {given!r} given, the manifest says {derived!r}")


def _comparable(role: RoleSpec) -> dict[str, Any]:
    """What of a declared role must be the manifest's: everything but ``topology`` (a manifest cannot say it)."""
    return role.model_dump(mode="json", exclude={"topology"})


def roles_mismatch(spec: JobSpec, related: Sequence[Mapping[str, Any]] = ()) -> tuple[str, str] | None:
    """(reason, message) when a spec with ``workload.manifest`` declares roles other than the ones the manifest
    makes (``roles_do_not_match_workload``: pods, resources, image, environment or security of a role differ,
    or a role is missing or extra; a role's ``topology`` may be added), or when the manifest cannot be queued
    (``workload_not_queueable``). None when they match, when the spec has no manifest, or when the manifest's
    kind needs objects not given in ``related`` (a TrainJob's runtime lives in the cluster: the dispatcher
    compares the roles when it creates the object)."""
    workload = spec.workload
    if workload is None or workload.manifest is None:
        return None
    obj = manifest_object(workload.api_version, workload.kind, workload.manifest)
    try:
        kind = kind_for(workload.api_version, workload.kind)
        if kind.references(obj) and not related:
            return None
        derived = kind.roles(_readable(kind, obj), related).roles
    except NotQueueable as exc:
        return WORKLOAD_NOT_QUEUEABLE, exc.reason
    given = {r.name: _comparable(r) for r in spec.pod_roles()}
    made = {r.name: _comparable(r) for r in derived}
    who = describe(obj)
    if given.keys() != made.keys():
        return ROLES_DO_NOT_MATCH_WORKLOAD, (
            f"the spec declares roles {', '.join(given) or 'none'}, but {who} makes {', '.join(made)}; leave roles "
            "out and Muster reads them from the manifest")
    diffs: list[str] = []
    for name in made:
        _differences(given[name], made[name], name, diffs)
    if not diffs:
        return None
    more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
    return ROLES_DO_NOT_MATCH_WORKLOAD, (
        f"the declared roles are not what {who} makes: {'; '.join(diffs[:3])}{more}; leave roles out and Muster "
        "reads them from the manifest")
