"""Rendering one admitted attempt of a job, on its wire ``PlacementPlan``, into a ``batch/v1`` Job manifest.
Pure: no I/O.

The Job is Indexed with completions = parallelism = gang size and ``backoffLimit: 0``: a
failed pod fails the Job, and Muster restarts the whole gang as a new attempt (a new Job name).

Pinning. One pod template serves every completion index, so a per-index ``nodeName`` cannot
be expressed. The pods get a required node affinity on ``kubernetes.io/hostname`` In the planned
nodes: they stay on the capacity the scheduler core reserved while the default scheduler still
checks resources, taints and priority. Because the planned nodes have exactly the room the plan
uses, the scheduler lands the planned count on each of them. The exact index -> node map is in the
``muster.dev/placement`` annotation (a JSON list, position = completion index) for a scheduler
plugin, the simulated cluster, or the node-state watcher to check the placement against. With a
``DomainPin`` the affinity names a topology domain instead (any node of one rack / block / zone).

GPU sharing. A MIG job's container asks for ``nvidia.com/mig-<profile>: N`` (the NVIDIA device plugin's
mixed strategy). A fractional job's pods carry KAI-Scheduler's ``gpu-fraction`` annotation (e.g. "0.5")
and no ``nvidia.com/gpu`` limit, as KAI expresses GPU sharing; ``muster.dev/gpu-slots`` lists the shared
GPU the plan gave each completion index. Both tolerate the GPU taint and select the GPU type.

Secrets. An environment entry that refers to a Secret's key becomes ``valueFrom.secretKeyRef`` and a whole
Secret becomes ``envFrom.secretRef``: the Secret lives in the job's namespace and only the kubelet reads it;
its value is never in the spec, the topics or the manifest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from schemas.decisions import PlacementPlan
from schemas.jobspec import EnvFromSecret, SecretKeyRef
from schemas.kube import (
    ATTEMPT,
    CLUSTER,
    GANG_SIZE,
    GPU_FRACTION,
    GPU_RESOURCE,
    GPU_SLOTS,
    GPU_TYPE,
    HOSTNAME_LABEL,
    JOB_ID,
    MIG_RESOURCE_PREFIX,
    MUSTER_PREFIX,
    PLACEMENT,
    QUEUE,
)
from services.runtime.kube.names import job_object_name, label_value

ANY_GPU = ""  # a template whose gpu_type is ANY_GPU accepts any GPU type (no selector, no annotation)

_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: the largest ``activeDeadlineSeconds`` the Kubernetes API accepts (int64); longer runtimes mean "no limit"
MAX_DEADLINE_S = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CheckpointSettings:
    """Where the job keeps checkpoints; ``volume_claim`` mounts a PersistentVolumeClaim at ``directory``."""

    directory: str
    volume_claim: str | None = None


@dataclass(frozen=True, slots=True)
class DomainPin:
    """Pin the gang to one topology domain: nodes whose ``label`` equals ``value``."""

    label: str
    value: str


@dataclass(frozen=True, slots=True)
class PodSecurity:
    """Elevated settings a job asked for and its queue allowed; the defaults add nothing to the pod."""

    privileged: bool = False
    run_as_root: bool = False
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    host_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobTemplate:
    """Everything about a job's pods that does not change between attempts."""

    job_id: str
    namespace: str
    queue: str
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str | SecretKeyRef] = field(default_factory=lambda: _EMPTY)  # a value, or a Secret's key
    env_from: tuple[EnvFromSecret, ...] = ()  # whole Secrets
    replicas: int = 1  # the largest gang; an elastic admission may place fewer
    gpus_per_pod: int = 0
    gpu_type: str = ANY_GPU
    cpu_m: int = 0  # millicores per pod; 0 requests none
    memory_mb: int = 0  # MiB per pod; 0 requests none
    priority_class: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    node_selector: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    tolerations: frozenset[str] = frozenset()  # further taint keys to tolerate (any effect)
    checkpoint: CheckpointSettings | None = None
    grace_period_s: float = 30.0
    max_runtime_s: float | None = None  # becomes activeDeadlineSeconds
    working_dir: str | None = None
    service_account: str | None = None
    scheduler_name: str | None = None
    ttl_seconds_after_finished: int | None = None
    gpu_type_label: str = GPU_TYPE  # node label holding the GPU type; "" adds no selector for it
    container_name: str = "main"
    security: PodSecurity = field(default_factory=PodSecurity)
    gpu_fraction: float = 0.0  # GPU sharing: a fraction of one GPU per pod (gpus_per_pod is then 0)
    mig_profile: str = ""  # MIG: slices of this profile per pod ...
    mig_slices: int = 0  # ... this many

    @property
    def uses_gpus(self) -> bool:
        """Whole GPUs, a fraction of one, or MIG slices: it runs on GPU nodes."""
        return bool(self.gpus_per_pod or self.gpu_fraction or self.mig_profile)


