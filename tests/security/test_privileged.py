"""Elevated pod specs (privileged, host namespaces, hostPath, root) are refused on every submission path
unless the queue's ``allow_privileged`` is set; when allowed, the dispatcher renders exactly what was asked."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from schemas.decisions import JobRejected
from schemas.intents import SubmitJob
from schemas.jobspec import SecuritySpec
from services.dispatcher.render import JobTemplate, PodSecurity, render_job
from services.gateway.kube_jobs import NotSubmittable, submission_from_job
from services.queue_manager.intents import on_intent
from services.queue_manager.queue_state import QueueState
from tests.gateway.builders import T0, harness
from tests.gateway.test_kube_jobs import EXAMPLE
from tests.kube.builders import placement
from tests.queue_manager.builders import NOW, folded_state, of_type, submit

K8S_VERSION = "1.30"

ELEVATED: list[dict[str, Any]] = [
    {"privileged": True}, {"run_as_root": True}, {"host_network": True}, {"host_pid": True}, {"host_ipc": True},
    {"host_path_volumes": ["/var/run/docker.sock"]},
]


def _kube_job() -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    obj["metadata"].update({"uid": "0f3c-uid", "resourceVersion": "7"})
    return obj


def _sidecar(**extra: Any) -> dict[str, Any]:
    return {"name": "sidecar", "image": "registry.example/tool:1", **extra}


#: labelled Jobs whose elevation hides outside the first container's own securityContext
HIDDEN_ELEVATION: dict[str, Any] = {
    "privileged sidecar": lambda pod: pod["containers"].append(_sidecar(securityContext={"privileged": True})),
    "privileged init container": lambda pod: pod.update(
        initContainers=[_sidecar(securityContext={"privileged": True})]),
    "root init container": lambda pod: pod.update(initContainers=[_sidecar(securityContext={"runAsUser": 0})]),
    "root pod default": lambda pod: pod.update(securityContext={"runAsUser": 0}),
    "root sidecar under a non-root pod": lambda pod: (
        pod.update(securityContext={"runAsUser": 1000}),
        pod["containers"].append(_sidecar(securityContext={"runAsUser": 0}))),
    "added capabilities": lambda pod: pod["containers"][0].update(
        securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
    "privilege escalation in a sidecar": lambda pod: pod["containers"].append(
        _sidecar(securityContext={"allowPrivilegeEscalation": True, "capabilities": {"add": ["NET_ADMIN"]}})),
    "hostPath volume": lambda pod: pod.update(volumes=[{"name": "sock", "hostPath": {"path": "/run"}}]),
    "hostPID": lambda pod: pod.update(hostPID=True),
    "hostIPC": lambda pod: pod.update(hostIPC=True),
}


@pytest.mark.parametrize("change", list(HIDDEN_ELEVATION.values()), ids=list(HIDDEN_ELEVATION))
def test_labelled_jobs_are_checked_in_every_container(change: Any) -> None:
    gw = harness()
    obj = _kube_job()
    change(obj["spec"]["template"]["spec"])
    with pytest.raises(NotSubmittable, match="does not allow"):
        submission_from_job(obj, gw.ctx.config, T0)
    obj["metadata"]["labels"]["muster.dev/queue"] = "team-a-ops"  # allow_privileged
    assert submission_from_job(obj, gw.ctx.config, T0).spec.template.security.elevated


def _raw_submission(job_id: str, tenant: str = "team-a", **security: Any) -> SubmitJob:
    plain = submit(job_id)
    template = plain.spec.template.model_copy(update={"security": SecuritySpec(**security)})
    return plain.model_copy(update={"tenant": tenant,
                                    "spec": plain.spec.model_copy(update={"template": template})})


@pytest.mark.parametrize("security", ELEVATED, ids=[next(iter(s)) for s in ELEVATED])
def test_queue_manager_refuses_elevated_intents_written_straight_to_kafka(security: dict[str, Any]) -> None:
    qs = folded_state()
    outs = on_intent(qs, _raw_submission("raw-1", **security), NOW)
    [rejected] = of_type(outs, JobRejected)
    assert (rejected.reason, rejected.attempt) == ("privileged_not_allowed", 0)
    assert next(iter(security)) in rejected.message
    assert qs.jobs["raw-1"].state == "rejected"


def test_queue_manager_refuses_another_tenants_queue_and_queues_the_owner() -> None:
    qs: QueueState = folded_state()
    [rejected] = of_type(on_intent(qs, _raw_submission("raw-x", tenant="kube-system"), NOW), JobRejected)
    assert rejected.reason == "forbidden_queue" and "kube-system" in rejected.message
    assert of_type(on_intent(qs, _raw_submission("raw-ok"), NOW), JobRejected) == []
    assert qs.jobs["raw-ok"].state == "pending"


def _template(security: PodSecurity) -> JobTemplate:
    return JobTemplate(job_id="ops-1", namespace="ns-team-a", queue="team-a-ops", image="registry.example/ops:1",
                       replicas=1, gpus_per_pod=1, gpu_type="a100", security=security)


def test_an_ordinary_job_renders_no_elevation() -> None:
    job = render_job(_template(PodSecurity()), 0, placement(("east-a100-0", 1)))
    pod = job["spec"]["template"]["spec"]
    assert not {"hostNetwork", "hostPID", "hostIPC", "volumes"} & set(pod)
    assert "securityContext" not in pod["containers"][0]


def test_an_allowed_elevated_job_renders_what_it_asked_for() -> None:
    security = PodSecurity(privileged=True, run_as_root=True, host_network=True, host_pid=True, host_ipc=True,
                           host_paths=("/var/run/docker.sock", "/dev/infiniband"))
    job = render_job(_template(security), 0, placement(("east-a100-0", 1)))
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["securityContext"] == {"privileged": True, "runAsUser": 0, "runAsNonRoot": False}
    assert (pod["hostNetwork"], pod["hostPID"], pod["hostIPC"]) == (True, True, True)
    assert [v["hostPath"]["path"] for v in pod["volumes"]] == ["/var/run/docker.sock", "/dev/infiniband"]
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/var/run/docker.sock", "/dev/infiniband"]
