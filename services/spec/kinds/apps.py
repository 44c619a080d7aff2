"""Deployment and StatefulSet (``apps/v1``): one role ``main`` of ``spec.replicas`` pods (default 1).

Neither can be suspended: each is held by the gate in ``spec.template``, so every pod its controller creates
is gated until the dispatcher places it. Preemption deletes the pods; the ReplicaSet or StatefulSet
recreates them, gated again. Pods are those ``spec.selector`` selects (``pod_selectors`` gives its
``matchLabels``; ``pod_role`` also checks ``matchExpressions``).

Both are serving or interactive kinds: their status never says they ended. A Deployment runs while its
condition ``Available`` is True, a StatefulSet while ``status.readyReplicas`` is above 0. A Deployment's
rolling update makes extra pods (``maxSurge``) beyond the admitted ones: ``strategy: Recreate`` keeps it to
``replicas``; a StatefulSet with ``podManagementPolicy: OrderedReady`` creates its pods one by one, each
after the previous one is ready, so ``Parallel`` lets the whole gang appear at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schemas.jobspec import MAIN_ROLE
from services.spec.kinds.base import (
    KindIdentity,
    PodSet,
    State,
    WorkloadKind,
    condition_reason,
    count_of,
    match_labels,
    spec_of,
    template_at,
    true_condition,
)
from services.spec.kinds.patching import get_at

_TEMPLATE = ("spec", "template")


class _ReplicatedKind(WorkloadKind):
    suspendable = False
    serving = True

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        template, present = template_at(obj, _TEMPLATE)
        return [PodSet(MAIN_ROLE, count_of(spec_of(obj).get("replicas"), 1), template, "the pod template",
                       _TEMPLATE, present)]

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        """``spec.selector.matchLabels``; a selector of expressions only: the pod template's labels, which
        every pod carries (``pod_role`` checks the whole selector)."""
        selector = spec_of(obj).get("selector") or {}
        labels = selector.get("matchLabels") or ((get_at(obj, (*_TEMPLATE, "metadata", "labels"))) or {})
        return [{str(k): str(v) for k, v in labels.items()}]

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        selector = spec_of(obj).get("selector") or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if not selector or not match_labels(selector, labels):
            return None
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        return MAIN_ROLE if self.owned(obj, owners) else None

    def owned(self, obj: Mapping[str, Any], owners: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the pod's owners make it this object's (no owner references: trust the selector)."""
        return True


class DeploymentKind(_ReplicatedKind):
    identity = KindIdentity("apps", "v1", "Deployment", "deployments")

    def owned(self, obj: Mapping[str, Any], owners: Sequence[Mapping[str, Any]]) -> bool:
        # a Deployment's pods are owned by its ReplicaSets, named <deployment>-<template hash>
        prefix = f"{(obj.get('metadata') or {}).get('name')}-"
        return not owners or any(o.get("kind") == "ReplicaSet" and str(o.get("name", "")).startswith(prefix)
                                 for o in owners)

    def state(self, obj: Mapping[str, Any]) -> State:
        cond = true_condition(obj, "Available")
        return State("running", condition_reason(cond)) if cond is not None else State(None, "not available")


class StatefulSetKind(_ReplicatedKind):
    identity = KindIdentity("apps", "v1", "StatefulSet", "statefulsets")

    def owned(self, obj: Mapping[str, Any], owners: Sequence[Mapping[str, Any]]) -> bool:
        name = (obj.get("metadata") or {}).get("name")
        return not owners or any(o.get("kind") == "StatefulSet" and o.get("name") == name for o in owners)

    def state(self, obj: Mapping[str, Any]) -> State:
        ready = count_of((obj.get("status") or {}).get("readyReplicas"), 0)
        return State("running", f"{ready} pods ready") if ready else State(None, "no pod ready")


DEPLOYMENT = DeploymentKind()
STATEFULSET = StatefulSetKind()
