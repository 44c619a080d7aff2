"""Server-side ``meta.k8s.io/v1`` Table output, as ``kubectl get`` asks for it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from schemas.kube import GPU_RESOURCE
from services.kubesim.meta import Obj, condition_true
from services.kubesim.nodes import node_ready
from services.spec.durations import human_duration

Column = tuple[str, str, Callable[[Obj], Any]]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def _created(o: Obj) -> str:
    return _age(o["metadata"].get("creationTimestamp"))


def pod_status(pod: Obj) -> str:
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    phase = status.get("phase", "Pending")
    if phase == "Succeeded":
        return "Completed"
    if phase == "Failed":
        return str(status.get("reason") or "Error")
    if phase == "Pending" and (pod.get("spec") or {}).get("nodeName"):
        return "ContainerCreating"
    return str(phase)


def _pod_ready(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _job_status(job: Obj) -> str:
    for ctype in ("Complete", "Failed", "Suspended"):
        if condition_true(job, ctype):
            return ctype
    return "Running"


def _job_completions(job: Obj) -> str:
    completions = (job.get("spec") or {}).get("completions")
    succeeded = (job.get("status") or {}).get("succeeded", 0)
    return f"{succeeded}/{completions if completions is not None else 1}"


COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        ("Ready", "string", _pod_ready),
        ("Status", "string", pod_status),
        ("Restarts", "string", lambda p: str(sum(s.get("restartCount", 0)
                                                 for s in (p.get("status") or {}).get("containerStatuses") or []))),
        ("Age", "string", _created),
        ("IP", "string", lambda p: (p.get("status") or {}).get("podIP") or "<none>"),
        ("Node", "string", lambda p: (p.get("spec") or {}).get("nodeName") or "<none>"),
    ],
    "Node": [
        ("Status", "string", lambda n: "Ready" if node_ready(n) else "NotReady"),
        ("Roles", "string", lambda n: "<none>"),
        ("Age", "string", _created),
        ("Version", "string", lambda n: ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")),
        ("GPUs", "string", lambda n: ((n.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE, "0")),
    ],
    "Job": [
        ("Status", "string", _job_status),
        ("Completions", "string", _job_completions),
        ("Age", "string", _created),
    ],
    "Namespace": [
        ("Status", "string", lambda n: (n.get("status") or {}).get("phase", "Active")),
        ("Age", "string", _created),
    ],
    "Event": [
        ("Last Seen", "string", lambda e: _age(e.get("lastTimestamp"))),
        ("Type", "string", lambda e: e.get("type", "")),
        ("Reason", "string", lambda e: e.get("reason", "")),
        ("Object", "string", lambda e: f"{(e.get('involvedObject') or {}).get('kind', '').lower()}/"
                                       f"{(e.get('involvedObject') or {}).get('name', '')}"),
        ("Message", "string", lambda e: e.get("message", "")),
    ],
    "Lease": [
        ("Holder", "string", lambda lease: (lease.get("spec") or {}).get("holderIdentity") or ""),
        ("Age", "string", _created),
    ],
}


def table(kind: str, items: list[Obj], list_meta: dict[str, Any], include_object: str = "Object",
          with_columns: bool = True) -> dict[str, Any]:
    """A Table of ``items``; each row carries the object unless ``include_object`` is ``None``."""
    columns = COLUMNS.get(kind, [("Age", "string", _created)])
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
    definitions += [{"name": n, "type": t, "format": "", "description": n, "priority": 0} for n, t, _ in columns]
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"]] + [fn(obj) for _, _, fn in columns]}
        if include_object != "None":
            row["object"] = obj
        rows.append(row)
    out: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "rows": rows}
    if with_columns:
        out["columnDefinitions"] = definitions
    return out
