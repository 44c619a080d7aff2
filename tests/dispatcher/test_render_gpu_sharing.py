"""GPU sharing through the cluster: the dispatcher renders MIG and fractional jobs, kubesim nodes advertise
shared GPUs and MIG slices, kubesim admits pods against them, and the node watcher reads them back."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import kubernetes_validate

from schemas.config import ClusterConfig, NodeGroupConfig
from schemas.decisions import NodePods, PlacementPlan
from services.dispatcher.render import render_job
from services.kubesim.nodes import cluster_nodes
from services.kubesim.scheduler import fit_problem, pod_requests
from services.node_watcher.nodes import node_state
from tests.kube.builders import template

K8S_VERSION = "1.30"
HALF_PLAN = PlacementPlan(cluster="east", nodes=[NodePods(node="east-share-0", pods=2, gpu_fraction=0.5,
                                                          gpu_slots=[0, 1])])
MIG_PLAN = PlacementPlan(cluster="east", nodes=[NodePods(node="east-share-0", pods=1, mig_profile="1g.10gb",
                                                         mig_slices=2)])


def _group() -> NodeGroupConfig:
    return NodeGroupConfig(name="share", count=1, gpus_per_node=4, gpu_type="a100", shared_gpus=2, mig_gpus=1,
                           mig_layout={"1g.10gb": 7}, taints=["nvidia.com/gpu:NoSchedule"])


def _node() -> dict[str, Any]:
    [node] = cluster_nodes(ClusterConfig(name="east", node_groups=[_group()]))
    return node


def _pods(job: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The pods kubesim's Job controller makes from the template (the completion index annotated)."""
    pods = []
    for i in range(count):
        meta = job["spec"]["template"]["metadata"]
        annotations = {**meta["annotations"], "batch.kubernetes.io/job-completion-index": str(i)}
        pods.append({"metadata": {**meta, "annotations": annotations}, "spec": job["spec"]["template"]["spec"]})
    return pods


def test_mig_job_asks_for_its_slices_as_extended_resources() -> None:
    tpl = template(gpus_per_pod=0, mig_profile="1g.10gb", mig_slices=2, replicas=1)
    job = render_job(tpl, 0, MIG_PLAN)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "2"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["nodeSelector"] == {"muster.dev/gpu-type": "a100"}
    assert "gpu-fraction" not in job["spec"]["template"]["metadata"]["annotations"]


def test_fractional_job_carries_kai_gpu_fraction_and_its_slots() -> None:
    tpl = template(gpus_per_pod=0, gpu_fraction=0.5, replicas=2)
    job = render_job(tpl, 0, HALF_PLAN)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod_meta, pod = job["spec"]["template"]["metadata"], job["spec"]["template"]["spec"]
    assert pod_meta["annotations"]["gpu-fraction"] == "0.5"
    assert pod_meta["annotations"]["muster.dev/gpu-slots"] == "[0,1]"
    assert "limits" not in pod["containers"][0]["resources"]  # no whole GPU: KAI-style sharing
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In",
                                         "values": ["east-share-0"]}]
    assert "gpu-fraction" not in job["metadata"]["annotations"]  # on the pods, where KAI reads it


def test_whole_gpu_render_is_unchanged_by_the_new_fields() -> None:
    job = render_job(template(), 0, PlacementPlan(cluster="east", nodes=[NodePods(node="n1", pods=2)]))
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert "muster.dev/gpu-slots" not in job["spec"]["template"]["metadata"]["annotations"]


def test_kubesim_node_advertises_whole_gpus_mig_slices_and_shared_gpus() -> None:
    node = _node()
    allocatable = node["status"]["allocatable"]
    assert allocatable["nvidia.com/gpu"] == "3" and allocatable["nvidia.com/mig-1g.10gb"] == "7"
    assert node["metadata"]["labels"]["muster.dev/shared-gpus"] == "2"
    state = node_state(node, "east")  # what the node watcher reports
    assert (state.gpus_allocatable, state.gpus_shared, state.mig) == (3, 2, {"1g.10gb": 7})


def test_kubesim_fits_fractions_per_shared_gpu() -> None:
    node = _node()
    tpl = template(gpus_per_pod=0, gpu_fraction=0.5, replicas=2)
    first, second = _pods(render_job(tpl, 0, HALF_PLAN), 2)
    assert pod_requests(first)["kubesim.muster.dev/shared-gpu-0"] == Decimal("0.5")
    assert pod_requests(second)["kubesim.muster.dev/shared-gpu-1"] == Decimal("0.5")
    used = {"kubesim.muster.dev/shared-gpu-0": Decimal("0.5")}
    assert fit_problem(first, node, used) is None  # two halves fill shared GPU 0
    full = {"kubesim.muster.dev/shared-gpu-0": Decimal("0.75")}
    assert fit_problem(first, node, full) == "Insufficient kubesim.muster.dev/shared-gpu-0"
    plain = cluster_nodes(ClusterConfig(name="east", node_groups=[
        NodeGroupConfig(name="plain", count=1, gpus_per_node=4, gpu_type="a100")]))[0]
    assert fit_problem(first, plain, {}) is not None  # no shared GPUs on it


def test_kubesim_fits_mig_slices_per_profile() -> None:
    node = _node()
    [pod] = _pods(render_job(template(gpus_per_pod=0, mig_profile="1g.10gb", mig_slices=2, replicas=1), 0,
                             MIG_PLAN), 1)
    assert fit_problem(pod, node, {"nvidia.com/mig-1g.10gb": Decimal(5)}) is None
    assert fit_problem(pod, node, {"nvidia.com/mig-1g.10gb": Decimal(6)}) == "Insufficient nvidia.com/mig-1g.10gb"
