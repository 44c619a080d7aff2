"""A cancel leaves the object its owner created in place: stopped as a preemption stops it, held back, marked
``muster.dev/cancelled`` and told so by an Event; an object Muster created is deleted as before.

Against the simulated cluster with an in-memory producer (no broker). kubesim runs the Job controller (a
suspended Job's pods go) but no controller of the workload kinds: each test plays the controller's part by
creating the pods it would, already released onto their planned node.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.decisions import JobAdmitted, JobPreemptionRequested, NodePods, PlacementPlan
from schemas.envelope import Message, make_envelope
from schemas.kube import ADMISSION_GATE, ATTEMPT, HOSTNAME_LABEL, JOB_ID, PREEMPT_REQUESTED, SOURCE_JOB
from schemas.runs import DispatchFailed, JobDispatched, JobStopped
from services.dispatcher.book import CANCELLED, Preemption
from services.dispatcher.cancelled import LEFT_IN_PLACE
from services.dispatcher.context import Context
from services.dispatcher.dispatcher import Dispatcher
from services.dispatcher.kube_ops import KubeOps
from services.dispatcher.preemption_handshake import handshake_annotations
from services.dispatcher.reports import Reporter
from services.kubesim import KubeSim
from services.runtime.kube import EVENTS, JOBS, PODS, KubeObject, KubeRest, Resource, build_api_client, ensure_namespace
from services.spec.workload_spec import spec_from_workload
from tests.builders.jobspecs import job_spec
from tests.dispatcher.builders import CLUSTER, DURATION, TRAINING, admitted, placement, runs_for
from tests.dispatcher.fakes import RecordingProducer, delivery
from tests.dispatcher.harness import FAST, TEST_RETRY, eventually_true
from tests.dispatcher.test_workloads_integration import JOBSETS, jobset
from tests.dispatcher.test_workloads_integration import admission as jobset_admission
from tests.dispatcher.test_workloads_integration import plan as jobset_plan
from tests.node_watcher.builders import CLUSTER_FILE

#: a stop gives the pods at least a second (the default, 5 s, would only slow the tests down); no binder runs
#: here, so Muster's own Jobs leave their pods to kubesim's scheduler
SETTINGS = dataclasses.replace(FAST, stop_floor_s=1.0, bind_pods=False)
DEPLOYMENTS = Resource("apps/v1", "Deployment", "deployments", namespaced=True)
NAMESPACE = "team-a"


@dataclass
class Bench:
    rest: KubeRest
    producer: RecordingProducer
    dispatchers: list[Dispatcher]

    @property
    def dispatcher(self) -> Dispatcher:
        return self.dispatchers[-1]

    def restarted(self) -> Dispatcher:
        """A new dispatcher on the same cluster and producer (the one before is left as it is)."""
        ctx = Context(cluster=CLUSTER, ops=KubeOps(self.rest), reporter=Reporter(self.producer.as_producer()),
                      settings=SETTINGS)
        self.dispatchers.append(Dispatcher(ctx))
        return self.dispatcher

    async def handle(self, message: Message) -> None:
        d = delivery(self.producer)
        await self.dispatcher.handle(make_envelope(message, "queue_manager"), d)
        await d.settle()

    async def stopped(self, job_id: str, count: int = 1) -> list[JobStopped]:
        async def reported() -> bool:
            return len(self.stops(job_id)) >= count

        await eventually_true(reported)
        return self.stops(job_id)

    def stops(self, job_id: str) -> list[JobStopped]:
        return [s for s in self.producer.payloads(JobStopped) if s.job_id == job_id]

    async def left_in_place(self, uid: str) -> list[KubeObject]:
        """The Events the dispatcher posted about the object ``uid`` (waiting for the first)."""
        async def told() -> bool:
            return bool(await self.events(uid))

        await eventually_true(told)
        return await self.events(uid)

    async def events(self, uid: str) -> list[KubeObject]:
        items, _ = await self.rest.list(EVENTS, NAMESPACE)
        return [e for e in items if e["reason"] == LEFT_IN_PLACE and e["involvedObject"].get("uid") == uid]

    async def pods(self, selector: str) -> list[KubeObject]:
        items, _ = await self.rest.list(PODS, NAMESPACE, label_selector=selector)
        return items


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    sim = KubeSim.from_cluster_file(CLUSTER_FILE, cluster_name=CLUSTER, profile="zero")
    async with sim.serve(port=0) as url:
        api = await build_api_client(url)
        async with api:
            rest = KubeRest(api, retry=TEST_RETRY, request_timeout=10.0)
            await ensure_namespace(rest, NAMESPACE)
            b = Bench(rest, RecordingProducer(), [])
            b.restarted()
            try:
                yield b
            finally:
                for dispatcher in b.dispatchers:
                    await dispatcher.close()


def cancel(job_id: str, attempt: int = 0, *, grace_s: float = 0.5) -> JobPreemptionRequested:
    """What the queue manager decides on ``muster cancel`` of a running job."""
    return JobPreemptionRequested(job_id=job_id, attempt=attempt, reason="cancelled", grace_period_s=grace_s,
                                  requeue=False, cluster=CLUSTER)


def preemption(job_id: str, attempt: int = 0) -> JobPreemptionRequested:
    return JobPreemptionRequested(job_id=job_id, attempt=attempt, reason="higher_priority", grace_period_s=0.5,
                                  requeue=True, cluster=CLUSTER, preemptor="urgent-1")


# -- a user's batch/v1 Job -------------------------------------------------------------------------------

def users_job(name: str) -> KubeObject:
    """A labelled, suspended Job as its owner creates it (``examples/jobs/kube-job.yaml``), its pods running
    until stopped."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"muster.dev/queue": NAMESPACE}},
        "spec": {"suspend": True, "completions": 2, "parallelism": 2, "completionMode": "Indexed",
                 "backoffLimit": 0, "template": {
                     "metadata": {"annotations": {DURATION: "600"}},
                     "spec": {"restartPolicy": "Never",
                              "containers": [{"name": "train", "image": "registry.example/train:1",
                                              "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}},
    }


async def released_users_job(bench: Bench, job_id: str, name: str, attempt: int = 0) -> KubeObject:
    """The user's Job created, admitted (released in place) and its two pods running."""
    created = await bench.rest.create(JOBS, users_job(name), NAMESPACE)
    await admit_users_job(bench, job_id, name, attempt)
    return created


async def admit_users_job(bench: Bench, job_id: str, name: str, attempt: int) -> None:
    source = {SOURCE_JOB: f"{NAMESPACE}/{name}"}
    await bench.handle(admitted(job_id, attempt, plan=placement("east-a100-0", "east-a100-1"),
                                job_spec=job_spec(replicas=2, gpus=4, **TRAINING, annotations=source)))
    await running(bench, f"{JOB_ID}={job_id},{ATTEMPT}={attempt}", 2)


async def running(bench: Bench, selector: str, count: int) -> None:
    async def all_running() -> bool:
        pods = await bench.pods(selector)
        return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)

    await eventually_true(all_running)


async def test_a_cancelled_users_job_is_left_suspended_marked_and_told(bench: Bench) -> None:
    created = await released_users_job(bench, "kube-1", "sweep-1")
    await bench.handle(cancel("kube-1"))

    [stopped] = await bench.stopped("kube-1")
    assert (stopped.reason, stopped.requeue) == ("cancelled", False)
    [event] = await bench.left_in_place(created["metadata"]["uid"])
    job = await bench.rest.get(JOBS, "sweep-1", NAMESPACE)  # the user's own object, still there
    assert job["metadata"]["uid"] == created["metadata"]["uid"] and not job["metadata"].get("deletionTimestamp")
    assert job["spec"]["suspend"] is True
    annotations = job["metadata"]["annotations"]
    assert datetime.fromisoformat(annotations[CANCELLED]) <= datetime.now(UTC)
    assert "muster.dev/deleted-by" not in annotations
    assert job["metadata"]["labels"][JOB_ID] == "kube-1"  # still Muster's job's: never taken for a new submission
    assert await bench.pods(f"{JOB_ID}=kube-1") == []  # no GPU held
    assert event["type"] == "Normal" and event["source"]["component"] == "muster-dispatcher"
    assert event["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "name": "sweep-1",
                                       "namespace": NAMESPACE, "uid": created["metadata"]["uid"]}
    assert "left in place, suspended" in event["message"]
    assert "delete it and create it again" in event["message"]
    assert "kube-1" not in bench.dispatcher.ctx.runs


async def test_a_cancelled_job_muster_created_is_still_deleted(bench: Bench) -> None:
    await bench.handle(admitted("own-1", 0, plan=placement("east-a100-0"),
                                job_spec=job_spec(replicas=1, **TRAINING, annotations=runs_for(600))))
    await running(bench, f"{JOB_ID}=own-1", 1)
    await bench.handle(cancel("own-1"))

    await bench.stopped("own-1")
    items, _ = await bench.rest.list(JOBS, NAMESPACE)
    assert [j["metadata"]["name"] for j in items] == []
    events, _ = await bench.rest.list(EVENTS, NAMESPACE)
    assert [e for e in events if e["reason"] == LEFT_IN_PLACE] == []


async def test_a_preempted_users_job_is_suspended_and_released_again_as_its_next_attempt(bench: Bench) -> None:
    created = await released_users_job(bench, "kube-2", "sweep-2")
    await bench.handle(preemption("kube-2"))
    [stopped] = await bench.stopped("kube-2")
    assert stopped.requeue
    held = await bench.rest.get(JOBS, "sweep-2", NAMESPACE)
    assert held["spec"]["suspend"] is True and CANCELLED not in held["metadata"]["annotations"]
    assert await bench.pods(f"{JOB_ID}=kube-2") == []

    await admit_users_job(bench, "kube-2", "sweep-2", 1)  # the requeued job admitted again
    [first, again] = [d for d in bench.producer.payloads(JobDispatched) if d.job_id == "kube-2"]
    assert (first.object_name, again.object_name, again.attempt) == ("sweep-2", "sweep-2", 1)
    job = await bench.rest.get(JOBS, "sweep-2", NAMESPACE)
    assert job["metadata"]["uid"] == created["metadata"]["uid"] and job["spec"]["suspend"] is False
    assert job["metadata"]["labels"][ATTEMPT] == "1"
    assert PREEMPT_REQUESTED not in job["metadata"]["annotations"]  # the stopped attempt's marks are gone
    assert not bench.producer.payloads(DispatchFailed)
    assert await bench.events(created["metadata"]["uid"]) == []


async def test_a_restarted_dispatcher_finishes_a_cancel_and_then_leaves_the_job_alone(bench: Bench) -> None:
    """The dispatcher stopped between the stop and its report: the next one resumes the stop from the Job's
    annotations, reports it and marks the Job; the one after finds nothing of its own."""
    created = await released_users_job(bench, "kube-3", "sweep-3")
    asked = datetime.now(UTC) - timedelta(minutes=1)
    stop = Preemption(requested_at=asked, reason="cancelled", requeue=False, grace_s=0.0, event_id="evt-cancel")
    await bench.rest.patch(JOBS, "sweep-3", {"metadata": {"annotations": handshake_annotations(stop)}}, NAMESPACE)

    await bench.restarted().recover()
    [stopped] = await bench.stopped("kube-3")
    assert (stopped.reason, stopped.requeue) == ("cancelled", False)
    await bench.left_in_place(created["metadata"]["uid"])
    job = await bench.rest.get(JOBS, "sweep-3", NAMESPACE)
    assert job["spec"]["suspend"] is True and job["metadata"]["annotations"][CANCELLED] == asked.isoformat()

    later = bench.restarted()
    await later.recover()
    assert later.ctx.runs == {} and len(bench.stops("kube-3")) == 1
    assert len(await bench.events(created["metadata"]["uid"])) == 1


# -- workload objects -------------------------------------------------------------------------------------

async def play_controller(bench: Bench, obj: KubeObject, placed: PlacementPlan) -> list[str]:
    """The pods a JobSet controller makes of the released ``obj``, each released onto a node its role was
    planned on (as the dispatcher's releaser does): the gate gone, the node selected."""
    name = obj["metadata"]["name"]
    nodes = {e.role: e.node for e in placed.nodes}
    made = []
    for rj in obj["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        for i in range(rj["replicas"]):
            meta = copy.deepcopy(template.get("metadata") or {})
            meta["name"] = f"{name}-{rj['name']}-{i}-0"
            meta["labels"] = {**(meta.get("labels") or {}), "jobset.sigs.k8s.io/jobset-name": name,
                              "jobset.sigs.k8s.io/replicatedjob-name": rj["name"]}
            await bench.rest.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                           "spec": released(template["spec"], nodes[rj["name"]])}, NAMESPACE)
            made.append(meta["name"])
    return made


def released(pod_spec: dict[str, Any], node: str) -> dict[str, Any]:
    out = copy.deepcopy(pod_spec)
    out["schedulingGates"] = [g for g in out.get("schedulingGates") or [] if g["name"] != ADMISSION_GATE]
    out["nodeSelector"] = {**(out.get("nodeSelector") or {}), HOSTNAME_LABEL: node}
    out["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return out


async def test_a_cancelled_jobset_is_left_suspended_marked_and_told(bench: Bench) -> None:
    obj = await bench.rest.create(JOBSETS, jobset("llm-1", seconds=600), NAMESPACE)
    await bench.handle(jobset_admission("js-1", spec_from_workload(obj, kube_native=True)))
    released_obj = await bench.rest.get(JOBSETS, "llm-1", NAMESPACE)
    assert released_obj["spec"]["suspend"] is False
    await play_controller(bench, released_obj, jobset_plan())
    await running(bench, "jobset.sigs.k8s.io/jobset-name=llm-1", 3)
    await bench.handle(cancel("js-1"))

    [stopped] = await bench.stopped("js-1")
    assert (stopped.reason, stopped.requeue) == ("cancelled", False)
    [event] = await bench.left_in_place(obj["metadata"]["uid"])
    left = await bench.rest.get(JOBSETS, "llm-1", NAMESPACE)
    assert left["metadata"]["uid"] == obj["metadata"]["uid"] and left["spec"]["suspend"] is True
    assert CANCELLED in left["metadata"]["annotations"] and left["metadata"]["labels"][JOB_ID] == "js-1"
    for rj in left["spec"]["replicatedJobs"]:  # pods made again would come gated
        assert {"name": ADMISSION_GATE} in rj["template"]["spec"]["template"]["spec"]["schedulingGates"]
    assert await bench.pods("jobset.sigs.k8s.io/jobset-name=llm-1") == []
    assert event["involvedObject"]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert event["involvedObject"]["kind"] == "JobSet" and "left in place, suspended" in event["message"]

    later = bench.restarted()
    await later.recover()  # the cancelled object is its owner's now: no run of the dispatcher's
    assert later.ctx.workloads == {}


def deployment(name: str) -> KubeObject:
    """A Deployment held back by the admission gate (``examples/kube/deployment.yaml``)."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"muster.dev/queue": NAMESPACE}},
        "spec": {"replicas": 2, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "schedulingGates": [{"name": ADMISSION_GATE}], "restartPolicy": "Always",
                     "nodeSelector": {"muster.dev/gpu-type": "a100"},
                     "containers": [{"name": "server", "image": "registry.example/embeddings:4.0",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"},
                                                   "requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
    }


async def test_a_cancelled_deployment_is_left_with_its_pods_gone_marked_and_told(bench: Bench) -> None:
    obj = await bench.rest.create(DEPLOYMENTS, deployment("embed-1"), NAMESPACE)
    placed = PlacementPlan(cluster=CLUSTER, nodes=[NodePods(node="east-a100-2", pods=2, role="main")])
    await bench.handle(JobAdmitted(job_id="dep-1", attempt=0, tenant="team-a", queue="team-a", namespace=NAMESPACE,
                                   priority=100, replicas=2, placement=placed,
                                   spec=spec_from_workload(obj, kube_native=True)))
    template = obj["spec"]["template"]
    for i in range(2):  # the ReplicaSet's pods, released by the dispatcher onto the planned node
        meta = {"name": f"embed-1-5d9c7-{i}", "labels": dict(template["metadata"]["labels"])}
        await bench.rest.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                       "spec": released(template["spec"], "east-a100-2")}, NAMESPACE)
    await running(bench, "app=embed-1", 2)
    await bench.handle(cancel("dep-1"))

    await bench.stopped("dep-1")
    [event] = await bench.left_in_place(obj["metadata"]["uid"])
    left = await bench.rest.get(DEPLOYMENTS, "embed-1", NAMESPACE)
    assert left["metadata"]["uid"] == obj["metadata"]["uid"] and CANCELLED in left["metadata"]["annotations"]
    assert left["spec"]["replicas"] == 2  # its owner's: not scaled, its pods come back gated
    assert {"name": ADMISSION_GATE} in left["spec"]["template"]["spec"]["schedulingGates"]
    assert await bench.pods("app=embed-1") == []
    assert event["involvedObject"]["kind"] == "Deployment"
    assert "scheduling gate muster.dev/admission" in event["message"]


async def test_a_cancelled_jobset_muster_created_is_still_deleted(bench: Bench) -> None:
    manifest_spec = spec_from_workload(jobset("train", suspend=False, seconds=600), kube_native=False)
    await bench.handle(jobset_admission("jm-1", manifest_spec))
    created = await bench.rest.get(JOBSETS, "jm-1-a0", NAMESPACE)
    await play_controller(bench, created, jobset_plan())
    await running(bench, "jobset.sigs.k8s.io/jobset-name=jm-1-a0", 3)
    await bench.handle(cancel("jm-1"))

    await bench.stopped("jm-1")
    items, _ = await bench.rest.list(JOBSETS, NAMESPACE)
    assert [i["metadata"]["name"] for i in items] == []
    assert await bench.events(created["metadata"]["uid"]) == []
