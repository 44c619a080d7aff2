"""A workload controller's manifests as Muster installs them: YAML files, kustomize folders (the
controller's own, rendered), and its webhook configurations with every ``clientConfig`` pointed at
``https://127.0.0.1:<port><path>`` and the controller's webhook CA as ``caBundle``. The controllers run
on this host, so the API server reaches them on loopback; no Service or EndpointSlice is involved.

Only what the controllers' folders use is rendered: ``resources`` (files and folders, recursively) and
``patches`` given as JSON patches (RFC 6902) with a ``target``. Anything else raises, rather than
installing something other than what the controller's own deployment installs.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

KubeObject = dict[str, Any]
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
HOST = "127.0.0.1"
#: kustomization fields that do not change the objects' content
_INERT = {"apiVersion", "kind", "resources", "patches", "configurations"}


class KustomizeError(ValueError):
    """A kustomization uses something this renderer does not do."""


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise KustomizeError(f"not a JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _child(node: Any, key: str) -> Any:
    return node[int(key)] if isinstance(node, list) else node[key]


def json_patch(obj: KubeObject, ops: list[dict[str, Any]]) -> KubeObject:
    """``obj`` with the RFC 6902 operations ``add``, ``replace`` and ``remove`` applied (a copy)."""
    out = copy.deepcopy(obj)
    for op in ops:
        *parents, last = _pointer(op["path"])
        node: Any = out
        for key in parents:
            node = _child(node, key)
        kind = op["op"]
        if kind == "remove":
            del node[int(last) if isinstance(node, list) else last]
        elif kind == "replace":
            _child(node, last)  # must exist
            node[int(last) if isinstance(node, list) else last] = copy.deepcopy(op["value"])
        elif kind == "add":
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), copy.deepcopy(op["value"]))
            else:
                node[last] = copy.deepcopy(op["value"])
        else:
            raise KustomizeError(f"JSON patch operation {kind!r} is not supported")
    return out


def _targets(obj: KubeObject, target: dict[str, str]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    wanted = {"group": group, "version": version, "kind": obj["kind"], "name": obj["metadata"]["name"]}
    return all(wanted.get(k) == v for k, v in target.items() if k in wanted)


def load(path: Path) -> list[KubeObject]:
    """The objects of a YAML file."""
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def render(folder: Path) -> list[KubeObject]:
    """The objects of the kustomization in ``folder``."""
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8")) or {}
    unknown = set(spec) - _INERT
    if unknown:
        raise KustomizeError(f"{folder / 'kustomization.yaml'} uses {sorted(unknown)}, which Muster does not render")
    objects: list[KubeObject] = []
    for resource in spec.get("resources") or []:
        path = folder / resource
        objects += render(path) if path.is_dir() else load(path)
    for patch in spec.get("patches") or []:
        ops = yaml.safe_load((folder / patch["path"]).read_text(encoding="utf-8"))
        if not isinstance(ops, list) or "target" not in patch:
            raise KustomizeError(f"{folder / patch['path']}: only targeted JSON patches are rendered")
        objects = [json_patch(o, ops) if _targets(o, patch["target"]) else o for o in objects]
    return objects


def webhook_configurations(folder: Path, name_prefix: str, port: int, ca_pem: bytes) -> list[KubeObject]:
    """The controller's webhook configurations from its kustomize ``folder``, named as its own deployment
    names them (``name_prefix``), each webhook called at ``https://127.0.0.1:<port><path>``."""
    bundle = base64.b64encode(ca_pem).decode()
    out: list[KubeObject] = []
    for obj in render(folder):
        if obj.get("kind") not in WEBHOOK_KINDS:
            continue
        obj["metadata"] = {"name": name_prefix + obj["metadata"]["name"]}
        for hook in obj.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service") or {}
            hook["clientConfig"] = {"url": f"https://{HOST}:{port}{service.get('path', '/')}", "caBundle": bundle}
        out.append(obj)
    return out