def planned_nodes(placement: PlacementPlan) -> list[str]:
    """The node of every completion index, in index order."""
    return [a.node for a in placement.nodes for _ in range(a.pods)]


def render_job(
    template: JobTemplate, attempt: int, placement: PlacementPlan, domain: DomainPin | None = None
) -> dict[str, Any]:
    """The ``batch/v1`` Job manifest of one attempt of ``template`` on ``placement``."""
    gang = placement.pods
    if gang < 1:
        raise ValueError(f"job {template.job_id}: placement has no pods")
    if gang > template.replicas:
        raise ValueError(f"job {template.job_id}: placement has {gang} pods, the job at most {template.replicas}")
    if template.gpus_per_pod < 0 or template.cpu_m < 0 or template.memory_mb < 0:
        raise ValueError(f"job {template.job_id}: negative resource request")
    name = job_object_name(template.job_id, attempt)
    nodes = planned_nodes(placement)
    labels = {
        **{k: v for k, v in template.labels.items() if not k.startswith(MUSTER_PREFIX)},
        JOB_ID: label_value(template.job_id),
        ATTEMPT: str(attempt),
        QUEUE: label_value(template.queue),
    }
    annotations = {
        **{k: v for k, v in template.annotations.items() if not k.startswith(MUSTER_PREFIX)},
        JOB_ID: template.job_id,
        ATTEMPT: str(attempt),
        QUEUE: template.queue,
        CLUSTER: placement.cluster,
        GANG_SIZE: str(gang),
        PLACEMENT: json.dumps(nodes, separators=(",", ":")),
    }
    if template.uses_gpus and template.gpu_type != ANY_GPU:
        annotations[GPU_TYPE] = template.gpu_type
    pod_annotations = dict(annotations)
    if template.gpu_fraction:
        pod_annotations[GPU_FRACTION] = format(template.gpu_fraction, "g")
        slots = [s for a in placement.nodes for s in (a.gpu_slots or [-1] * a.pods)]
        pod_annotations[GPU_SLOTS] = json.dumps(slots, separators=(",", ":"))
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": gang,
        "parallelism": gang,
        "backoffLimit": 0,
        "template": {
            "metadata": {"labels": dict(labels), "annotations": pod_annotations},
            "spec": _pod_spec(template, attempt, nodes, domain),
        },
    }
    if template.max_runtime_s is not None:
        deadline = template.max_runtime_s
        spec["activeDeadlineSeconds"] = MAX_DEADLINE_S if deadline >= MAX_DEADLINE_S else max(1, math.ceil(deadline))
    if template.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = template.ttl_seconds_after_finished
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": template.namespace, "labels": labels,
                     "annotations": annotations},
        "spec": spec,
    }


