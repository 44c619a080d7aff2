"""Every workload kind Muster queues, found by apiVersion and kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.spec.kinds.apps import DEPLOYMENT, STATEFULSET
from services.spec.kinds.base import UnknownKind, WorkloadKind
from services.spec.kinds.batch import JOB
from services.spec.kinds.jobset import JOBSET
from services.spec.kinds.lws import LEADERWORKERSET
from services.spec.kinds.pods import POD_GROUP_KIND
from services.spec.kinds.ray import RAYCLUSTER, RAYJOB
from services.spec.kinds.trainer import TRAINJOB

#: in the order the documentation lists them
KINDS: tuple[WorkloadKind, ...] = (JOB, JOBSET, TRAINJOB, RAYJOB, RAYCLUSTER, LEADERWORKERSET, DEPLOYMENT,
                                   STATEFULSET, POD_GROUP_KIND)
_BY_TYPE: dict[tuple[str, str], WorkloadKind] = {(k.identity.api_version, k.identity.kind): k for k in KINDS}


def find_kind(api_version: str, kind: str) -> WorkloadKind | None:
    """The workload kind of this apiVersion and kind (``v1`` ``Pod``: a pod group), or None."""
    return _BY_TYPE.get((api_version, kind))


def kind_for(api_version: str, kind: str) -> WorkloadKind:
    """As ``find_kind``; ``UnknownKind`` (a ``NotQueueable``) names the kinds Muster knows."""
    found = find_kind(api_version, kind)
    if found is None:
        known = ", ".join(f"{k.identity.api_version} {k.identity.kind}" for k in KINDS)
        raise UnknownKind(f"Muster does not queue {api_version} {kind}; it queues {known}")
    return found


def kind_of(obj: Mapping[str, Any]) -> WorkloadKind:
    """The workload kind of an object; a ``v1`` ``List`` of Pods is a pod group."""
    if obj.get("apiVersion") == "v1" and obj.get("kind") == "List":
        return POD_GROUP_KIND
    return kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
