"""Paths into objects, JSON patch operations (RFC 6902) and the gated copy of a pod template.

A path is a tuple of keys and list indexes (``("spec", "replicatedJobs", 0, "template")``); ``pointer``
writes it as a JSON pointer (RFC 6901), ``dotted`` as a reader would (``spec.replicatedJobs[0].template``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from schemas.kube import ADMISSION_GATE

Path = tuple[str | int, ...]
JsonPatch = list[dict[str, Any]]


def pointer(path: Path) -> str:
    return "".join("/" + str(token).replace("~", "~0").replace("/", "~1") for token in path)


def dotted(path: Path) -> str:
    text = ""
    for token in path:
        text += f"[{token}]" if isinstance(token, int) else (f".{token}" if text else token)
    return text


def get_at(obj: Any, path: Path) -> Any:
    """The value at ``path``, or None when some step is missing."""
    for token in path:
        if isinstance(token, int):
            if not isinstance(obj, list) or not -len(obj) <= token < len(obj):
                return None
            obj = obj[token]
        else:
            if not isinstance(obj, dict):
                return None
            obj = obj.get(token)
    return obj


def set_at(obj: dict[str, Any], path: Path, value: Any) -> None:
    """Set the value at ``path``, creating the maps on the way (list indexes must exist)."""
    here: Any = obj
    for i, token in enumerate(path[:-1]):
        if isinstance(token, int):
            here = here[token]
            continue
        if not isinstance(here.get(token), dict | list):
            here[token] = [] if isinstance(path[i + 1], int) else {}
        here = here[token]
    here[path[-1]] = value


def gate_entry() -> dict[str, str]:
    return {"name": ADMISSION_GATE}


def gated_template(template: Mapping[str, Any], labels: Mapping[str, str],
                   annotations: Mapping[str, str]) -> dict[str, Any]:
    """A copy of a ``PodTemplateSpec`` with the gate (once), ``labels`` and ``annotations`` added."""
    out: dict[str, Any] = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    if labels:
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    spec = out.setdefault("spec", {})
    gates = [g for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
    if not any(g.get("name") == ADMISSION_GATE for g in gates):
        gates.append(gate_entry())
    spec["schedulingGates"] = gates
    return out


def map_ops(path: Path, current: Any, wanted: Mapping[str, str]) -> list[dict[str, Any]]:
    """Operations that give the map at ``path`` (currently ``current``) the entries of ``wanted``."""
    if not wanted:
        return []
    if not isinstance(current, dict):
        return [{"op": "add", "path": pointer(path), "value": dict(sorted(wanted.items()))}]
    return [{"op": "add", "path": pointer((*path, key)), "value": value}
            for key, value in sorted(wanted.items()) if current.get(key) != value]


def template_ops(path: Path, template: Mapping[str, Any], labels: Mapping[str, str],
                 annotations: Mapping[str, str]) -> list[dict[str, Any]]:
    """JSON patch operations that add the gate (once), ``labels`` and ``annotations`` to the pod template at
    ``path`` whose current value is ``template``. ``add`` needs the parent to exist, so a missing map or
    list is added whole; an existing one gets its new entries one by one (nothing else in it changes)."""
    ops: list[dict[str, Any]] = []
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        wanted = {k: dict(sorted(v.items())) for k, v in (("labels", labels), ("annotations", annotations)) if v}
        if wanted:
            ops.append({"op": "add", "path": pointer((*path, "metadata")), "value": wanted})
    else:
        ops += map_ops((*path, "metadata", "labels"), meta.get("labels"), labels)
        ops += map_ops((*path, "metadata", "annotations"), meta.get("annotations"), annotations)
    spec = template.get("spec")
    if not isinstance(spec, dict):
        ops.append({"op": "add", "path": pointer((*path, "spec")), "value": {"schedulingGates": [gate_entry()]}})
        return ops
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list) or not gates:
        ops.append({"op": "add", "path": pointer((*path, "spec", "schedulingGates")), "value": [gate_entry()]})
    elif not any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates):
        ops.append({"op": "add", "path": pointer((*path, "spec", "schedulingGates", "-")), "value": gate_entry()})
    return ops
