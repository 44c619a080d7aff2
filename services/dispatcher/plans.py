"""What the dispatcher writes to Kubernetes for each decision. Pure: decisions and objects in, manifests out.

Names are deterministic: revision 0 of an attempt is ``<job-id>-a<attempt>``, its n-th re-creation
(a whole-gang restart or a rescale) ``<job-id>-a<attempt>-r<n>``. A repeated decision therefore
names the same object, and creating it again is harmless.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from schemas import kube as ann
from schemas.decisions import JobAdmitted, PlacementPlan
from services.dispatcher.binder import SCHEDULER_NAME
from services.dispatcher.render import ANY_GPU, CheckpointSettings, JobTemplate, PodSecurity, planned_nodes, render_job
from services.dispatcher.workload_plans import STOP_ANNOTATIONS
from services.runtime.kube import dns1123_label, job_object_name, label_value
from services.runtime.kube.names import MAX_JOB_NAME

KubeObject = dict[str, Any]

#: labels the Job controller adds to a Job and its template; a copy must not carry them
CONTROLLER_LABELS = frozenset({"controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
                               "batch.kubernetes.io/job-name"})
#: annotations of one Job object's life that a re-created Job must not inherit
TRANSIENT_ANNOTATIONS = frozenset({
    ann.RESTART_AT, ann.PREEMPT_REQUESTED, ann.PREEMPT_REASON, ann.PREEMPT_REQUEUE, ann.PREEMPT_GRACE,
    ann.PREEMPT_EVENT, ann.CHECKPOINTED, ann.DELETED_BY, ann.DELETE_REASON, ann.REPLACES,
    "kubectl.kubernetes.io/last-applied-configuration",
})


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    """How the dispatcher renders and paces its work."""

    checkpoint_root: str = "/checkpoints"  # checkpoint dir of jobs that enable checkpoints without naming one
    use_priority_classes: bool = False  # set priorityClassName from the spec (the class must exist in the cluster)
    restart_backoff_s: float = 10.0  # pause before the first whole-gang restart; doubles each time
    restart_backoff_max_s: float = 300.0
    handshake_poll_s: float = 1.0  # how often a preemption handshake looks for the checkpoint acknowledgement
    # after a handshake that used up its grace, a pod's last chance to exit after SIGTERM before SIGKILL
    stop_floor_s: float = 5.0
    stop_wait_margin_s: float = 30.0  # beyond the pods' grace, how long a stop waits for them to be gone
    release_poll_s: float = 0.2  # how often a new revision waits for the pods of the one it replaces to be gone
    bind_pods: bool = True  # Muster binds each pod to its planned node (see ``binder``); else affinity only
    # decisions of different jobs handled at once (one job's stay in order): Job creation waits on the API server
    concurrent_decisions: int = 48


def object_name(job_id: str, attempt: int, revision: int = 0) -> str:
    """The Job of ``revision`` of ``attempt``: ``<job-id>-a<attempt>`` or ``<job-id>-a<attempt>-r<revision>``."""
    if revision <= 0:
        return job_object_name(job_id, attempt)
    suffix = f"-a{attempt}-r{revision}"
    return dns1123_label(job_id, MAX_JOB_NAME - len(suffix)) + suffix


def restart_delay(restarts_done: int, settings: DispatchSettings) -> float:
    """The pause before restart number ``restarts_done + 1``: exponential, capped."""
    return float(min(settings.restart_backoff_max_s, settings.restart_backoff_s * 2 ** max(restarts_done, 0)))


def users_job(job_id: str, attempt: int, revision: int, name: str) -> bool:
    """Whether the Job of a run is one its user created (a kube-native Job, released in place) rather than one
    Muster created: Muster names every Job it creates ``object_name(job_id, attempt, revision)``. A user's Job
    is suspended when its job is stopped, never deleted (see ``preemption_handshake``)."""
    return name != object_name(job_id, attempt, revision)


def source_job(decision: JobAdmitted) -> tuple[str, str] | None:
    """``(namespace, name)`` of the user-created suspended Job this admission releases, if any."""
    ref = decision.spec.annotations.get(ann.SOURCE_JOB)
    if not ref:
        return None
    namespace, slash, name = ref.partition("/")
    return (namespace, name) if slash else (decision.namespace, ref)


def template_for(decision: JobAdmitted, settings: DispatchSettings) -> JobTemplate:
    """The attempt-independent pod description of an admitted job."""
    spec = decision.spec
    pod = spec.main_template  # a Job Muster renders is a job of one role (several roles come as a workload)
    res = pod.resources
    checkpoint = None
    if spec.checkpoint.enabled or spec.checkpoint.directory:
        directory = spec.checkpoint.directory or f"{settings.checkpoint_root.rstrip('/')}/{decision.job_id}"
        checkpoint = CheckpointSettings(directory=directory)
    return JobTemplate(
        job_id=decision.job_id,
        namespace=decision.namespace,
        queue=decision.queue,
        image=pod.image,
        command=tuple(pod.command),
        args=tuple(pod.args),
        env={name: entry if isinstance(entry, str) else (entry.secret_ref or entry.value or "")
             for name, entry in pod.env.items()},
        env_from=tuple(pod.env_from),
        replicas=max(spec.replicas, decision.replicas, decision.placement.pods),
        gpus_per_pod=res.gpus,
        gpu_fraction=res.gpu_fraction or 0.0,
        mig_profile=res.mig_profile or "",
        mig_slices=res.mig_slices if res.mig_profile else 0,
        gpu_type=res.gpu_type or ANY_GPU,
        cpu_m=res.cpu_m,
        memory_mb=res.memory_mb,
        priority_class=spec.priority_class if settings.use_priority_classes else "",
        labels=dict(spec.labels),
        annotations=dict(spec.annotations),
        node_selector=dict(spec.node_selector),
        checkpoint=checkpoint,
        grace_period_s=float(spec.checkpoint.grace_period_s),
        max_runtime_s=spec.max_runtime_s,
        working_dir=pod.working_dir,
        scheduler_name=SCHEDULER_NAME if settings.bind_pods else None,
        security=PodSecurity(privileged=pod.security.privileged, run_as_root=pod.security.run_as_root,
                             host_network=pod.security.host_network, host_pid=pod.security.host_pid,
                             host_ipc=pod.security.host_ipc, host_paths=tuple(pod.security.host_path_volumes)),
    )


def bookkeeping(decision: JobAdmitted, event_id: str, correlation_id: str) -> dict[str, str]:
    """The dispatcher's own annotations on a Job it creates or releases for ``decision``."""
    return {
        ann.REVISION: "0",
        ann.RESTARTS: str(decision.restarts),
        ann.MAX_RESTARTS: str(decision.spec.max_restarts),
        ann.DECISION_EVENT: event_id,
        ann.CORRELATION: correlation_id,
    }


