"""Kube-native submissions: labelled, suspended ``batch/v1`` Jobs become ``SubmitJob`` intents."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.gateway.kube_jobs import (
    SOURCE_JOB,
    KubeJobSubmitter,
    NotSubmittable,
    parse_duration_s,
    spec_from_job,
    submission_from_job,
    watch_kube_jobs,
)
from tests.gateway.builders import T0, Harness, KubeJobsHandled, feed, simulated_cluster, status_changed
from tests.integration.builders import eventually

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jobs" / "kube-job.yaml"


def kube_job(**meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    obj["metadata"].update({"uid": "0f3c-uid", "resourceVersion": "7", **meta})
    return obj


def test_the_pod_template_becomes_the_spec() -> None:
    spec = spec_from_job(kube_job())
    assert (spec.name, spec.queue, spec.priority_class, spec.replicas) == ("resnet-sweep-7", "team-a", "normal", 2)
    assert spec.template.image == "registry.example/resnet:3.1"
    assert spec.template.command == ["python", "sweep.py", "--trial", "7"]
    res = spec.template.resources
    assert (res.gpus, res.gpu_type, res.cpu, res.memory) == (4, "a100", "8", "64Gi")
    assert spec.runtime_estimate_s == 5400 and spec.preemptible is True
    assert spec.annotations == {SOURCE_JOB: "team-a/resnet-sweep-7"}


def test_submission_takes_the_tenant_from_the_namespace_and_a_stable_id(gw: Harness) -> None:
    first = submission_from_job(kube_job(), gw.ctx.config, T0)
    again = submission_from_job(kube_job(resourceVersion="9"), gw.ctx.config, T0)
    other = submission_from_job(kube_job(uid="another-uid"), gw.ctx.config, T0)
    assert first.tenant == "team-a" and first.user == "kube:team-a"
    assert first.job_id == again.job_id != other.job_id


@pytest.mark.parametrize(("change", "why"), [
    (lambda o: o["spec"].update(suspend=False), "suspend"),
    (lambda o: o["metadata"].update(namespace="nobody"), "no tenant"),
    (lambda o: o["metadata"]["labels"].update({"muster.dev/queue": "team-b"}), "another tenant"),
    (lambda o: o["metadata"]["labels"].update({"muster.dev/queue": "ghost"}), "no queue"),
    (lambda o: o["metadata"]["annotations"].update({"muster.dev/runtime-estimate": "soon"}), "duration"),
    (lambda o: o["spec"]["template"]["spec"].update(hostNetwork=True), "host_network"),
    (lambda o: o["spec"]["template"]["spec"]["containers"][0].update(securityContext={"privileged": True}),
     "privileged"),
    (lambda o: o["spec"]["template"]["spec"].update(containers=[]), "no containers"),
])
def test_jobs_that_cannot_be_submitted_say_why(gw: Harness, change: Any, why: str) -> None:
    obj = kube_job()
    change(obj)
    with pytest.raises(NotSubmittable, match=why):
        submission_from_job(obj, gw.ctx.config, T0)


def test_durations() -> None:
    assert [parse_duration_s(t) for t in ("90", "90s", "2m", "1.5h", "1d")] == [90, 90, 120, 5400, 86400]


async def test_each_job_is_published_once(gw: Harness) -> None:
    submitter = KubeJobSubmitter(gw.ctx)
    obj = kube_job()
    await submitter.handle("ADDED", obj)
    await submitter.handle("MODIFIED", copy.deepcopy(obj) | {"metadata": {**obj["metadata"], "resourceVersion": "8"}})
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    # once the queue manager knows it, and after the local record is gone, it is still not resubmitted
    gw.ctx.recent = type(gw.ctx.recent)()
    feed(gw.ctx.status, status_changed(sent.job_id, state="admitted"))
    await submitter.handle("MODIFIED", kube_job(resourceVersion="10"))
    await submitter.handle("DELETED", kube_job(resourceVersion="11"))
    assert len(gw.publisher.on(INTENTS_TOPIC)) == 1


async def test_suspended_jobs_that_muster_runs_are_not_submitted(gw: Harness) -> None:
    """A rescaled or restarted job's next revision waits suspended; it is not a new submission."""
    submitter = KubeJobSubmitter(gw.ctx)
    obj = kube_job(name="train-1-a0-r1")
    obj["metadata"]["labels"]["muster.dev/job-id"] = "train-1"
    obj["metadata"].setdefault("annotations", {})["muster.dev/job-id"] = "train-1"
    await submitter.handle("ADDED", obj)
    assert gw.publisher.sent == []
    assert gw.registry.get_sample_value("muster_gateway_submissions_total",
                                        {"source": "kube", "outcome": "refused"}) is None


