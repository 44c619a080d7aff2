"""Kube-native submissions of workload kinds: held-back, labelled JobSets, LeaderWorkerSets, TrainJobs, pod
groups... become ``SubmitJob`` intents with the object's roles; the others are told why on an Event;
deleting the object cancels its job."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas.envelope import make_envelope
from schemas.intents import CancelJob, SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.gateway.kube_jobs import KubeJobFeedback, NotSubmittable
from services.gateway.kube_workloads import (
    WATCHED_KINDS,
    KubeWorkloadSubmitter,
    WorkloadWatch,
    fetcher,
    submission_from_workload,
    watch_kube_workloads,
    workload_job_id,
)
from services.runtime.kube import EVENTS, PODS, Resource, create_or_get
from services.spec.ids import job_id_of_tenant, kube_workload_id
from services.spec.kinds import GroupIncomplete, KindIdentity, PodSet, State, WorkloadKind, kind_of
from services.spec.kinds.pods import POD_GROUP_KIND
from tests.builders.clock import T0
from tests.gateway.builders import Harness, feed, simulated_cluster, status_changed
from tests.integration.builders import eventually

KUBE = Path(__file__).resolve().parents[2] / "examples" / "kube"
JOBSETS = Resource("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", namespaced=True)
LWS = Resource("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", namespaced=True)
TRAINJOBS = Resource("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", namespaced=True)
RUNTIMES = Resource("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes",
                    namespaced=False)


def example(file: str, **meta: Any) -> dict[str, Any]:
    """A fresh copy of ``examples/kube/<file>``, its metadata updated with ``meta``."""
    obj: dict[str, Any] = yaml.safe_load((KUBE / file).read_text(encoding="utf-8"))
    if obj.get("kind") != "List":
        obj["metadata"].update(meta)
    return obj


def stored(file: str, **meta: Any) -> dict[str, Any]:
    """The example as the API server would send it back (uid, resourceVersion, generation)."""
    return example(file, **{"uid": f"uid-{file}", "resourceVersion": "7", "generation": 1, **meta})


def roles_of(submission: SubmitJob) -> list[tuple[str, int, int]]:
    return [(r.name, r.replicas, r.template.resources.gpus) for r in submission.spec.roles]


# -- the submission, pure -------------------------------------------------------------------------------

def test_a_held_jobset_becomes_a_submission_with_its_roles(gw: Harness) -> None:
    sub = submission_from_workload(stored("jobset.yaml"), [], gw.ctx.config, T0)
    assert (sub.tenant, sub.user, sub.spec.queue, sub.spec.name) == ("team-a", "kube:team-a", "team-a", "llm-pretrain")
    assert roles_of(sub) == [("coordinator", 1, 0), ("workers", 4, 4)]
    assert sub.spec.runtime_estimate_s == 6 * 3600
    workload = sub.spec.workload
    assert workload is not None and (workload.kind, workload.name, workload.namespace, workload.uid) == (
        "JobSet", "llm-pretrain", "team-a", "uid-jobset.yaml")
    assert sub.job_id == kube_workload_id("JobSet", "team-a", "llm-pretrain", "uid-jobset.yaml", tenant="team-a")
    assert sub.job_id == workload_job_id(stored("jobset.yaml"), "team-a")
    assert job_id_of_tenant(sub.job_id, "team-a")  # minted for the namespace's tenant
    again = submission_from_workload(stored("jobset.yaml", resourceVersion="9"), [], gw.ctx.config, T0)
    assert again.job_id == sub.job_id  # stable for the object's lifetime


def test_job_ids_tell_kinds_apart_and_fit_a_job_id() -> None:
    long = "x" * 200
    ids = {kube_workload_id(kind, "team-a", "same", "u", tenant="team-a") for kind in ("JobSet", "RayJob", "Job")}
    assert len(ids) == 3
    assert len(kube_workload_id("LeaderWorkerSet", "team-a", long, "u", tenant="team-a")) <= 48


def test_a_trainjob_is_read_with_its_runtime(gw: Harness) -> None:
    sub = submission_from_workload(stored("trainjob.yaml"), [example("torch-distributed-runtime.yaml")],
                                   gw.ctx.config, T0)
    assert roles_of(sub) == [("node", 2, 8)]
    with pytest.raises(NotSubmittable, match="runtime ClusterTrainingRuntime torch-distributed was not found"):
        submission_from_workload(stored("trainjob.yaml"), [], gw.ctx.config, T0)


def _unsuspended(o: dict[str, Any]) -> None:
    o["spec"]["suspend"] = False


def _ungated(o: dict[str, Any]) -> None:
    del o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulingGates"]


def _privileged(o: dict[str, Any]) -> None:
    container = o["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True}


def _plain_secret(o: dict[str, Any]) -> None:
    container = o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "WANDB_API_KEY", "value": "0123456789abcdef"}]


@pytest.mark.parametrize(("name", "change", "why"), [
    ("jobset.yaml", _unsuspended, "create it with spec.suspend: true"),
    ("leaderworkerset.yaml", _ungated, "cannot be suspended"),
    ("jobset.yaml", lambda o: o["metadata"].update(namespace="nobody"), "belongs to no tenant"),
    ("jobset.yaml", lambda o: o["metadata"]["labels"].update({"muster.dev/queue": "team-b"}), "another tenant"),
    ("jobset.yaml", lambda o: o["metadata"]["labels"].update({"muster.dev/queue": "ghost"}), "no queue"),
    ("jobset.yaml", lambda o: o["metadata"]["annotations"].update({"muster.dev/priority-class": "vip"}),
     "priority class"),
    ("jobset.yaml", lambda o: o["metadata"]["annotations"].update({"muster.dev/runtime-estimate": "soon"}),
     "not a duration"),
    ("jobset.yaml", _privileged, "privileged"),
    ("jobset.yaml", _plain_secret, "WANDB_API_KEY"),
    ("jobset.yaml", lambda o: o["spec"].update(replicatedJobs=[]), "makes no pods"),
])
def test_objects_that_cannot_be_submitted_say_why(gw: Harness, name: str, change: Any, why: str) -> None:
    obj = stored(name)
    change(obj)
    with pytest.raises(NotSubmittable, match=why):
        submission_from_workload(obj, [], gw.ctx.config, T0)


def test_a_pod_group_waits_for_all_its_pods(gw: Harness) -> None:
    group = example("pod-group.yaml")
    partial = {**group, "items": group["items"][:2]}
    with pytest.raises(GroupIncomplete):
        submission_from_workload(partial, [], gw.ctx.config, T0)
    sub = submission_from_workload(group, [], gw.ctx.config, T0)
    assert roles_of(sub) == [("launcher", 1, 0), ("worker", 2, 4)]
    assert sub.job_id == kube_workload_id("Pod", "team-a", "mpi-bench", "", tenant="team-a")


# -- the informer handlers --------------------------------------------------------------------------------

def jobset_kind() -> WorkloadKind:
    return kind_of(example("jobset.yaml"))


async def test_each_object_is_published_once_and_followed_after(gw: Harness) -> None:
    submitter = KubeWorkloadSubmitter(gw.ctx)
    obj = stored("jobset.yaml")
    await submitter.on_object(jobset_kind(), "ADDED", obj)
    await submitter.on_object(jobset_kind(), "MODIFIED", stored("jobset.yaml", resourceVersion="8"))
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    # released by the dispatcher: unsuspended, its job id on it; not refused, not submitted again
    gw.ctx.recent = type(gw.ctx.recent)()
    released = stored("jobset.yaml", resourceVersion="10", labels={"muster.dev/queue": "team-a",
                                                                    "muster.dev/job-id": sent.job_id})
    released["spec"]["suspend"] = False
    await submitter.on_object(jobset_kind(), "MODIFIED", released)
    assert len(gw.publisher.sent) == 1
    assert gw.registry.get_sample_value("muster_gateway_submissions_total",
                                        {"source": "kube", "outcome": "refused"}) is None


async def test_objects_muster_created_for_other_jobs_are_not_submissions(gw: Harness) -> None:
    """A JobSet created from a job's manifest (through Muster) carries that job's id and its queue label."""
    submitter = KubeWorkloadSubmitter(gw.ctx)
    obj = stored("jobset.yaml", labels={"muster.dev/queue": "team-a", "muster.dev/job-id": "llm-pretrain-1a2b3c4d"})
    await submitter.on_object(jobset_kind(), "ADDED", obj)
    await submitter.on_object(jobset_kind(), "DELETED", obj)
    assert gw.publisher.sent == []


async def test_deleting_the_object_cancels_its_job_once_unless_it_ended(gw: Harness) -> None:
    submitter = KubeWorkloadSubmitter(gw.ctx)
    obj = stored("jobset.yaml")
    await submitter.on_object(jobset_kind(), "ADDED", obj)
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    deleting = stored("jobset.yaml", deletionTimestamp="2026-11-25T12:00:00Z")
    await submitter.on_object(jobset_kind(), "MODIFIED", deleting)
    await submitter.on_object(jobset_kind(), "DELETED", deleting)
    cancels = [m for m in gw.publisher.on(INTENTS_TOPIC) if isinstance(m, CancelJob)]
    assert [(c.job_id, c.requested_by) for c in cancels] == [(sent.job_id, "kube:team-a")]
    assert "JobSet team-a/llm-pretrain was deleted" in cancels[0].reason
    other = stored("leaderworkerset.yaml")
    lws = kind_of(other)
    await submitter.on_object(lws, "ADDED", other)
    [_, _, lws_job] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(lws_job, SubmitJob)
    feed(gw.ctx.status, status_changed(lws_job.job_id, state="succeeded", name="llm-serve"))
    await submitter.on_object(lws, "DELETED", other)
    assert len(gw.publisher.on(INTENTS_TOPIC)) == 3  # an ended job is not cancelled


async def test_a_pod_group_is_submitted_once_complete(gw: Harness) -> None:
    submitter = KubeWorkloadSubmitter(gw.ctx)
    pods: list[dict[str, Any]] = []
    for i, pod in enumerate(example("pod-group.yaml")["items"]):
        pod["metadata"].update(uid=f"pod-uid-{i}", resourceVersion=str(10 + i))
        pods.append(pod)

    def members(namespace: str, group: str) -> list[dict[str, Any]]:
        return [p for p in pods if p["metadata"]["labels"].get("muster.dev/pod-group") == group]

    every = list(pods)
    pods[:] = every[:2]
    await submitter.on_pod("ADDED", every[1], members)
    assert gw.publisher.sent == []  # two of three pods: it waits, and nothing is refused
    pods[:] = every
    await submitter.on_pod("ADDED", every[2], members)
    await submitter.on_pod("MODIFIED", every[0], members)
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and roles_of(sent) == [("launcher", 1, 0), ("worker", 2, 4)]
    pods[:] = []
    await submitter.on_pod("DELETED", every[0], members)  # the last gated pod gone: the owner withdrew it
    [_, cancel] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(cancel, CancelJob) and cancel.job_id == sent.job_id


async def test_new_pods_of_a_group_whose_job_ended_are_told_to_take_a_new_name(gw: Harness) -> None:
    submitter = KubeWorkloadSubmitter(gw.ctx)
    pods = example("pod-group.yaml")["items"]
    for i, pod in enumerate(pods):
        pod["metadata"].update(uid=f"pod-uid-{i}", resourceVersion=str(10 + i))
    await submitter.on_pod("ADDED", pods[0], lambda namespace, group: pods)
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    feed(gw.ctx.status, status_changed(sent.job_id, state="succeeded", name="mpi-bench"))
    for pod in pods:  # the owner deleted the group and made it again
        pod["metadata"].update(uid=pod["metadata"]["uid"] + "-again", resourceVersion="99")
    await submitter.on_pod("ADDED", pods[0], lambda namespace, group: pods)
    await submitter.on_pod("ADDED", pods[1], lambda namespace, group: pods)
    assert len(gw.publisher.sent) == 1
    assert gw.registry.get_sample_value("muster_gateway_submissions_total",
                                        {"source": "kube", "outcome": "refused"}) == 1.0


# -- on a simulated cluster -----------------------------------------------------------------------------

class _Widget(WorkloadKind):
    """A kind no API server serves."""

    identity = KindIdentity("example.com", "v1", "Widget", "widgets")
    suspendable = True

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        return []

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        return []

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        return None

    def state(self, obj: Mapping[str, Any]) -> State:
        return State(None, "")


async def test_watch_submits_held_workloads_and_tells_and_cancels(gw: Harness) -> None:
    """On kubesim: a suspended labelled JobSet and a gated LeaderWorkerSet become SubmitJobs with their roles;
    an unsuspended one gets one NotSubmitted Event; the job's progress shows as Events on its JobSet (never
    as status conditions); deleting the JobSet cancels its job."""
    async with simulated_cluster() as (url, rest):
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_kube_workloads(gw.ctx, url, stop))

        async def events(reason: str) -> list[dict[str, Any]]:
            items, _ = await rest.list(EVENTS, "team-a")
            return [e for e in items if e.get("reason") == reason]

        async def until(reason: str, count: int = 1) -> list[dict[str, Any]]:
            for _ in range(300):
                found = await events(reason)
                if len(found) >= count:
                    return found
                await asyncio.sleep(0.05)
            raise AssertionError(f"no {reason} Event")

        try:
            jobset, _ = await create_or_get(rest, JOBSETS, example("jobset.yaml"))
            await create_or_get(rest, LWS, example("leaderworkerset.yaml"))
            loose = example("jobset.yaml", name="loose")
            loose["spec"]["suspend"] = False
            await create_or_get(rest, JOBSETS, loose)
            await eventually(lambda: len(gw.publisher.on(INTENTS_TOPIC)) >= 2, within=30)
            [refused] = await until("NotSubmitted")
            by_name = {m.spec.name: m for m in gw.publisher.on(INTENTS_TOPIC) if isinstance(m, SubmitJob)}
            sent = by_name["llm-pretrain"]
            status = status_changed(sent.job_id, name="llm-pretrain", state="pending", reason="waiting_for_quota",
                                    message="queue team-a is at its quota", position=0)
            feed(gw.ctx.status, status)
            gw.ctx.status_changed(sent.job_id, make_envelope(status, "test"))
            pending = await until("Pending")
            await rest.delete(JOBSETS, "llm-pretrain", "team-a")
            await eventually(lambda: any(isinstance(m, CancelJob) for m in gw.publisher.on(INTENTS_TOPIC)), within=30)
            after = await rest.get(LWS, "llm-serve", "team-a")
        finally:
            stop.set()
            await watcher
    assert set(by_name) == {"llm-pretrain", "llm-serve"}
    assert roles_of(sent) == [("coordinator", 1, 0), ("workers", 4, 4)]
    assert roles_of(by_name["llm-serve"]) == [("leader", 2, 4), ("worker", 2, 4)]
    assert sent.spec.workload is not None and sent.spec.workload.uid == jobset["metadata"]["uid"]
    assert refused["type"] == "Warning" and refused["involvedObject"]["kind"] == "JobSet"
    assert refused["involvedObject"]["name"] == "loose" and "spec.suspend: true" in refused["message"]
    [told] = pending
    assert told["involvedObject"] == {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                      "name": "llm-pretrain", "namespace": "team-a",
                                      "uid": jobset["metadata"]["uid"]}
    assert "queue team-a is at its quota" in told["message"]
    assert "status" not in after or not after["status"].get("conditions")  # no conditions on custom resources
    [cancel] = [m for m in gw.publisher.on(INTENTS_TOPIC) if isinstance(m, CancelJob)]
    assert cancel.job_id == sent.job_id


async def test_watch_reads_a_trainjobs_runtime_and_pod_groups_and_skips_kinds_not_served(
        gw: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="services.gateway.kube_workloads")
    async with simulated_cluster() as (_, rest):
        await create_or_get(rest, RUNTIMES, example("torch-distributed-runtime.yaml"))
        submitter = KubeWorkloadSubmitter(gw.ctx, None, fetcher(rest))
        watch = WorkloadWatch(rest, submitter, [*WATCHED_KINDS, _Widget()], recheck_s=0.2)
        stop = asyncio.Event()
        running = asyncio.create_task(watch.run(stop))
        try:
            await create_or_get(rest, TRAINJOBS, example("trainjob.yaml"))
            for pod in example("pod-group.yaml")["items"]:
                await create_or_get(rest, PODS, pod)
            await eventually(lambda: len(gw.publisher.on(INTENTS_TOPIC)) >= 2, within=30)
            await asyncio.sleep(0.5)  # the Widget asked for again, still not served
        finally:
            stop.set()
            await running
    by_name = {m.spec.name: m for m in gw.publisher.on(INTENTS_TOPIC) if isinstance(m, SubmitJob)}
    assert roles_of(by_name["llama-finetune"]) == [("node", 2, 8)]
    assert roles_of(by_name["mpi-bench"]) == [("launcher", 1, 0), ("worker", 2, 4)]
    assert by_name["mpi-bench"].spec.workload is not None and by_name["mpi-bench"].spec.workload.kind == "Pod"
    assert "Widget" not in watch.informers and "JobSet" in watch.informers
    missing = [r for r in caplog.records if "Widget" in r.getMessage() and "not served" in r.getMessage()]
    assert len(missing) == 1  # said once, however often it is asked again
    assert len(gw.publisher.sent) == 2


def test_the_pod_group_kind_is_watched_through_pods() -> None:
    assert POD_GROUP_KIND in WATCHED_KINDS and all(k.identity.kind != "Job" for k in WATCHED_KINDS)


async def test_an_object_a_cancel_left_in_place_is_told_its_end_once_and_never_submitted_again(gw: Harness) -> None:
    """The dispatcher leaves a cancelled job's JobSet suspended, with its job id and ``muster.dev/cancelled`` on
    it. Changed afterwards (by the dispatcher's mark, its controller, its owner's edits, even its Muster labels
    taken off), it is the same object, the same ended job: not submitted again, not told Cancelled again."""
    async with simulated_cluster() as (_, rest):
        feedback = KubeJobFeedback(rest, gw.ctx.status, gw.ctx.now)
        gw.ctx.status_listeners.append(feedback.on_status)
        submitter = KubeWorkloadSubmitter(gw.ctx, feedback)
        stop = asyncio.Event()
        writing = asyncio.create_task(feedback.run(stop))
        try:
            await submitter.on_object(jobset_kind(), "ADDED", stored("jobset.yaml"))
            [sent] = gw.publisher.on(INTENTS_TOPIC)
            assert isinstance(sent, SubmitJob)
            ended = status_changed(sent.job_id, name="llm-pretrain", state="cancelled", reason="cancelled",
                                   message="cancelled by alice", minutes=1)
            feed(gw.ctx.status, ended)
            gw.ctx.status_changed(sent.job_id, make_envelope(ended, "test"))
            await eventually(lambda: feedback.written >= 1, within=10)
            mark = {"muster.dev/job-id": sent.job_id, "muster.dev/queue": "team-a"}
            left = stored("jobset.yaml", resourceVersion="20", labels=mark,
                          annotations={**mark, "muster.dev/cancelled": "2026-11-25T12:01:00+00:00"})
            edited = stored("jobset.yaml", resourceVersion="21", generation=2, labels=mark)
            edited["spec"]["replicatedJobs"][1]["replicas"] = 8
            bare = stored("jobset.yaml", resourceVersion="22", generation=3)  # Muster's marks taken off
            for version in (left, edited, bare):
                await submitter.on_object(jobset_kind(), "MODIFIED", version)
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            await writing
            gw.ctx.status_listeners.remove(feedback.on_status)
        events, _ = await rest.list(EVENTS, "team-a")
    assert [e["reason"] for e in events] == ["Cancelled"]
    assert gw.publisher.on(INTENTS_TOPIC) == [sent]
    assert gw.registry.get_sample_value("muster_gateway_submissions_total",
                                        {"source": "kube", "outcome": "refused"}) is None
