"""The example objects of ``examples/kube`` and small pods, for the workload-kind table tests."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from services.spec.kinds import Patch
from services.spec.merge_patch import merge_patch

ROOT = Path(__file__).resolve().parents[3]
KUBE = ROOT / "examples" / "kube"

#: what the dispatcher would put on the templates and pods of an admitted job
LABELS = {"muster.dev/job-id": "job-7f3a9c2e", "muster.dev/attempt": "0"}
ANNOTATIONS = {"muster.dev/correlation-id": "corr-1"}
GATE = {"name": "muster.dev/admission"}


@cache
def _load(name: str) -> Any:
    return yaml.safe_load((KUBE / name).read_text(encoding="utf-8"))


def example(name: str) -> dict[str, Any]:
    """A fresh copy of ``examples/kube/<name>``."""
    obj: dict[str, Any] = copy.deepcopy(_load(name))
    return obj


def runtime() -> dict[str, Any]:
    """The torch-distributed ClusterTrainingRuntime the example TrainJob names."""
    return example("torch-distributed-runtime.yaml")


def applied(obj: dict[str, Any], patches: Sequence[Patch]) -> dict[str, Any]:
    """``obj`` with the patches applied in order, as the API server would."""
    out = copy.deepcopy(obj)
    for patch in patches:
        out = jsonpatch.apply_patch(out, patch.body) if patch.type == "json" else merge_patch(out, patch.body)
    return out


def pod(name: str, labels: dict[str, str], *, namespace: str = "team-a", owners: Sequence[dict[str, Any]] = (),
        phase: str = "Pending", gated: bool = True, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod as a controller creates it (gated, pending unless told)."""
    body = copy.deepcopy(spec) if spec is not None else {"containers": [{"name": "main", "image": "busybox"}]}
    if gated:
        body.setdefault("schedulingGates", [dict(GATE)])
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if owners:
        meta["ownerReferences"] = [dict(o) for o in owners]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": phase}}
