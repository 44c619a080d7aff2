"""KubeRay RayJob and RayCluster (``ray.io/v1``, checked against kuberay ray-operator v1.5.0).

Roles of a Ray cluster spec: ``head`` (1 pod, ``headGroupSpec.template``) and one per
``workerGroupSpecs[i]`` named after its ``groupName``, with as many pods as KubeRay creates: ``replicas``
(the CRD's default 0) kept within ``minReplicas`` (default 0) and ``maxReplicas`` (default 2^31-1), times
``numOfHosts`` (default 1); a worker group with ``suspend: true`` has none. A worker group named ``head``
(or ``submitter`` in a RayJob) is refused, as is ``enableInTreeAutoscaling`` (the autoscaler would size
worker groups outside Muster's quota).

A RayJob adds, in ``K8sJobMode`` (the default ``submissionMode``), the role ``submitter``: the Kubernetes
Job KubeRay creates to submit the Ray job, from ``spec.submitterPodTemplate`` or, without it, KubeRay's
default (container ``ray-job-submitter``, the head's image, requests 500m CPU / 200Mi, limits 1 / 1Gi,
``restartPolicy: Never``); the release writes that default template, gated, into
``spec.submitterPodTemplate``, since a gate only reaches pods through a template. In ``SidecarMode`` the
submitter is a container in the head pod: its requests are added to the head's. ``HTTPMode`` and
``InteractiveMode`` have no submitter pod. Refused: ``clusterSelector`` (the job runs on a cluster Muster
does not hold), no ``rayClusterSpec``, and ``shutdownAfterJobFinishes`` other than true (KubeRay refuses to
suspend such a RayJob, and preemption suspends it).

Both are held by ``spec.suspend``. Suspending a RayJob makes KubeRay delete its RayCluster and submitter Job
(a new cluster, with a new name, is created at resume); suspending a RayCluster deletes its pods.
Pods carry ``ray.io/cluster`` (the RayJob's cluster is ``status.rayClusterName``), ``ray.io/node-type``
(``head``/``worker``) and ``ray.io/group`` (``headgroup`` or the worker group's name); the submitter's pods
carry the Job controller's ``batch.kubernetes.io/job-name`` (the Job is named after the RayJob).

State of a RayJob: ``status.jobDeploymentStatus`` ``Complete`` (succeeded when ``status.jobStatus`` is
``SUCCEEDED``, failed when ``STOPPED``), ``Failed`` / ``ValidationFailed`` (failed, ``status.reason``:
``SubmissionFailed``, ``DeadlineExceeded``, ``AppFailed``...), ``Initializing`` / ``Running`` /
``Waiting`` / ``Retrying`` (running), ``""`` / ``Suspending`` / ``Suspended`` (none). A RayCluster never
ends: running while ``status.state`` is ``ready``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.spec.kinds.base import (
    KindIdentity,
    NotQueueable,
    PodSet,
    State,
    WorkloadKind,
    count_of,
    describe,
    spec_of,
    template_at,
)
from services.spec.kinds.batch import JOB_NAME_LABEL
from services.spec.kinds.names import role_name
from services.spec.kinds.patching import Path
from services.spec.kube_pods import KubeObject, first_container, pod_spec_of

RAY_CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
HEAD = "head"
SUBMITTER = "submitter"
K8S_JOB_MODE = "K8sJobMode"
SIDECAR_MODE = "SidecarMode"
SUBMITTER_CONTAINER = "ray-job-submitter"
_MAX_INT32 = 2**31 - 1


def worker_pods(group: Mapping[str, Any]) -> int:
    """Pods KubeRay creates for a worker group (its desired replicas times hosts per replica)."""
    if group.get("suspend") is True:
        return 0
    low = count_of(group.get("minReplicas"), 0)
    high = count_of(group.get("maxReplicas"), _MAX_INT32)
    replicas = count_of(group.get("replicas"), 0)
    wanted = high if low > high else min(max(replicas, low), high)
    return wanted * max(count_of(group.get("numOfHosts"), 1), 1)


def default_submitter_container(cluster_spec: Mapping[str, Any]) -> KubeObject:
    """KubeRay's default submitter container: the head's image, 500m CPU / 200Mi requested, 1 / 1Gi limits."""
    head, _ = template_at(cluster_spec, ("headGroupSpec", "template"))
    container = first_container(pod_spec_of(head)) or {}
    return {"name": SUBMITTER_CONTAINER, "image": container.get("image", ""),
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}


def cluster_pod_sets(cluster_spec: Mapping[str, Any], base: Path,
                     head_extra: tuple[KubeObject, ...] = ()) -> list[PodSet]:
    """The head and worker-group pod sets of a Ray cluster spec found at ``base`` in the object."""
    head_path = (*base, "headGroupSpec", "template")
    head, present = template_at(cluster_spec, ("headGroupSpec", "template"))
    sets = [PodSet(HEAD, 1, head, "the head group", head_path, present, extra_containers=head_extra)]
    for i, group in enumerate(cluster_spec.get("workerGroupSpecs") or []):
        if not isinstance(group, dict):
            continue
        name = str(group.get("groupName", ""))
        template, present = template_at(group, ("template",))
        sets.append(PodSet(name, worker_pods(group), template, f"worker group {name}",
                           (*base, "workerGroupSpecs", i, "template"), present,
                           guards=(((*base, "workerGroupSpecs", i, "groupName"), name),)))
    return sets


def check_cluster(obj: Mapping[str, Any], cluster_spec: Mapping[str, Any], where: str, taken: Sequence[str]) -> None:
    if cluster_spec.get("enableInTreeAutoscaling") is True:
        raise NotQueueable(f"{describe(obj)}: {where}.enableInTreeAutoscaling is true; the Ray autoscaler would "
                           "change worker counts outside Muster's quota: turn it off")
    for group in cluster_spec.get("workerGroupSpecs") or []:
        if isinstance(group, dict) and group.get("groupName") in taken:
            raise NotQueueable(f"{describe(obj)}: a worker group is named {group['groupName']!r}, the name of "
                               "another role of the job; rename it")


def ray_pod_role(pod: Mapping[str, Any], cluster: str | None, cluster_spec: Mapping[str, Any]) -> str | None:
    """The role of a Ray node pod of ``cluster`` (None: any cluster the caller selected)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if cluster and labels.get(RAY_CLUSTER_LABEL) != cluster:
        return None
    node_type = labels.get(NODE_TYPE_LABEL)
    if node_type == HEAD:
        return HEAD
    if node_type == "worker":
        names = [g.get("groupName") for g in cluster_spec.get("workerGroupSpecs") or [] if isinstance(g, dict)]
        group = labels.get(GROUP_LABEL)
        return role_name(str(group)) if group is not None and group in names else None
    return None


