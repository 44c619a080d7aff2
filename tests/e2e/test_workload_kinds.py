"""Every workload kind through the whole system, on a real control plane running its real controller.

JobSet v0.10.1, Kubeflow Trainer v2.0.0, KubeRay v1.5.0 and LeaderWorkerSet v0.7.0 are built from their
Go modules and run beside kube-apiserver (``muster k8s build --controllers all``); Deployments are run by
kube-controller-manager. Each test creates the example object of its kind (``examples/kube``) the way a
user would with kubectl, held back and labelled with its queue, and follows it through Muster:

- while its queue's quota is taken by a running job, it waits and no pod of it is scheduled (a kind held by
  suspension has none; the pods of a kind held by the admission gate wait gated);
- it is admitted whole once the quota is free, and every pod runs on a node the admission planned for
  its role;
- a batch kind succeeds (its controller says so); a serving or Ray kind runs (KWOK runs no Ray, so a
  RayJob's submitter cannot finish here);
- a higher-priority job preempts it whole: it is held back again, its pods go, it is requeued and
  admitted again afterwards as its next attempt;
- at the end no GPU of the queue is in use.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas.config import MusterConfig
from schemas.decisions import JobAdmitted, JobScaled
from schemas.kube import IDLE_TIMEOUT, JOB_ID
from services.kubesim.dcgm_exporter import SIMULATED_UTIL, DcgmExporter
from services.kubesim.kubelet import DURATION_ANNOTATION
from services.runtime.kafka import KafkaSettings
from services.runtime.kube import PODS, KubeObject, KubeRest, Resource
from services.spec.ids import kube_workload_id
from services.spec.kinds import kind_of
from services.spec.kinds.patching import get_at, set_at
from tests.builders.realkube import RealKube
from tests.e2e.builders import gpu_cluster, job_spec, muster_config
from tests.e2e.system import System, running_system

pytestmark = [pytest.mark.e2e, pytest.mark.realkube, pytest.mark.timeout(900)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kube"
NAMESPACE = "team-a"
WAIT_S = 120.0


@pytest.fixture
def e2e_config() -> MusterConfig:
    """Two 8-GPU nodes; each tenant's queue holds 16 GPUs and may not borrow (so a full queue waits)."""
    return muster_config([gpu_cluster("east", nodes=2, gpus_per_node=8)], nominal=16, borrowing_limit=0)


@pytest.fixture
async def kinds_system(e2e_settings: KafkaSettings, e2e_config: MusterConfig, tmp_path: Path,
                       real_kube: RealKube) -> AsyncIterator[System]:
    """The whole system on the real control plane with every workload controller running."""
    await real_kube.with_controllers(0)
    async with running_system(e2e_settings, e2e_config, tmp_path, real=real_kube) as running:
        yield running
    assert running.log.dead_letters == [], "messages went to a dead-letter topic"


def example(file: str, name: str, *, seconds: float | None = None) -> KubeObject:
    """The example object of a kind under a name of the test's own; with ``seconds``, its pods run that long."""
    obj: KubeObject = yaml.safe_load((EXAMPLES / file).read_text(encoding="utf-8"))
    obj = copy.deepcopy(obj)
    obj["metadata"]["name"] = name
    obj["metadata"]["namespace"] = NAMESPACE
    # as low as the job that holds the quota first: it waits for it rather than preempting it
    obj["metadata"].setdefault("annotations", {})["muster.dev/priority-class"] = "low"
    if seconds is not None:
        kind = kind_of(obj)
        for pod_set in kind.read_pod_sets(obj):
            if pod_set.path is None:
                continue
            template = get_at(obj, pod_set.path)
            if isinstance(template, dict):
                set_at(template, ("metadata", "annotations", DURATION_ANNOTATION), f"{seconds:g}")
    return obj


def resource(obj: KubeObject) -> Resource:
    ident = kind_of(obj).identity
    return Resource(ident.api_version, ident.kind, ident.plural, ident.namespaced)


