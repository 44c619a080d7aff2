"""Defaulting and validation of incoming objects, returning 422 Invalid like the API server."""

from __future__ import annotations

import copy
import re
from typing import Any

from services.kubesim.errors import invalid
from services.kubesim.meta import Obj, meta
from services.kubesim.resources import DEPLOYMENTS, JOBS, NAMESPACES, NODES, PODS, STATEFULSETS, ResourceType
from services.spec.quantity import parse_quantity

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")


def _name_causes(rt: ResourceType, obj: Obj) -> list[tuple[str, str]]:
    m = obj.get("metadata") or {}
    name = m.get("name")
    causes: list[tuple[str, str]] = []
    if not name and not m.get("generateName"):
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif name and (len(name) > 253 or not _SUBDOMAIN.match(str(name))):
        causes.append(("metadata.name", f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain is required"))
    for k, v in (m.get("labels") or {}).items():
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.match(v):
            causes.append((f"metadata.labels[{k}]", f"Invalid value: {v!r}: not a valid label value"))
    for k, v in (m.get("annotations") or {}).items():
        if not isinstance(v, str):
            causes.append((f"metadata.annotations[{k}]", "Invalid value: annotation values must be strings"))
    return causes


def _pod_spec_causes(spec: Any, path: str) -> list[tuple[str, str]]:
    if not isinstance(spec, dict):
        return [(path, "Required value")]
    causes: list[tuple[str, str]] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append((f"{path}.containers", "Required value"))
        containers = []
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            causes.append((f"{path}.containers[{i}]", "Invalid value: must be an object"))
            continue
        if not c.get("name"):
            causes.append((f"{path}.containers[{i}].name", "Required value"))
        if not c.get("image"):
            causes.append((f"{path}.containers[{i}].image", "Required value"))
        for kind in ("requests", "limits"):
            for res, qty in ((c.get("resources") or {}).get(kind) or {}).items():
                try:
                    parse_quantity(qty)
                except ValueError as exc:
                    causes.append((f"{path}.containers[{i}].resources.{kind}[{res}]", f"Invalid value: {exc}"))
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in _RESTART_POLICIES:
        causes.append((f"{path}.restartPolicy", f'Unsupported value: "{policy}"'))
    return causes


def _default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    for c in spec.get("containers") or []:
        if isinstance(c, dict):
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})


def _job_causes(obj: Obj) -> list[tuple[str, str]]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    template = spec.get("template")
    if not isinstance(template, dict):
        return [("spec.template", "Required value")]
    causes = _pod_spec_causes(template.get("spec"), "spec.template.spec")
    policy = (template.get("spec") or {}).get("restartPolicy") if isinstance(template.get("spec"), dict) else None
    if policy not in ("Never", "OnFailure"):
        causes.append(("spec.template.spec.restartPolicy", f'Unsupported value: "{policy}": supported values: '
                       '"OnFailure", "Never"'))
    for fld in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        v = spec.get(fld)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            causes.append((f"spec.{fld}", f"Invalid value: {v!r}: must be greater than or equal to 0"))
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        causes.append(("spec.completionMode", f'Unsupported value: "{mode}"'))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    return causes


