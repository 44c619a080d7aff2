"""Builders of the hostile-input and security tests: configuration, raw submissions, liveness checks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas.config import MusterConfig, QueueConfig, ResourceQuotaConfig, TenantConfig
from services.spec.ids import random_job_id
from tests.e2e.builders import TENANTS, gpu_cluster, job_spec, muster_config
from tests.e2e.system import System
from tests.hostile.records import envelope

PRIVILEGED_QUEUE = "team-a-ops"


def namespace_of(tenant: str) -> str:
    """Tenants' namespaces differ from their names, so a job landing in ``<tenant>`` would be a bug."""
    return f"ns-{tenant}"


def hostile_config() -> MusterConfig:
    """One cluster of two 8-GPU nodes; queues ``team-a``, ``team-b`` and ``team-a-ops`` (privileged allowed)."""
    base = muster_config([gpu_cluster("east", nodes=2, gpus_per_node=8)], nominal=16)
    ops = QueueConfig(name=PRIVILEGED_QUEUE, cohort="research", tenant="team-a", allow_privileged=True,
                      quotas={"gpu:a100": ResourceQuotaConfig(nominal=8)})
    return base.model_copy(update={
        "queues": [*base.queues, ops],
        "tenants": [TenantConfig(name=t, namespace=namespace_of(t)) for t in TENANTS],
    })


def submit_envelope(spec: dict[str, Any], *, tenant: str = "team-a", job_id: str | None = None,
                    user: str = "pipeline") -> tuple[str, dict[str, Any]]:
    """A ``SubmitJob`` envelope as an external pipeline writes it onto the intents topic, under a fresh id of
    ``tenant`` (``services.spec.ids``) unless ``job_id`` says otherwise."""
    job_id = job_id or random_job_id(spec["name"], tenant)
    payload = {"job_id": job_id, "tenant": tenant, "user": user, "spec": spec,
               "submitted_at": datetime.now(UTC).isoformat()}
    return job_id, envelope("SubmitJob", payload, occurred_at=datetime.now(UTC).isoformat())


def assert_all_running(system: System) -> None:
    """No service task has ended (a crash would end it with the error)."""
    ended = {name: svc.task for name, svc in system.services.items() if svc.task.done()}
    for name, task in ended.items():
        error = None if task.cancelled() else task.exception()
        raise AssertionError(f"service {name} stopped: {error!r}")


async def run_valid_job(system: System, name: str = "after-hostile") -> dict[str, Any]:
    """A plain job through the API to its end; returns its final view."""
    job_id = await system.api.submit(job_spec(name, gpus=1, duration_s=0.5))
    return await system.api.wait_state(job_id, "succeeded", "failed", "rejected", within=60)