async def create(system: System, obj: KubeObject) -> str:
    """Create ``obj`` as its owner would; the id of the job the gateway makes of it."""
    rest = system.first_cluster().rest
    created = await rest.create(resource(obj), obj, NAMESPACE)
    return kube_workload_id(obj["kind"], NAMESPACE, obj["metadata"]["name"], created["metadata"]["uid"],
                            tenant=NAMESPACE)  # the namespace's tenant has its name


async def eventually(what: str, check: Callable[[], Any], within: float = WAIT_S) -> Any:
    try:
        async with asyncio.timeout(within):
            while True:
                found = await check()
                if found:
                    return found
                await asyncio.sleep(0.25)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {within:.0f}s") from None


async def pods_of(rest: KubeRest, selector: dict[str, str]) -> list[KubeObject]:
    query = ",".join(f"{k}={v}" for k, v in selector.items())
    items, _ = await rest.list(PODS, NAMESPACE, label_selector=query)
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def planned_per_role(system: System, job_id: str, attempt: int) -> dict[str, set[str]]:
    (admitted,) = [a for a in system.log.messages(JobAdmitted, job_id=job_id) if a.attempt == attempt]
    main = admitted.spec.main_role().name
    out: dict[str, set[str]] = {}
    for entry in admitted.placement.nodes:
        out.setdefault(entry.role or main, set()).add(entry.node)
    return out


async def assert_on_planned_nodes(system: System, job_id: str, attempt: int, count: int) -> None:
    """Every one of the ``count`` released pods of the attempt runs on a node planned for its role."""
    rest = system.first_cluster().rest

    async def running() -> list[KubeObject] | None:
        pods = [p for p in await pods_of(rest, {JOB_ID: job_id, "muster.dev/attempt": str(attempt)})
                if p["spec"].get("nodeName") and p["status"].get("phase") in ("Running", "Succeeded")]
        return pods if len(pods) >= count else None

    pods = await eventually(f"{count} pods of {job_id} running", running)
    planned = await planned_per_role(system, job_id, attempt)
    for pod in pods:
        role = pod["metadata"]["labels"]["muster.dev/role"]
        assert pod["spec"]["nodeName"] in planned[role], (role, pod["spec"]["nodeName"], planned)


async def blocker(system: System, *, gpus: int = 16, priority_class: str = "low") -> str:
    """A job that takes the queue's whole quota and runs until it is cancelled."""
    job = await system.api.submit(job_spec("blocker", gpus=8, replicas=gpus // 8, duration_s=3600,
                                           priority_class=priority_class))
    await system.api.wait_state(job, "running", within=WAIT_S)
    return job


async def queue_in_use(system: System) -> float:
    """GPUs the queue holds: by the jobs' statuses, and by the quota accountant's ledger."""
    r = await system.api.http.get("/v1/queues/team-a", headers=system.api._auth(None))
    assert r.status_code == 200, r.text
    queue = r.json()
    ledger = sum(v for k, v in ((queue.get("usage") or {}).get("allocated") or {}).items() if k.startswith("gpu:"))
    return float(queue["gpus_running"]) + float(ledger)


