"""Reading a pod template: the pod's request as the scheduler computes it, the first container, security."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.jobspec import EnvVar, SecretKeyRef
from services.spec.kube_pods import container_resources, pod_resources, pod_template


def _c(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
       **extra: Any) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": name, "image": "img", "resources": resources, **extra}


@pytest.mark.parametrize(("pod", "gpus", "cpu", "memory"), [
    # containers add up
    ({"containers": [_c("a", {"cpu": "1", "memory": "1Gi"}), _c("b", {"cpu": "500m", "memory": "512Mi"})]},
     0, "1500m", "1536Mi"),
    # a missing request is the limit
    ({"containers": [_c("a", limits={"cpu": 2, "memory": "8Gi", "nvidia.com/gpu": 4})]}, 4, "2", "8Gi"),
    # GPUs of every container, from limits or requests
    ({"containers": [_c("a", limits={"nvidia.com/gpu": "2"}), _c("b", {"nvidia.com/gpu": 1})]}, 3, "1", "4Gi"),
    # an init container asking more than the containers sets the request
    ({"containers": [_c("a", {"cpu": "1", "memory": "1Gi"})],
      "initContainers": [_c("init", {"cpu": "4", "memory": "512Mi"})]}, 0, "4", "1Gi"),
    # a sidecar (restartable init container) runs beside the containers: added; a later init container runs
    # beside it too
    ({"containers": [_c("a", {"cpu": "1", "memory": "1Gi"})],
      "initContainers": [_c("proxy", {"cpu": "500m", "memory": "256Mi"}, restartPolicy="Always"),
                         _c("fetch", {"cpu": "2", "memory": "128Mi"})]}, 0, "2500m", "1280Mi"),
    # the RuntimeClass's overhead is added
    ({"containers": [_c("a", {"cpu": "1", "memory": "1Gi"})], "overhead": {"cpu": "250m", "memory": "64Mi"}},
     0, "1250m", "1088Mi"),
    # pod-level resources win over the containers'
    ({"containers": [_c("a", {"cpu": "1", "memory": "1Gi"})], "resources": {"requests": {"cpu": "3"}}},
     0, "3", "1Gi"),
    # nothing stated: the spec's defaults
    ({"containers": [_c("a")]}, 0, "1", "4Gi"),
    # decimal units stay decimal, odd amounts fall back to smaller units
    ({"containers": [_c("a", {"cpu": "0.1", "memory": "1G"})]}, 0, "100m", "1G"),
    ({"containers": [_c("a", {"cpu": "1.0005", "memory": "1.5Gi"})]}, 0, "1001m", "1536Mi"),
])
def test_the_pods_request_as_the_scheduler_computes_it(pod: dict[str, Any], gpus: int, cpu: str,
                                                       memory: str) -> None:
    res = pod_resources({**pod, "nodeSelector": {"muster.dev/gpu-type": "a100"}})
    assert (res.gpus, res.cpu, res.memory, res.gpu_type) == (gpus, cpu, memory, "a100")


def test_one_containers_resources_as_the_kube_native_job_path_reads_them() -> None:
    res = container_resources(_c("a", {"cpu": "8", "memory": "64Gi"}, {"nvidia.com/gpu": 4}),
                              {"muster.dev/gpu-type": "h100"})
    assert (res.gpus, res.gpu_type, res.cpu, res.memory) == (4, "h100", "8", "64Gi")


def test_the_template_is_the_first_containers_and_security_counts_every_container() -> None:
    pod = {
        "hostIPC": True,
        "volumes": [{"name": "scratch", "hostPath": {"path": "/scratch"}}, {"name": "tmp", "emptyDir": {}}],
        "initContainers": [{"name": "setup", "image": "busybox", "securityContext": {"privileged": True}}],
        "containers": [
            {"name": "main", "image": "registry.example/app:1", "command": ["python"], "args": ["run.py"],
             "workingDir": "/work",
             "env": [{"name": "LR", "value": "0.1"}, {"name": "SORT_KEY", "value": "id"},
                     {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
                     {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
             "envFrom": [{"secretRef": {"name": "wandb"}, "prefix": "WANDB_"}, {"configMapRef": {"name": "cfg"}}]},
            {"name": "sidecar", "image": "registry.example/log:1", "securityContext": {"runAsUser": 0}},
        ],
    }
    t = pod_template(pod, frozenset({"SORT_KEY"}))
    assert (t.image, t.command, t.args, t.working_dir) == ("registry.example/app:1", ["python"], ["run.py"], "/work")
    assert t.env == {"LR": "0.1", "SORT_KEY": EnvVar(value="id", not_secret=True),
                     "HF_TOKEN": EnvVar(secret_ref=SecretKeyRef(name="hf", key="token"))}
    assert [(e.secret_ref.name, e.prefix) for e in t.env_from] == [("wandb", "WANDB_")]
    s = t.security
    assert (s.privileged, s.run_as_root, s.host_ipc, s.host_network, s.host_path_volumes) == (
        True, True, True, False, ["/scratch"])


def test_a_pod_without_containers_cannot_be_read() -> None:
    with pytest.raises(ValueError, match="no containers"):
        pod_template({"containers": []})
