"""Kubeflow Trainer TrainJob (``trainer.kubeflow.org/v1alpha1``, checked against trainer v2.0.0).

A TrainJob names a training runtime (``spec.runtimeRef``: a ``ClusterTrainingRuntime`` by default, or a
namespaced ``TrainingRuntime``) whose ``spec.template`` is a JobSet spec; trainer builds that JobSet, named
after the TrainJob, and the JobSet controller runs it. So its roles are read from the TrainJob AND its
runtime (``references`` names the runtime; the caller fetches it and passes it as ``related``), as
trainer v2.0.0 builds them:

- one role per replicatedJob of the runtime, named after it;
- pods per replicatedJob: ``parallelism`` (default 1); for the job labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` (usually ``node``), ``mlPolicy.numNodes``
  (default 1) when the runtime has an mlPolicy, and ``spec.trainer.numNodes`` when the TrainJob gives it
  (torch and plain runtimes); with an ``mpi`` policy ``numNodes`` sizes the job named ``node`` instead
  (one less with ``runLauncherAsNode``, at least 1);
- ``replicas`` is forced to 1 for the trainer and initializer jobs (trainer's builder), else the runtime's;
- the trainer job's container ``node`` takes ``spec.trainer`` image, command, args, env and
  ``resourcesPerNode`` (which replaces its resources), as trainer's builder does;
- the TrainJob's own ``spec.podSpecOverrides`` are applied to the jobs they target (node selector,
  scheduling gates, volumes, service account, tolerations, container env).

Held by ``spec.suspend``. Trainer v2.0.0 has no labels or annotations for pod templates: a
``PodSpecOverride`` carries only ``targetJobs``, ``serviceAccountName``, ``nodeSelector``,
``tolerations``, ``volumes``, ``initContainers``/``containers`` (env, volume mounts) and
``schedulingGates``. So the release adds the gate through ``spec.podSpecOverrides`` and puts the labels
and annotations in ``spec.labels``/``spec.annotations``, which trainer gives the JobSet (not its pods: the
dispatcher labels each pod when it releases it). Trainer's webhook lets ``podSpecOverrides`` change only
while ``spec.suspend`` is true and forbids two overrides naming the same job: the release therefore adds
the gate to the overrides that already target a job, adds one override for the other jobs, and is two
merge patches (the overrides while suspended, then ``suspend: false``); ``podSpecOverrides`` is an atomic
list, so the merge patch gives it whole.

Pods are the JobSet's: ``jobset.sigs.k8s.io/jobset-name`` = the TrainJob's name. State: conditions
``Complete`` / ``Failed``; trainer v2.0.0 never fills ``status.jobsStatus``, so an unsuspended TrainJob
with neither condition counts as running.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.kube import ADMISSION_GATE
from services.spec.kinds.base import (
    KindIdentity,
    NotQueueable,
    ObjectRef,
    Patch,
    PodSet,
    State,
    WorkloadKind,
    count_of,
    describe,
    ended_by_conditions,
    fresh_manifest,
    spec_of,
)
from services.spec.kinds.jobset import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from services.spec.kinds.names import role_name
from services.spec.kinds.patching import gate_entry
from services.spec.kube_pods import KubeObject

GROUP = "trainer.kubeflow.org"
CLUSTER_TRAINING_RUNTIME = KindIdentity(GROUP, "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes",
                                        namespaced=False)
TRAINING_RUNTIME = KindIdentity(GROUP, "v1alpha1", "TrainingRuntime", "trainingruntimes")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
INITIALIZERS = ("dataset-initializer", "model-initializer")
#: the trainer's container, and the MPI runtime's worker job
NODE = "node"


def _upsert(items: list[Any], new: Sequence[Any], key: str) -> list[Any]:
    """``items`` with each of ``new`` replacing the item of the same ``key`` or appended (a strategic merge
    of a list keyed by ``key``)."""
    out = [copy.deepcopy(i) for i in items]
    for item in new:
        if not isinstance(item, dict):
            continue
        at = next((n for n, old in enumerate(out) if isinstance(old, dict) and old.get(key) == item.get(key)), None)
        if at is None:
            out.append(copy.deepcopy(item))
        else:
            out[at] = copy.deepcopy(item)
    return out


def _apply_override(pod: KubeObject, override: Mapping[str, Any]) -> None:
    """Apply one ``PodSpecOverride`` to a pod spec, as trainer's strategic merge does."""
    if override.get("serviceAccountName"):
        pod["serviceAccountName"] = override["serviceAccountName"]
    if override.get("nodeSelector"):
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **override["nodeSelector"]}
    if override.get("tolerations"):
        pod["tolerations"] = copy.deepcopy(override["tolerations"])
    for key in ("volumes", "schedulingGates"):
        if override.get(key):
            pod[key] = _upsert(pod.get(key) or [], override[key], "name")
    for key in ("initContainers", "containers"):
        for change in override.get(key) or []:
            for container in pod.get(key) or []:
                if isinstance(container, dict) and container.get("name") == change.get("name") and change.get("env"):
                    container["env"] = _upsert(container.get("env") or [], change["env"], "name")