async def follow(system: System, obj: KubeObject, *, pods: int, selector: dict[str, str], ends: bool) -> None:
    """The life every kind goes through (see the module's docstring)."""
    rest = system.first_cluster().rest
    block = await blocker(system)
    job = await create(system, obj)
    waiting = await system.api.wait_job(job, lambda j: j["state"] == "pending" and bool(j["reason"]), within=WAIT_S)
    assert waiting["reason"] == "queue_quota_exhausted", waiting
    await asyncio.sleep(2)
    # a kind held by suspension has no pod yet; the pods of a kind held by the gate exist, gated, on no node
    loose = [p["metadata"]["name"] for p in await pods_of(rest, selector)
             if p["spec"].get("nodeName") or not p["spec"].get("schedulingGates")]
    assert loose == [], f"pods of a job still waiting for quota were scheduled: {loose}"

    await system.api.cancel(block)
    await system.api.wait_state(job, "admitted", "running", "succeeded", within=WAIT_S)
    await assert_on_planned_nodes(system, job, 0, pods)
    if ends:
        assert (await system.api.wait_state(job, "succeeded", "failed", within=WAIT_S))["state"] == "succeeded"
        await eventually("the queue's GPUs free", lambda: _zero(system))
        return

    await system.api.wait_state(job, "running", within=WAIT_S)
    urgent = await system.api.submit(job_spec("urgent", gpus=8, replicas=2, duration_s=3, priority_class="high"))
    again = await system.api.wait_job(job, lambda j: j["attempt"] == 1 and j["state"] == "pending", within=WAIT_S)
    assert again["state"] == "pending"
    assert [p for p in await pods_of(rest, {JOB_ID: job, "muster.dev/attempt": "0"})
            if p["status"].get("phase") == "Running"] == [], "a preempted pod still runs"
    assert (await system.api.wait_state(urgent, "succeeded", "failed", within=WAIT_S))["state"] == "succeeded"
    await system.api.wait_job(job, lambda j: j["attempt"] == 1 and j["state"] == "running", within=WAIT_S)
    await assert_on_planned_nodes(system, job, 1, pods)
    await system.api.cancel(job)
    await system.api.wait_state(job, "cancelled", within=WAIT_S)
    await eventually("the queue's GPUs free", lambda: _zero(system))


async def _zero(system: System) -> bool:
    return await queue_in_use(system) == 0


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


async def test_a_jobset_of_two_roles(kinds_system: System) -> None:
    obj = example("jobset.yaml", name("js"), seconds=5)
    await follow(kinds_system, obj, pods=5, selector={"jobset.sigs.k8s.io/jobset-name": obj["metadata"]["name"]},
                 ends=True)


async def test_a_jobset_is_preempted_whole_and_requeued(kinds_system: System) -> None:
    obj = example("jobset.yaml", name("jp"))
    await follow(kinds_system, obj, pods=5, selector={"jobset.sigs.k8s.io/jobset-name": obj["metadata"]["name"]},
                 ends=False)


async def test_a_leaderworkerset_of_two_groups(kinds_system: System) -> None:
    obj = example("leaderworkerset.yaml", name("lws"))
    obj["spec"]["leaderWorkerTemplate"]["size"] = 2  # two groups of a leader and a worker: 4 pods of 1 GPU
    for key in ("leaderTemplate", "workerTemplate"):
        limits = obj["spec"]["leaderWorkerTemplate"][key]["spec"]["containers"][0]["resources"]["limits"]
        limits["nvidia.com/gpu"] = 4
    await follow(kinds_system, obj, pods=4, selector={"leaderworkerset.sigs.k8s.io/name": obj["metadata"]["name"]},
                 ends=False)


async def test_a_rayjob_of_a_head_and_two_worker_groups(kinds_system: System) -> None:
    """Admitted with its submitter's quota too; KWOK runs no Ray, so KubeRay never sees the cluster's dashboard
    and never starts the submitter: the head and the two worker groups' 5 pods are the ones that run."""
    obj = example("rayjob.yaml", name("ray"))
    assert [r.name for r in kind_of(obj).roles(obj).roles] == ["head", "gpu-workers", "cpu-workers", "submitter"]
    await follow(kinds_system, obj, pods=6, selector={"ray.io/is-ray-node": "yes"}, ends=False)


async def test_a_deployment(kinds_system: System) -> None:
    obj = example("deployment.yaml", name("dep"))
    await follow(kinds_system, obj, pods=2, selector={"app": obj["spec"]["selector"]["matchLabels"]["app"]},
                 ends=False)


