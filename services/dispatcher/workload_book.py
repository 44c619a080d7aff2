"""The dispatcher's record of one attempt of a job that is a workload object (see ``workloads``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.decisions import PlacementPlan
from services.dispatcher.book import Preemption
from services.runtime.kube import KubeObject, Resource
from services.spec.kinds import WorkloadKind


def resource_of(kind: WorkloadKind) -> Resource:
    ident = kind.identity
    return Resource(ident.api_version, ident.kind, ident.plural, ident.namespaced)


@dataclass(slots=True)
class WorkloadRun:
    """One attempt of a job that is a workload object on this cluster."""

    job_id: str
    attempt: int
    namespace: str
    name: str
    kind: WorkloadKind
    plan: PlacementPlan
    main_role: str
    owned: bool  # created by Muster (deleted when the attempt ends), else its owner's
    obj: KubeObject = field(default_factory=dict)  # the object as last read
    related: list[KubeObject] = field(default_factory=list)
    correlation_id: str = ""
    decision_event: str = ""
    preemption: Preemption | None = None
    reported: bool = False
    uses_gpus: bool = True  # some pod of the job asks for GPUs (its pods then tolerate the GPU taint)

    @property
    def resource(self) -> Resource:
        return resource_of(self.kind)