def admission_manifest(decision: JobAdmitted, event_id: str, correlation_id: str,
                       settings: DispatchSettings) -> KubeObject:
    """The Indexed ``batch/v1`` Job of an admission, pinned to its planned nodes."""
    manifest = render_job(template_for(decision, settings), decision.attempt, decision.placement)
    manifest["metadata"]["annotations"].update(bookkeeping(decision, event_id, correlation_id))
    return manifest


def node_affinity(placement: PlacementPlan) -> KubeObject:
    """A required node affinity on the placement's nodes."""
    nodes = sorted({n.node for n in placement.nodes})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": ann.HOSTNAME_LABEL, "operator": "In", "values": nodes}]}],
    }}}


def _placement_annotations(placement: PlacementPlan) -> dict[str, str]:
    nodes = planned_nodes(placement)
    return {ann.PLACEMENT: json.dumps(nodes, separators=(",", ":")), ann.GANG_SIZE: str(placement.pods),
            ann.CLUSTER: placement.cluster}


def gpu_tolerations(existing: list[KubeObject] | None, gpus: int) -> list[KubeObject] | None:
    """The pod template's tolerations plus one of the GPU taint when GPUs are requested and it is missing.

    None when nothing is to change (a merge patch replaces the whole list, so the user's entries are kept).
    """
    current = list(existing or [])
    if gpus <= 0 or any(t.get("key") == ann.GPU_RESOURCE or (not t.get("key") and t.get("operator") == "Exists")
                        for t in current):
        return None
    return [*current, {"key": ann.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]


def source_job_patch(decision: JobAdmitted, event_id: str, correlation_id: str,
                     existing_tolerations: list[KubeObject] | None = None) -> KubeObject:
    """A merge patch that adopts a user-created suspended Job: Muster's labels, pinning, ``suspend: false``.

    Only what Kubernetes lets one change on a suspended Job is touched (labels, annotations, node
    affinity and tolerations of the pod template); the MUSTER_* environment is therefore not added on
    this path. GPU pods get the toleration of the GPU taint, as the dispatcher's own Jobs have. A Job
    released again after a preemption suspended it loses the marks of the attempt that was stopped.
    """
    identity_labels = {ann.JOB_ID: label_value(decision.job_id), ann.ATTEMPT: str(decision.attempt),
                       ann.QUEUE: label_value(decision.queue)}
    identity = {ann.JOB_ID: decision.job_id, ann.ATTEMPT: str(decision.attempt), ann.QUEUE: decision.queue}
    placement = _placement_annotations(decision.placement)
    pod_spec: KubeObject = {"affinity": node_affinity(decision.placement)}
    tolerations = gpu_tolerations(existing_tolerations, decision.spec.resources.gpus)
    if tolerations is not None:
        pod_spec["tolerations"] = tolerations
    return {
        "metadata": {
            "labels": identity_labels,
            "annotations": {**dict.fromkeys(STOP_ANNOTATIONS), **identity, **placement,
                            **bookkeeping(decision, event_id, correlation_id)},
        },
        "spec": {
            "suspend": False,
            "template": {
                "metadata": {"labels": identity_labels, "annotations": {**identity, **placement}},
                "spec": pod_spec,
            },
        },
    }


def _without(mapping: dict[str, str] | None, drop: frozenset[str]) -> dict[str, str]:
    return {k: v for k, v in (mapping or {}).items() if k not in drop}


def clone_manifest(
    job: KubeObject,
    *,
    name: str,
    revision: int,
    restarts: int,
    decision_event: str,
    placement: PlacementPlan | None = None,
) -> KubeObject:
    """A fresh copy of ``job`` under ``name`` (same attempt), optionally re-pinned to a new placement.

    The copy is created suspended and names ``job`` as the revision it replaces (``muster.dev/replaces``):
    it may only start once every pod of ``job`` is gone, or both would hold the same GPUs (see
    ``replacement``). Server-set fields (selector, controller labels, status, uid...) are left out so the API server
    and the Job controller treat it as a new Job.
    """
    meta = job.get("metadata") or {}
    spec = copy.deepcopy(job.get("spec") or {})
    spec.pop("selector", None)
    spec.pop("manualSelector", None)
    spec["suspend"] = True
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = _without(template_meta.get("labels"), CONTROLLER_LABELS)
    annotations = _without(meta.get("annotations"), TRANSIENT_ANNOTATIONS)
    annotations.update({ann.REVISION: str(revision), ann.RESTARTS: str(restarts), ann.DECISION_EVENT: decision_event,
                        ann.REPLACES: str(meta.get("name"))})
    if placement is not None:
        pinned = _placement_annotations(placement)
        annotations.update(pinned)
        template_meta["annotations"] = {**(template_meta.get("annotations") or {}), **pinned}
        template.setdefault("spec", {})["affinity"] = node_affinity(placement)
        spec["completions"] = spec["parallelism"] = placement.pods
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": meta.get("namespace"),
                     "labels": _without(meta.get("labels"), CONTROLLER_LABELS), "annotations": annotations},
        "spec": spec,
    }