async def test_a_deployment_scaled_up_and_down_through_quota(kinds_system: System) -> None:
    """Its owner scales a running Deployment 2 -> 4 -> 1: the extra pods are admitted through the queue's
    quota as room allows (one now, one once a job frees quota; until then it waits gated on no node), each
    on a node of the job's plan; the scale-down frees the quota at once."""
    system = kinds_system
    rest = system.first_cluster().rest
    obj = example("deployment.yaml", name("dep"))
    selector = {"app": obj["spec"]["selector"]["matchLabels"]["app"]}
    job = await create(system, obj)
    await system.api.wait_state(job, "running", within=WAIT_S)
    await assert_on_planned_nodes(system, job, 0, 2)
    filler = await system.api.submit(job_spec("filler", gpus=1, replicas=13, duration_s=3600, priority_class="low"))
    await system.api.wait_state(filler, "running", within=WAIT_S)  # 15 of the queue's 16 GPUs taken

    async def scale(replicas: int) -> None:
        await rest.patch(resource(obj), obj["metadata"]["name"], {"spec": {"replicas": replicas}}, NAMESPACE)

    async def placed(count: int) -> list[KubeObject] | None:
        pods = [p for p in await pods_of(rest, selector) if p["status"].get("phase") == "Running"]
        return pods if len(pods) == count else None

    await scale(4)
    await eventually("a third pod running", lambda: placed(3))
    await asyncio.sleep(3)
    pods = await pods_of(rest, selector)
    waiting = [p for p in pods if p["spec"].get("schedulingGates")]
    assert len(pods) == 4 and len(waiting) == 1 and not waiting[0]["spec"].get("nodeName"), pods
    assert await ledger_gpus(system) == 16

    await system.api.cancel(filler)
    running = await eventually("the fourth pod running", lambda: placed(4))
    plan = {n.node for n in system.log.messages(JobScaled, job_id=job)[-1].placement.nodes}
    assert {p["spec"]["nodeName"] for p in running} <= plan, plan

    await scale(1)
    await eventually("the quota of the three pods gone freed", lambda: _ledger_is(system, 1))
    (left,) = await eventually("one pod left", lambda: placed(1))
    assert system.log.messages(JobScaled, job_id=job)[-1].replicas == 1
    assert left["spec"]["nodeName"] in {n.node for n in system.log.messages(JobScaled, job_id=job)[-1].placement.nodes}
    await system.api.cancel(job)
    await system.api.wait_state(job, "cancelled", within=WAIT_S)
    await eventually("the queue's GPUs free", lambda: _zero(system))


async def ledger_gpus(system: System) -> float:
    """GPUs the quota accountant charges the queue for."""
    r = await system.api.http.get("/v1/queues/team-a", headers=system.api._auth(None))
    assert r.status_code == 200, r.text
    allocated = ((r.json().get("usage") or {}).get("allocated") or {})
    return float(sum(v for k, v in allocated.items() if k.startswith("gpu:")))


async def _ledger_is(system: System, gpus: float) -> bool:
    return await ledger_gpus(system) == gpus


CLUSTER_TRAINING_RUNTIMES = Resource("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime",
                                     "clustertrainingruntimes", namespaced=False)


async def test_a_trainjob_through_its_runtimes_jobset(kinds_system: System) -> None:
    """A TrainJob's pods come from its ClusterTrainingRuntime (Trainer v2.0 gives a TrainJob no pod metadata),
    so the test makes a runtime of its own whose pods end after a few seconds, as torch-distributed's shape."""
    await _trainjob(kinds_system, seconds=5)


async def test_a_trainjob_is_preempted_whole_and_requeued(kinds_system: System) -> None:
    """The same TrainJob with pods that run until stopped: suspended whole by the preemption (Trainer suspends
    its JobSet), requeued, released again as its next attempt."""
    await _trainjob(kinds_system, seconds=None)