class RayClusterKind(WorkloadKind):
    identity = KindIdentity("ray.io", "v1", "RayCluster", "rayclusters")
    suspendable = True
    serving = True

    def check(self, obj: Mapping[str, Any]) -> None:
        check_cluster(obj, spec_of(obj), "spec", (HEAD,))

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        return cluster_pod_sets(spec_of(obj), ("spec",))

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        return [{RAY_CLUSTER_LABEL: str((obj.get("metadata") or {}).get("name", ""))}]

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        return ray_pod_role(pod, str((obj.get("metadata") or {}).get("name", "")), spec_of(obj))

    def state(self, obj: Mapping[str, Any]) -> State:
        if self.suspended(obj):
            return State(None, "suspended")
        state = str((obj.get("status") or {}).get("state") or "")
        return State("running", "ready") if state == "ready" else State(None, state or "not ready yet")


class RayJobKind(WorkloadKind):
    identity = KindIdentity("ray.io", "v1", "RayJob", "rayjobs")
    suspendable = True

    @staticmethod
    def mode(obj: Mapping[str, Any]) -> str:
        return str(spec_of(obj).get("submissionMode") or K8S_JOB_MODE)

    def check(self, obj: Mapping[str, Any]) -> None:
        spec = spec_of(obj)
        who = describe(obj)
        if spec.get("clusterSelector"):
            raise NotQueueable(f"{who} runs on an existing cluster (spec.clusterSelector), which Muster neither "
                               "holds nor places; give it a rayClusterSpec instead")
        if not isinstance(spec.get("rayClusterSpec"), dict):
            raise NotQueueable(f"{who} has no spec.rayClusterSpec")
        if spec.get("shutdownAfterJobFinishes") is not True:
            raise NotQueueable(f"{who}: spec.shutdownAfterJobFinishes must be true: KubeRay refuses to suspend a "
                               "RayJob otherwise, and Muster holds it back and preempts it by suspending it")
        taken = (HEAD, SUBMITTER) if self.mode(obj) == K8S_JOB_MODE else (HEAD,)
        check_cluster(obj, spec["rayClusterSpec"], "spec.rayClusterSpec", taken)

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        spec = spec_of(obj)
        cluster = spec.get("rayClusterSpec")
        if not isinstance(cluster, dict):
            raise NotQueueable(f"{describe(obj)} has no spec.rayClusterSpec")
        mode = self.mode(obj)
        sidecar = (default_submitter_container(cluster),) if mode == SIDECAR_MODE else ()
        sets = cluster_pod_sets(cluster, ("spec", "rayClusterSpec"), sidecar)
        if mode == K8S_JOB_MODE:
            template, present = template_at(spec, ("submitterPodTemplate",))
            if not present:
                template = {"spec": {"restartPolicy": "Never", "containers": [default_submitter_container(cluster)]}}
            sets.append(PodSet(SUBMITTER, 1, template, "the submitter", ("spec", "submitterPodTemplate"), present))
        return sets

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        selectors: list[dict[str, str]] = []
        cluster = (obj.get("status") or {}).get("rayClusterName")
        if cluster:
            selectors.append({RAY_CLUSTER_LABEL: str(cluster)})
        if self.mode(obj) == K8S_JOB_MODE:
            selectors.append({JOB_NAME_LABEL: str((obj.get("metadata") or {}).get("name", ""))})
        return selectors

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if NODE_TYPE_LABEL in labels:
            cluster = (obj.get("status") or {}).get("rayClusterName")
            return ray_pod_role(pod, str(cluster) if cluster else None, spec_of(obj).get("rayClusterSpec") or {})
        if self.mode(obj) == K8S_JOB_MODE and labels.get(JOB_NAME_LABEL) == (obj.get("metadata") or {}).get("name"):
            return SUBMITTER
        return None

    def state(self, obj: Mapping[str, Any]) -> State:
        status = obj.get("status") or {}
        deployment = str(status.get("jobDeploymentStatus") or "")
        job = str(status.get("jobStatus") or "")
        why = ": ".join(str(v) for v in (status.get("reason"), status.get("message")) if v)
        if deployment == "Complete":
            if job == "SUCCEEDED":
                return State("succeeded", "Ray job SUCCEEDED")
            return State("failed", f"Ray job {job or 'ended'}" + (f" ({why})" if why else ""))
        if deployment in ("Failed", "ValidationFailed"):
            return State("failed", why or deployment)
        if deployment in ("Initializing", "Running", "Waiting", "Retrying"):
            return State("running", f"{deployment}" + (f", Ray job {job}" if job else ""))
        if self.suspended(obj) or deployment in ("Suspending", "Suspended"):
            return State(None, deployment or "suspended")
        return State(None, deployment or "new")


RAYCLUSTER = RayClusterKind()
RAYJOB = RayJobKind()
