"""The workload controllers really reconcile on the real control plane: JobSet v0.10.1, LeaderWorkerSet
v0.7.0, KubeRay v1.5.0 and Kubeflow Trainer v2.0.0, built from their Go modules, with their CRDs and
webhooks (served on loopback with Muster's certificates). One control plane with all four runs for the
whole module; each test makes its own objects in its own namespace.

Skipped when the controllers cannot be built (no Go toolchain, no module source), except under CI,
where ``scripts/test`` builds them first and a missing build is a failure.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import pytest_asyncio

from services.kubereal.bootstrap import bootstrap
from services.kubereal.build import BuildError
from services.kubereal.controller_build import ControllerBuild, build_controllers
from services.kubereal.controller_catalog import ALL, resolve
from services.kubereal.controllers import Controllers
from services.kubereal.controlplane import KWOK_NODE_ANNOTATION, ControlPlane
from services.runtime.kube import JOBS, NODES, PODS, KubeObject, KubeRest, Resource, build_api_client, ensure_namespace
from services.spec.cluster_file import load_cluster_file
from tests.builders.realkube import RealKube

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"
# a cold build of the four controllers takes minutes; with them cached the module takes well under one
pytestmark = [pytest.mark.realkube, pytest.mark.timeout(1200)]

JOBSETS = Resource("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", namespaced=True)
LWS = Resource("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", namespaced=True)
RAYCLUSTERS = Resource("ray.io/v1", "RayCluster", "rayclusters", namespaced=True)
TRAINJOBS = Resource("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", namespaced=True)
STATEFULSETS = Resource("apps/v1", "StatefulSet", "statefulsets", namespaced=True)
WAIT_S = 60.0
T = TypeVar("T")

#: a pod that fits any node of the cluster file (they are all tainted for GPUs)
POD_SPEC: KubeObject = {
    "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def controller_builds() -> dict[str, ControllerBuild]:
    try:
        return build_controllers(resolve([ALL]), lambda m: print(f"[controllers] {m}"))
    except BuildError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the workload controllers could not be built under CI: {exc}")
        pytest.skip(f"the workload controllers could not be built: {exc}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def plane(real_kube: RealKube, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ControlPlane]:
    """A control plane of this module alone, with the cluster file's KWOK nodes and all four controllers."""
    builds = controller_builds()
    cluster = load_cluster_file(CLUSTER_FILE).clusters[0]
    # started on this (the main) thread, which outlives the module's tests: see tests/builders/realkube.py
    control = ControlPlane(tmp_path_factory.mktemp("controllers"), real_kube.binaries, name="controllers",
                           profile="fast")
    control.start()
    controllers = Controllers(control, builds)
    try:
        await bootstrap(control, cluster)
        controllers.start()
        yield control
        controllers.check_alive()
    finally:
        controllers.close()
        control.close()


@pytest.fixture
async def kube(plane: ControlPlane, request: pytest.FixtureRequest) -> AsyncIterator[tuple[KubeRest, str]]:
    """The administrator's client and a namespace of the test's own."""
    namespace = request.node.name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")
    api = await build_api_client(kubeconfig=str(plane.admin_kubeconfig))
    async with api:
        rest = KubeRest(api, request_timeout=10.0)
        await ensure_namespace(rest, namespace)
        yield rest, namespace