async def _trainjob(system: System, *, seconds: float | None) -> None:
    runtime: KubeObject = yaml.safe_load((EXAMPLES / "torch-distributed-runtime.yaml").read_text(encoding="utf-8"))
    runtime["metadata"]["name"] = name("torch-e2e")
    if seconds is not None:
        node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        node.setdefault("metadata", {}).setdefault("annotations", {})[DURATION_ANNOTATION] = f"{seconds:g}"
    rest = system.first_cluster().rest
    await rest.create(CLUSTER_TRAINING_RUNTIMES, runtime)
    try:
        obj = example("trainjob.yaml", name("tj"))
        obj["spec"]["runtimeRef"]["name"] = runtime["metadata"]["name"]
        obj["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": 8},
                                                      "requests": {"cpu": "8", "memory": "32Gi"}}
        await follow(system, obj, pods=2, selector={"jobset.sigs.k8s.io/jobset-name": obj["metadata"]["name"]},
                     ends=seconds is not None)
    finally:
        await rest.delete(CLUSTER_TRAINING_RUNTIMES, runtime["metadata"]["name"])


async def test_a_notebook_statefulset(kinds_system: System) -> None:
    obj = example("notebook-statefulset.yaml", name("nb"))
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    await follow(kinds_system, obj, pods=1, selector={"app": obj["spec"]["selector"]["matchLabels"]["app"]},
                 ends=False)


async def test_a_notebook_released_when_its_gpu_is_idle_and_resumed(
        kinds_system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook StatefulSet with an idle timeout: while its GPU is busy it keeps it; once the GPU reads idle
    (the simulated DCGM exporter, read by the node watcher) for the timeout, its pod goes, the job is
    suspended (the StatefulSet stays, its pod waits gated on no node) and its quota is free; resumed, it runs
    again as its next attempt."""
    system = kinds_system
    rest = system.first_cluster().rest
    obj = example("notebook-statefulset.yaml", name("nb"))
    obj["metadata"]["annotations"][IDLE_TIMEOUT] = "4"
    set_at(obj, ("spec", "template", "metadata", "annotations", SIMULATED_UTIL), "35")
    selector = {"app": obj["spec"]["selector"]["matchLabels"]["app"]}
    async with DcgmExporter(rest).serve() as url:
        monkeypatch.setenv("MUSTER_GPU_METRICS_URLS", url)
        monkeypatch.setenv("MUSTER_GPU_METRICS_INTERVAL_S", "0.5")
        await system.stop("node-watcher/east")  # started again reading the exporter
        await system.start_watcher("east")
        job = await create(system, obj)
        await system.api.wait_state(job, "running", within=WAIT_S)
        await asyncio.sleep(8)  # twice its timeout, busy: it keeps its GPU
        assert (await system.api.job(job))["state"] == "running"

        (pod,) = await pods_of(rest, selector)
        await rest.patch(PODS, pod["metadata"]["name"], {"metadata": {"annotations": {SIMULATED_UTIL: "0"}}},
                         NAMESPACE)
        released = await system.api.wait_state(job, "suspended", within=WAIT_S)
        assert released["reason"] == "idle" and "muster resume" in released["message"], released
        await eventually("the queue's GPUs free", lambda: _zero(system))
        assert await rest.get(resource(obj), obj["metadata"]["name"], NAMESPACE)  # the StatefulSet stays

        async def gated() -> list[KubeObject] | None:
            pods = await pods_of(rest, selector)
            return pods if pods and all(p["spec"].get("schedulingGates") and not p["spec"].get("nodeName")
                                        for p in pods) else None

        await eventually("its pod re-created, waiting gated", gated)

        r = await system.api.http.post(f"/v1/jobs/{job}/resume", headers=system.api._auth("team-a"))
        assert r.status_code == 202, r.text
        await system.api.wait_job(job, lambda j: j["attempt"] == 1 and j["state"] == "running", within=WAIT_S)
        await assert_on_planned_nodes(system, job, 1, 1)
        await system.api.cancel(job)
        await system.api.wait_state(job, "cancelled", within=WAIT_S)
        await eventually("the queue's GPUs free", lambda: _zero(system))