def _pod_spec(template: JobTemplate, attempt: int, nodes: list[str], domain: DomainPin | None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": max(0, math.ceil(template.grace_period_s)),
        "containers": [_container(template, attempt)],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [_pin_expression(nodes, domain)]}],
        }}},
    }
    selector = dict(template.node_selector)
    if template.gpu_type_label and template.uses_gpus and template.gpu_type != ANY_GPU:
        selector[template.gpu_type_label] = template.gpu_type
    if selector:
        pod["nodeSelector"] = selector
    tolerations = _tolerations(template)
    if tolerations:
        pod["tolerations"] = tolerations
    if template.priority_class:
        pod["priorityClassName"] = template.priority_class
    if template.service_account:
        pod["serviceAccountName"] = template.service_account
    if template.scheduler_name:
        pod["schedulerName"] = template.scheduler_name
    volumes: list[dict[str, Any]] = []
    if template.checkpoint is not None and template.checkpoint.volume_claim:
        volumes.append({"name": "checkpoint", "persistentVolumeClaim": {"claimName": template.checkpoint.volume_claim}})
    security = template.security
    volumes += [{"name": f"host-path-{i}", "hostPath": {"path": path}} for i, path in enumerate(security.host_paths)]
    if volumes:
        pod["volumes"] = volumes
    for flag, key in ((security.host_network, "hostNetwork"), (security.host_pid, "hostPID"),
                      (security.host_ipc, "hostIPC")):
        if flag:
            pod[key] = True
    return pod


def _pin_expression(nodes: list[str], domain: DomainPin | None) -> dict[str, Any]:
    if domain is not None:
        return {"key": domain.label, "operator": "In", "values": [domain.value]}
    return {"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(set(nodes))}


def _tolerations(template: JobTemplate) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    if template.uses_gpus:
        result.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    for key in sorted(template.tolerations):
        if key != GPU_RESOURCE or not template.uses_gpus:
            result.append({"key": key, "operator": "Exists"})
    return result


def _container(template: JobTemplate, attempt: int) -> dict[str, Any]:
    muster_env = {"MUSTER_JOB_ID": template.job_id, "MUSTER_ATTEMPT": str(attempt)}
    if template.checkpoint is not None:
        muster_env["MUSTER_CHECKPOINT_DIR"] = template.checkpoint.directory
    env = [_env_var(k, v) for k, v in template.env.items() if k not in muster_env]
    env += [{"name": k, "value": v} for k, v in muster_env.items()]
    container: dict[str, Any] = {"name": template.container_name, "image": template.image, "env": env}
    if template.env_from:
        container["envFrom"] = [_env_from(source) for source in template.env_from]
    if template.command:
        container["command"] = list(template.command)
    if template.args:
        container["args"] = list(template.args)
    if template.working_dir:
        container["workingDir"] = template.working_dir
    requests: dict[str, str] = {}
    if template.cpu_m:
        requests["cpu"] = f"{template.cpu_m}m"
    if template.memory_mb:
        requests["memory"] = f"{template.memory_mb}Mi"
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if template.gpus_per_pod:
        resources["limits"] = {GPU_RESOURCE: str(template.gpus_per_pod)}
    elif template.mig_profile:
        resources["limits"] = {MIG_RESOURCE_PREFIX + template.mig_profile: str(max(template.mig_slices, 1))}
    if resources:
        container["resources"] = resources
    mounts: list[dict[str, Any]] = []
    if template.checkpoint is not None and template.checkpoint.volume_claim:
        mounts.append({"name": "checkpoint", "mountPath": template.checkpoint.directory})
    security = template.security
    mounts += [{"name": f"host-path-{i}", "mountPath": path} for i, path in enumerate(security.host_paths)]
    if mounts:
        container["volumeMounts"] = mounts
    context: dict[str, Any] = {}
    if security.privileged:
        context["privileged"] = True
    if security.run_as_root:
        context.update(runAsUser=0, runAsNonRoot=False)
    if context:
        container["securityContext"] = context
    return container


def _env_var(name: str, value: str | SecretKeyRef) -> dict[str, Any]:
    if isinstance(value, str):
        return {"name": name, "value": value}
    ref: dict[str, Any] = {"name": value.name, "key": value.key}
    if value.optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def _env_from(source: EnvFromSecret) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": source.secret_ref.name}
    if source.secret_ref.optional:
        ref["optional"] = True
    entry: dict[str, Any] = {"secretRef": ref}
    if source.prefix:
        entry["prefix"] = source.prefix
    return entry
