"""The one ``JobSpec`` builder of the unit, integration and Kubernetes tiers' tests.

The end-to-end tier (tests/e2e, and the ui, hostile and security tests that run the whole system) sends
JSON bodies to the gateway instead: its one builder is ``tests.e2e.builders.job_spec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest

IMAGE = "registry.example/train:1"


def job_spec(name: str = "train", queue: str = "team-a", *, replicas: int | None = None, gpus: int = 4,
             gpu_type: str | None = "a100", cpu: str = "1", memory: str = "4Gi", image: str = IMAGE,
             pod: Mapping[str, Any] | None = None, **fields: Any) -> JobSpec:
    """A job of ``name`` in ``queue`` (its tenant's), validated as the gateway would.

    Defaults: a gang of ``replicas`` 2 pods, each of ``gpus`` 4 whole GPUs of ``gpu_type`` a100, ``cpu`` 1
    and ``memory`` 4Gi (the schema's own), running ``image`` registry.example/train:1 with no command or
    env; every other field the schema's default (priority class normal, preemptible, max_restarts 3, no
    checkpoint, no runtime estimate, no topology, no schedule, no dependencies).

    ``pod``: more fields of the pod template (``command``, ``args``, ``env``...). ``fields``: any other
    field of ``JobSpec``; a ``template`` there replaces the pod template built from the arguments above,
    and ``roles`` makes a job of several roles (then the resources and ``pod`` do not apply, each role gives
    its own, and ``replicas`` is left out unless given: a test may give it to see it refused).
    """
    if "roles" in fields:
        given = {} if replicas is None else {"replicas": replicas}
        return JobSpec(name=name, queue=queue, **given, **fields)
    if "template" not in fields:
        resources = ResourceRequest(gpus=gpus, gpu_type=gpu_type, cpu=cpu, memory=memory)
        fields["template"] = PodTemplate(image=image, resources=resources, **(pod or {}))
    return JobSpec(name=name, queue=queue, replicas=2 if replicas is None else replicas, **fields)