def _apply_trainer(pod: KubeObject, trainer: Mapping[str, Any]) -> None:
    """Apply ``spec.trainer`` to the trainer job's container ``node``, as trainer's builder does."""
    for container in pod.get("containers") or []:
        if not isinstance(container, dict) or container.get("name") != NODE:
            continue
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                container[key] = copy.deepcopy(trainer[key])
        per_node = trainer.get("resourcesPerNode") or {}
        if per_node.get("limits") is not None or per_node.get("requests") is not None:
            container["resources"] = {k: copy.deepcopy(per_node[k]) for k in ("limits", "requests")
                                      if per_node.get(k) is not None}
        if trainer.get("env"):
            container["env"] = _upsert(container.get("env") or [], trainer["env"], "name")


class TrainJobKind(WorkloadKind):
    identity = KindIdentity(GROUP, "v1alpha1", "TrainJob", "trainjobs")
    suspendable = True

    def runtime_ref(self, obj: Mapping[str, Any]) -> ObjectRef:
        ref = spec_of(obj).get("runtimeRef") or {}
        name = ref.get("name")
        if not name:
            raise NotQueueable(f"{describe(obj)}: spec.runtimeRef.name is missing")
        if (ref.get("apiGroup") or GROUP) != GROUP:
            raise NotQueueable(f"{describe(obj)}: runtime of API group {ref.get('apiGroup')!r}; Muster reads "
                               f"{GROUP} training runtimes only")
        kind = ref.get("kind") or CLUSTER_TRAINING_RUNTIME.kind
        if kind == CLUSTER_TRAINING_RUNTIME.kind:
            return ObjectRef(CLUSTER_TRAINING_RUNTIME, str(name))
        if kind == TRAINING_RUNTIME.kind:
            return ObjectRef(TRAINING_RUNTIME, str(name), str((obj.get("metadata") or {}).get("namespace") or ""))
        raise NotQueueable(f"{describe(obj)}: spec.runtimeRef.kind {kind!r} is not a training runtime")

    def references(self, obj: Mapping[str, Any]) -> list[ObjectRef]:
        try:
            return [self.runtime_ref(obj)]
        except NotQueueable:
            return []

    def runtime(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        ref = self.runtime_ref(obj)
        found = next((r for r in related if ref.matches(r)), None)
        if found is None:
            raise NotQueueable(f"{describe(obj)}: its runtime {ref} was not found; create it (or fix "
                               "spec.runtimeRef), then submit again")
        return found

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        ref = self.runtime_ref(obj)
        runtime_spec = spec_of(self.runtime(obj, related))
        ml = runtime_spec.get("mlPolicy")
        mpi = ml.get("mpi") if isinstance(ml, dict) else None
        spec = spec_of(obj)
        trainer = spec.get("trainer") or {}
        num_nodes = None if trainer.get("numNodes") is None else count_of(trainer["numNodes"], 1)
        overrides = [o for o in spec.get("podSpecOverrides") or [] if isinstance(o, dict)]
        jobs = ((runtime_spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        sets: list[PodSet] = []
        for rj in jobs:
            if not isinstance(rj, dict):
                continue
            name = str(rj.get("name", ""))
            job_template = rj.get("template") or {}
            ancestor = ((job_template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL)
            pods = count_of((job_template.get("spec") or {}).get("parallelism"), 1)
            if ancestor == ANCESTOR_TRAINER and isinstance(ml, dict):
                pods = count_of(ml.get("numNodes"), 1)
            if num_nodes is not None:
                if isinstance(mpi, dict):
                    if name == NODE:
                        pods = max(num_nodes - 1, 1) if mpi.get("runLauncherAsNode") else num_nodes
                elif ancestor == ANCESTOR_TRAINER:
                    pods = num_nodes
            replicas = 1 if ancestor in (ANCESTOR_TRAINER, *INITIALIZERS) else count_of(rj.get("replicas"), 1)
            template: KubeObject = copy.deepcopy((job_template.get("spec") or {}).get("template") or {})
            pod = template.setdefault("spec", {})
            if ancestor == ANCESTOR_TRAINER:
                _apply_trainer(pod, trainer)
            for override in overrides:
                if any(isinstance(t, dict) and t.get("name") == name for t in override.get("targetJobs") or []):
                    _apply_override(pod, override)
            sets.append(PodSet(name, replicas * pods, template, f"replicatedJob {name} of {ref}"))
        return sets

    def why_not_held(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> str | None:
        if self.suspended(obj):
            return None
        try:
            missing = [s.name for s in self.read_pod_sets(obj, related) if not s.gated]
        except NotQueueable as exc:
            return f"{describe(obj)} is not suspended, and whether its jobs are gated cannot be told: {exc.reason}"
        if not missing:
            return None
        return (f"{describe(obj)} is not held back: create it with spec.suspend: true (or with a podSpecOverrides "
                f"entry giving schedulingGates: [{{name: {ADMISSION_GATE}}}] to every job); not gated: "
                + ", ".join(missing))

    def _gated_overrides(self, obj: Mapping[str, Any], sets: Sequence[PodSet]) -> tuple[list[Any], bool]:
        """The TrainJob's ``podSpecOverrides`` with the gate for every job not gated yet, and whether that
        changed them: the gate joins an override that already targets the job (trainer's webhook refuses
        two overrides naming one job), and one new override targets the jobs no override names."""
        overrides = copy.deepcopy(list(spec_of(obj).get("podSpecOverrides") or []))
        ungated = [s.name for s in sets if not s.gated]
        covered: set[str] = set()
        for override in overrides:
            if not isinstance(override, dict):
                continue
            targets = {str(t.get("name")) for t in override.get("targetJobs") or [] if isinstance(t, dict)}
            if not targets & set(ungated):
                continue
            covered |= targets
            gates = [g for g in override.get("schedulingGates") or [] if isinstance(g, dict)]
            if not any(g.get("name") == ADMISSION_GATE for g in gates):
                override["schedulingGates"] = [*gates, gate_entry()]
        rest = [name for name in ungated if name not in covered]
        if rest:
            overrides.append({"targetJobs": [{"name": n} for n in rest], "schedulingGates": [gate_entry()]})
        return overrides, bool(ungated)

    def release_patch(self, obj: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> tuple[Patch, ...] | None:
        overrides, changed = self._gated_overrides(obj, self.read_pod_sets(obj, related))
        meta = {k: dict(v) for k, v in (("labels", labels), ("annotations", annotations)) if v}
        if not changed:
            return (Patch("merge", {"spec": {**meta, "suspend": False}}),)
        return (Patch("merge", {"spec": {**meta, "podSpecOverrides": overrides}}),
                Patch("merge", {"spec": {"suspend": False}}))

    def hold_manifest(self, manifest: Mapping[str, Any], *, name: str, namespace: str,
                      labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> KubeObject:
        obj = fresh_manifest(self.identity, manifest, name=name, namespace=namespace, labels=labels,
                             annotations=annotations)
        spec = obj.setdefault("spec", {})
        spec["podSpecOverrides"], _ = self._gated_overrides(obj, self.read_pod_sets(obj, related))
        for key, values in (("labels", labels), ("annotations", annotations)):
            if values:
                spec[key] = {**(spec.get(key) or {}), **values}
        spec["suspend"] = False
        return obj

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        return [{JOBSET_NAME_LABEL: str((obj.get("metadata") or {}).get("name", ""))}]

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(JOBSET_NAME_LABEL) != (obj.get("metadata") or {}).get("name"):
            return None
        job = labels.get(REPLICATED_JOB_LABEL)
        return role_name(job) if job else None

    def state(self, obj: Mapping[str, Any]) -> State:
        ended = ended_by_conditions(obj)
        if ended is not None:
            return ended
        if self.suspended(obj):
            return State(None, "suspended")
        jobs = [j for j in (obj.get("status") or {}).get("jobsStatus") or [] if isinstance(j, dict)]
        active = sum(count_of(j.get("active"), 0) for j in jobs)
        if active:
            return State("running", f"{active} Jobs active")
        return State("running", "not suspended (trainer v2.0 reports no progress of its jobs)")


TRAINJOB = TrainJobKind()
