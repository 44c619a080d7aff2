"""Workload kinds: the Kubernetes objects Muster queues besides its own jobs (``batch/v1`` Job, JobSet,
Kubeflow TrainJob, RayJob, RayCluster, LeaderWorkerSet, Deployment, StatefulSet, groups of Pods), each read
into roles, held back until admission (``spec.suspend``, or the scheduling gate ``muster.dev/admission`` in
every pod template where a kind cannot be suspended), released, preempted and followed. One module per kind
family, ``base`` for what they share, ``registry`` to find one. Pure: no I/O, no Kubernetes client.

    kind = kind_of(obj)                          # or kind_for(api_version, kind)
    related = [fetch(ref) for ref in kind.references(obj)]   # a TrainJob's training runtime
    plan = kind.roles(obj, related)              # RolePlan: roles + role -> the kind's pod-set name
    kind.why_not_held(obj, related)              # None when held back; else why, for the object's owner
    kind.release_patch(obj, labels, annotations, related)   # patches to apply in order, or None
    kind.hold_manifest(manifest, name=..., namespace=..., labels=..., annotations=..., related=related)
    kind.suspend_patch(obj)                      # preemption: a merge patch, or None (delete the pods)
    kind.pod_selectors(obj); kind.pod_role(obj, pod); kind.state(obj)
    ungate_pod_patch(pod, node, labels)          # release one gated pod onto its node
"""

from schemas.kube import POD_GROUP, POD_GROUP_SIZE
from services.spec.kinds.base import (
    GroupIncomplete,
    KindIdentity,
    NotQueueable,
    ObjectRef,
    Patch,
    PodSet,
    RolePlan,
    State,
    UnknownKind,
    WorkloadKind,
    released_pod,
    ungate_pod_patch,
)
from services.spec.kinds.names import role_name
from services.spec.kinds.pods import pod_group
from services.spec.kinds.registry import KINDS, find_kind, kind_for, kind_of
from services.spec.kinds.trainer import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "KINDS",
    "POD_GROUP",
    "POD_GROUP_SIZE",
    "TRAINING_RUNTIME",
    "GroupIncomplete",
    "KindIdentity",
    "NotQueueable",
    "ObjectRef",
    "Patch",
    "PodSet",
    "RolePlan",
    "State",
    "UnknownKind",
    "WorkloadKind",
    "find_kind",
    "kind_for",
    "kind_of",
    "pod_group",
    "released_pod",
    "role_name",
    "ungate_pod_patch",
]
