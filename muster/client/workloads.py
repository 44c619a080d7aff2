"""Kubernetes objects of a workload kind (JobSet, TrainJob, RayJob, RayCluster, LeaderWorkerSet, Deployment,
StatefulSet, a ``List`` of Pods) submitted through Muster: wrapped into a job spec whose ``workload.manifest`` is
the object and whose roles are read from it (``services.spec.workload_spec.spec_from_workload``), so the
gateway queues it and the dispatcher creates it, held back, once the job is admitted.

    spec = workload_spec(yaml.safe_load(open("jobset.yaml")), queue="team-a")
    client.submit(spec)            # or client.submit_workload(obj, queue="team-a")

The queue is the one given, else the object's ``muster.dev/queue`` label; the priority class, runtime estimate
and preemptibility come from the annotations ``muster.dev/priority-class``, ``muster.dev/runtime-estimate`` and
``muster.dev/preemptible``. A TrainJob's roles come from its training runtime: pass it in ``related``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from muster.client.errors import InvalidWorkload
from schemas.jobspec import JobSpec
from services.spec.kinds import NotQueueable
from services.spec.workload_spec import is_kube_object, spec_from_workload

__all__ = ["is_kube_object", "workload_spec"]


def workload_spec(obj: Mapping[str, Any], *, queue: str | None = None,
                  related: Sequence[Mapping[str, Any]] = ()) -> JobSpec:
    """The job spec that submits ``obj`` through Muster; ``InvalidWorkload`` says why there is none (a kind
    Muster does not queue, no queue, a TrainJob without its runtime, pod sets that do not make a job...)."""
    try:
        return spec_from_workload(obj, related, queue=queue, kube_native=False)
    except NotQueueable as exc:
        raise InvalidWorkload(exc.reason) from None