async def test_a_job_a_cancel_left_in_place_is_never_submitted_again(gw: Harness) -> None:
    """The dispatcher leaves a cancelled job's own Job suspended, with its job id and ``muster.dev/cancelled``
    on it. Whatever its owner changes afterwards, even Muster's labels taken off, it is the same object (same
    uid, same job id) whose job ended: not a new submission. A new job is a new object (deleted, created again)."""
    submitter = KubeJobSubmitter(gw.ctx)
    job_id = submission_from_job(kube_job(), gw.ctx.config, T0).job_id
    feed(gw.ctx.status, status_changed(job_id, state="cancelled", reason="cancelled", name="resnet-sweep-7"))
    left = kube_job(resourceVersion="20")
    left["metadata"]["labels"].update({"muster.dev/job-id": job_id, "muster.dev/attempt": "0"})
    left["metadata"]["annotations"].update({"muster.dev/job-id": job_id, "muster.dev/attempt": "0",
                                            "muster.dev/cancelled": "2026-11-25T12:01:00+00:00"})
    edited = copy.deepcopy(left)
    edited["metadata"]["resourceVersion"] = "21"
    edited["spec"]["parallelism"] = 8
    bare = kube_job(resourceVersion="22")  # Muster's marks taken off by its owner
    for version in (left, edited, bare):
        await submitter.handle("MODIFIED", version)
    assert gw.publisher.sent == []
    assert gw.registry.get_sample_value("muster_gateway_submissions_total",
                                        {"source": "kube", "outcome": "refused"}) is None
    await submitter.handle("ADDED", kube_job(uid="created-again", resourceVersion="30"))
    [again] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(again, SubmitJob) and again.job_id != job_id


async def test_refused_jobs_are_counted_once_per_version(gw: Harness) -> None:
    submitter = KubeJobSubmitter(gw.ctx)
    obj = kube_job(namespace="nobody")
    await submitter.handle("ADDED", obj)
    await submitter.handle("MODIFIED", obj)
    metric = gw.registry.get_sample_value("muster_gateway_submissions_total", {"source": "kube", "outcome": "refused"})
    assert metric == 1.0 and gw.publisher.sent == []


async def test_watch_submits_jobs_created_on_a_simulated_cluster(gw: Harness,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from services.runtime.kube import JOBS, create_or_get
    from tests.kubesim.builders import eventually as eventually_async

    seen = KubeJobsHandled(monkeypatch)
    async with simulated_cluster() as (url, rest):
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_kube_jobs(gw.ctx, url, stop))
        try:
            job = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
            unlabelled = copy.deepcopy(job)
            unlabelled["metadata"].update(name="plain-job", labels={})
            await create_or_get(rest, JOBS, unlabelled)  # first: the watch has gone past it once it has the other
            await create_or_get(rest, JOBS, job)
            await eventually(lambda: len(gw.publisher.on(INTENTS_TOPIC)) >= 1, within=15, what="a submission")
            # the watch has handled the labelled Job's last version (the Job controller's status): no more
            # submissions can come of it, nor of the unlabelled Job created before it
            namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
            await eventually_async(lambda: seen.settled(rest, namespace, name), within=15,
                                   what="the watch handled the Job as it now is")
        finally:
            stop.set()
            await watcher
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.spec.name == "resnet-sweep-7"
    assert sent.spec.annotations[SOURCE_JOB] == "team-a/resnet-sweep-7"