async def eventually(what: str, probe: Callable[[], Awaitable[T | None]], timeout_s: float = WAIT_S) -> T:
    """``probe()`` until it returns something (not None)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        found = await probe()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        await asyncio.sleep(0.25)


async def kwok_nodes(rest: KubeRest) -> set[str]:
    nodes, _ = await rest.list(NODES)
    return {n["metadata"]["name"] for n in nodes
            if (n["metadata"].get("annotations") or {}).get(KWOK_NODE_ANNOTATION) == "fake"}


async def pods_on_nodes(rest: KubeRest, namespace: str, selector: str, count: int) -> list[KubeObject] | None:
    """The pods of ``selector``, once there are ``count`` and each is bound to a KWOK node."""
    pods, _ = await rest.list(PODS, namespace, label_selector=selector)
    nodes = await kwok_nodes(rest)
    if len(pods) == count and all(p["spec"].get("nodeName") in nodes for p in pods):
        return pods
    return None


def jobset(name: str, namespace: str, *, suspend: bool) -> KubeObject:
    def replicated(job: str, replicas: int) -> KubeObject:
        return {"name": job, "replicas": replicas,
                "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                                      "template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}}}
    return {"apiVersion": JOBSETS.api_version, "kind": "JobSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"suspend": suspend, "replicatedJobs": [replicated("driver", 1), replicated("workers", 2)]}}


async def test_a_jobset_makes_its_child_jobs_and_their_pods_run_on_kwok_nodes(
        kube: tuple[KubeRest, str]) -> None:
    rest, namespace = kube
    created = await rest.create(JOBSETS, jobset("train", namespace, suspend=False), namespace)
    # JobSet's defaulting webhook ran: these are what it sets when a client leaves them out
    assert created["spec"]["network"]["enableDNSHostnames"] is True
    assert created["spec"]["successPolicy"]["operator"] == "All"
    selector = "jobset.sigs.k8s.io/jobset-name=train"

    async def child_jobs() -> list[KubeObject] | None:
        jobs, _ = await rest.list(JOBS, namespace, label_selector=selector)
        return jobs if len(jobs) == 3 else None

    jobs = await eventually("the JobSet's three child Jobs", child_jobs)
    assert sorted(j["metadata"]["name"] for j in jobs) == ["train-driver-0", "train-workers-0", "train-workers-1"]
    assert all(j["metadata"]["ownerReferences"][0]["kind"] == "JobSet" for j in jobs)
    pods = await eventually("the child Jobs' pods on KWOK nodes", lambda: pods_on_nodes(rest, namespace, selector, 3))
    assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods} == {"driver", "workers"}


async def test_a_suspended_jobset_creates_no_pods(kube: tuple[KubeRest, str]) -> None:
    rest, namespace = kube
    await rest.create(JOBSETS, jobset("held", namespace, suspend=True), namespace)
    selector = "jobset.sigs.k8s.io/jobset-name=held"

    async def suspended_jobs() -> list[KubeObject] | None:
        jobs, _ = await rest.list(JOBS, namespace, label_selector=selector)
        return jobs if len(jobs) == 3 else None

    jobs = await eventually("the suspended JobSet's child Jobs", suspended_jobs)
    assert all(j["spec"]["suspend"] is True for j in jobs)
    await asyncio.sleep(3)  # the Job controller has had time to act on them
    pods, _ = await rest.list(PODS, namespace, label_selector=selector)
    assert pods == []
    status = (await rest.get(JOBSETS, "held", namespace)).get("status") or {}
    assert any(c["type"] == "Suspended" and c["status"] == "True" for c in status.get("conditions") or []), status


async def test_a_leaderworkerset_makes_statefulsets_and_leader_and_worker_pods(kube: tuple[KubeRest, str]) -> None:
    rest, namespace = kube
    await rest.create(LWS, {
        "apiVersion": LWS.api_version, "kind": "LeaderWorkerSet", "metadata": {"name": "serve", "namespace": namespace},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": POD_SPEC}}},
    }, namespace)

    async def statefulsets() -> list[str] | None:
        sets, _ = await rest.list(STATEFULSETS, namespace)
        names = sorted(s["metadata"]["name"] for s in sets)
        return names if len(names) == 3 else None

    # the leaders' StatefulSet, and one of workers per group (made once its leader pod exists)
    assert await eventually("the LeaderWorkerSet's StatefulSets", statefulsets) == ["serve", "serve-0", "serve-1"]
    pods = await eventually("2 leader and 2 worker pods on KWOK nodes",
                            lambda: pods_on_nodes(rest, namespace, "leaderworkerset.sigs.k8s.io/name=serve", 4))
    # the LWS pod webhook labelled each pod with its group and its place in it
    places = sorted((p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"],
                     p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"]) for p in pods)
    assert places == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]


async def test_a_raycluster_makes_its_head_and_worker_pods(kube: tuple[KubeRest, str]) -> None:
    rest, namespace = kube
    ray_pod = {**POD_SPEC, "containers": [{"name": "ray", "image": "rayproject/ray:2.46.0"}]}
    await rest.create(RAYCLUSTERS, {
        "apiVersion": RAYCLUSTERS.api_version, "kind": "RayCluster",
        "metadata": {"name": "ray", "namespace": namespace},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": ray_pod}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                                  "rayStartParams": {}, "template": {"spec": ray_pod}}],
        },
    }, namespace)
    pods = await eventually("the RayCluster's head and worker pods",
                            lambda: pods_on_nodes(rest, namespace, "ray.io/cluster=ray", 2))
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker"]


async def test_a_trainjob_on_the_torch_runtime_makes_its_jobset(kube: tuple[KubeRest, str]) -> None:
    rest, namespace = kube
    await rest.create(TRAINJOBS, {
        "apiVersion": TRAINJOBS.api_version, "kind": "TrainJob", "metadata": {"name": "tune", "namespace": namespace},
        "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"},
                 "trainer": {"numNodes": 2}},
    }, namespace)

    async def child_jobset() -> KubeObject | None:
        sets, _ = await rest.list(JOBSETS, namespace)
        return sets[0] if sets else None

    made = await eventually("the TrainJob's JobSet", child_jobset)
    assert made["metadata"]["name"] == "tune"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    node = next(r for r in made["spec"]["replicatedJobs"] if r["name"] == "node")
    assert node["template"]["spec"]["parallelism"] == 2  # the TrainJob's numNodes over the runtime's 1