def _apps_causes(obj: Obj) -> list[tuple[str, str]]:
    """A Deployment's or StatefulSet's: a selector, a pod template it selects, pods that restart (``Always``)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    causes: list[tuple[str, str]] = []
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        causes.append(("spec.selector", "Required value"))
        selector = {}
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*causes, ("spec.template", "Required value")]
    causes += _pod_spec_causes(template.get("spec"), "spec.template.spec")
    labels = (template.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        causes.append(("spec.template.metadata.labels", f"Invalid value: {labels!r}: `selector` does not match "
                                                        "template `labels`"))
    policy = (template.get("spec") or {}).get("restartPolicy") if isinstance(template.get("spec"), dict) else None
    if policy not in (None, "Always"):
        causes.append(("spec.template.spec.restartPolicy", f'Unsupported value: "{policy}": supported values: '
                       '"Always"'))
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0):
        causes.append(("spec.replicas", f"Invalid value: {replicas!r}: must be greater than or equal to 0"))
    return causes


def _default_job(obj: Obj) -> None:
    spec = obj["spec"]
    uid = obj["metadata"]["uid"]
    name = obj["metadata"]["name"]
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("manualSelector", False)
    selector_labels = {"batch.kubernetes.io/controller-uid": uid}
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": dict(selector_labels)}
    tmeta = spec["template"].setdefault("metadata", {})
    tlabels = tmeta.setdefault("labels", {})
    tlabels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )
    _default_pod_spec(spec["template"]["spec"])
    obj.setdefault("status", {})


def validate(rt: ResourceType, obj: Any) -> None:
    """Raise 422 Invalid for objects the API server would reject."""
    if not isinstance(obj, dict):
        raise invalid(rt.kind, "", [("", "Invalid value: body must be a JSON object")], rt.group)
    causes = _name_causes(rt, obj)
    if rt is PODS:
        causes += _pod_spec_causes(obj.get("spec"), "spec")
    elif rt is JOBS:
        causes += _job_causes(obj)
    elif rt in (DEPLOYMENTS, STATEFULSETS):
        causes += _apps_causes(obj)
    if causes:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise invalid(rt.kind, name, causes, rt.group)


def apply_defaults_before_create(rt: ResourceType, obj: Obj) -> None:
    """Defaults that need no server-assigned fields."""
    meta(obj)
    if rt is PODS:
        _default_pod_spec(obj["spec"])
        obj["status"] = {"phase": "Pending"}
    elif rt is NAMESPACES:
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
        meta(obj).setdefault("labels", {})["kubernetes.io/metadata.name"] = meta(obj).get("name", "")
    elif rt is NODES:
        obj.setdefault("spec", {})
        obj.setdefault("status", {})


def apply_defaults_after_create(rt: ResourceType, obj: Obj) -> bool:
    """Defaults that need the uid; returns True when the object changed."""
    if rt is JOBS:
        _default_job(obj)
        return True
    return False


def _fixed_pod_spec(spec: Obj) -> Obj:
    """The part of a pod's spec that no update may change (as the real API server's validation has it;
    ``nodeName`` is left to the binding check above, scheduling gates may be removed)."""
    fixed = copy.deepcopy(spec)
    for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "nodeName"):
        fixed.pop(key, None)
    for key in ("containers", "initContainers"):
        for container in fixed.get(key) or []:
            container.pop("image", None)
    return fixed


def check_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """Reject changes to immutable fields (422)."""
    causes: list[tuple[str, str]] = []
    name = str(old["metadata"]["name"])
    if rt is PODS:
        old_node, new_node = (old.get("spec") or {}).get("nodeName"), (new.get("spec") or {}).get("nodeName")
        if old_node and new_node != old_node:
            causes.append(("spec.nodeName", "Forbidden: pod updates may not change nodeName"))
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if old_spec.get("schedulingGates"):
            # a pod still held by scheduling gates may gain node-selector entries (never change or lose one):
            # Kubernetes' mutable scheduling directives, which is how a gated pod is given its node
            before, after = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
            if any(after.get(k) != v for k, v in before.items()):
                causes.append(("spec.nodeSelector", "Invalid value: only additions to spec.nodeSelector are "
                                                    "allowed while the pod has scheduling gates"))
            old_spec = {k: v for k, v in old_spec.items() if k != "nodeSelector"}
            new_spec = {k: v for k, v in new_spec.items() if k != "nodeSelector"}
        if _fixed_pod_spec(old_spec) != _fixed_pod_spec(new_spec):
            causes.append(("spec", "Forbidden: pod updates may not change fields other than "
                                   "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                                   "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                                   "tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if "
                                   "it was previously negative)"))
    elif rt is JOBS:
        for fld in ("selector", "completionMode"):
            if (old.get("spec") or {}).get(fld) != (new.get("spec") or {}).get(fld):
                causes.append((f"spec.{fld}", "Invalid value: field is immutable"))
        started = (old.get("status") or {}).get("startTime") is not None
        if started and (old.get("spec") or {}).get("template") != (new.get("spec") or {}).get("template"):
            causes.append(("spec.template", "Invalid value: field is immutable"))
    if causes:
        raise invalid(rt.kind, name, causes, rt.group)
