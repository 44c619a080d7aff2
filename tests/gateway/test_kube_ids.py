"""Objects submitted through Kubernetes get ids of their namespace's tenant; one submitted before ids carried a
tenant tag keeps the id it got then (it is neither submitted again nor lost when deleted)."""

from __future__ import annotations

from schemas.intents import CancelJob, SubmitJob
from schemas.topics import INTENTS_TOPIC
from services.gateway.kube_jobs import KubeJobSubmitter, submission_from_job
from services.gateway.kube_workloads import KubeWorkloadSubmitter, submission_from_workload
from services.spec.ids import id_tenant_tag, job_id_of_tenant, kube_job_id, kube_workload_id
from tests.builders.clock import T0
from tests.gateway.builders import Harness, feed, status_changed
from tests.gateway.test_kube_jobs import kube_job
from tests.gateway.test_kube_workloads import jobset_kind, stored


def test_kube_native_submissions_get_ids_of_the_namespaces_tenant(gw: Harness) -> None:
    job = submission_from_job(kube_job(), gw.ctx.config, T0)
    assert job.job_id == kube_job_id("team-a", "resnet-sweep-7", "0f3c-uid", tenant="team-a")
    workload = submission_from_workload(stored("jobset.yaml"), [], gw.ctx.config, T0)
    assert job_id_of_tenant(job.job_id, "team-a") and job_id_of_tenant(workload.job_id, "team-a")


async def test_a_job_submitted_before_tags_is_not_submitted_again(gw: Harness) -> None:
    old = kube_job_id("team-a", "resnet-sweep-7", "0f3c-uid", tenant=None)
    assert id_tenant_tag(old) is None
    feed(gw.ctx.status, status_changed(old, state="pending", name="resnet-sweep-7"))
    submitter = KubeJobSubmitter(gw.ctx)
    await submitter.handle("ADDED", kube_job())
    await submitter.handle("MODIFIED", kube_job(resourceVersion="8"))
    assert gw.publisher.on(INTENTS_TOPIC) == []


async def test_a_workload_submitted_before_tags_keeps_its_job(gw: Harness) -> None:
    old = kube_workload_id("JobSet", "team-a", "llm-pretrain", "uid-jobset.yaml", tenant=None)
    feed(gw.ctx.status, status_changed(old, state="pending", name="llm-pretrain"))
    submitter = KubeWorkloadSubmitter(gw.ctx)
    await submitter.on_object(jobset_kind(), "ADDED", stored("jobset.yaml"))
    assert gw.publisher.on(INTENTS_TOPIC) == []  # followed under its old id, not submitted again
    await submitter.on_object(jobset_kind(), "DELETED", stored("jobset.yaml"))
    [cancel] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(cancel, CancelJob) and cancel.job_id == old


async def test_a_new_workload_is_submitted_under_its_tenants_id(gw: Harness) -> None:
    submitter = KubeWorkloadSubmitter(gw.ctx)
    await submitter.on_object(jobset_kind(), "ADDED", stored("jobset.yaml"))
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    assert sent.job_id == kube_workload_id("JobSet", "team-a", "llm-pretrain", "uid-jobset.yaml", tenant="team-a")
