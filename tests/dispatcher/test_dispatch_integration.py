"""The dispatcher and the node-state watcher on Apache Kafka and the simulated cluster: admission to success,
idempotence, scaling, and the kube-native path."""

from __future__ import annotations

import uuid

import pytest

from schemas.jobspec import EnvFromSecret, EnvVar, SecretKeyRef, SecretRef
from schemas.runs import JobDispatched, RunAllPodsReady, RunFailed, RunStarted, RunSucceeded
from services.kubesim.kubelet import KubeletProfile
from services.runtime.kafka import KafkaSettings
from services.runtime.kube import JOBS, create_or_get
from tests.builders.jobspecs import job_spec
from tests.builders.realkube import RealKube
from tests.dispatcher.builders import TRAINING, admitted, placement, runs_for, scaled
from tests.dispatcher.harness import eventually_true, running

pytestmark = pytest.mark.integration


def job_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def test_admission_runs_on_the_planned_nodes_to_success(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("ok")
    async with running(registry_settings, kube_backend) as cluster:
        plan = placement("east-a100-2", "east-a100-3")
        await cluster.decide(admitted(jid, 0, plan=plan,
                                      job_spec=job_spec(replicas=2, **TRAINING, annotations=runs_for(1.0))))
        dispatched = (await cluster.outputs.wait_for(JobDispatched, job_id=jid))[0]
        assert (dispatched.namespace, dispatched.object_name) == ("team-a", f"{jid}-a0")
        await cluster.outputs.wait_for(RunSucceeded, job_id=jid)
        runs = [m for m in cluster.outputs.of_job(jid) if isinstance(m, RunStarted | RunAllPodsReady | RunSucceeded)]
        assert [type(m).__name__ for m in runs] == ["RunStarted", "RunAllPodsReady", "RunSucceeded"]
        pods = await cluster.pods("team-a", jid)
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["east-a100-2", "east-a100-3"]
        env = {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0]["env"]}
        assert env["MUSTER_JOB_ID"] == jid and env["MUSTER_ATTEMPT"] == "0"
        assert all(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4" for p in pods)
        dispatcher_metrics = cluster.runners["dispatcher"].registry
        assert dispatcher_metrics.get_sample_value("muster_dispatcher_jobs_created_total", {"cluster": "east"}) == 1
        assert dispatcher_metrics.get_sample_value("muster_dispatcher_pods_bound_total", {"cluster": "east"}) == 2
        watcher_metrics = cluster.runners["watcher"].registry
        assert watcher_metrics.get_sample_value("muster_node_watcher_gpus_allocatable",
                                                {"cluster": "east", "gpu_type": "a100"}) == 32


async def test_the_same_admission_twice_creates_one_job(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("twice")
    async with running(registry_settings, kube_backend, watcher=False) as cluster:
        envelope = await cluster.decide(admitted(jid, 0, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))
        await cluster.decide(envelope.payload, envelope)  # redelivery: the very same envelope
        # a repeated decision, new event id
        await cluster.decide(admitted(jid, 0, job_spec=job_spec(**TRAINING, annotations=runs_for(60))))
        await cluster.outputs.wait_for(JobDispatched, job_id=jid)
        assert cluster.dispatcher is not None
        loop = cluster.runners["dispatcher"].loops[0]

        async def handled_all() -> bool:
            return loop.stats.handled >= 3

        await eventually_true(handled_all)
        jobs = await cluster.jobs("team-a", jid)
        assert [j["metadata"]["name"] for j in jobs] == [f"{jid}-a0"]
        assert len(cluster.outputs.messages(JobDispatched, job_id=jid)) == 1


async def test_scaling_recreates_the_gang_on_the_new_placement(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("scale")
    async with running(registry_settings, kube_backend) as cluster:
        await cluster.decide(admitted(jid, 0, plan=placement("east-a100-0"),
                                      job_spec=job_spec(replicas=3, **TRAINING, annotations=runs_for(60))))
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        bigger = placement("east-a100-0", "east-a100-1", "east-a100-2")
        await cluster.decide(scaled(jid, 0, plan=bigger))
        dispatched = await cluster.outputs.wait_for(JobDispatched, job_id=jid, count=2)
        assert dispatched[1].object_name == f"{jid}-a0-r1"

        async def rescaled() -> bool:
            jobs = await cluster.jobs("team-a", jid)
            pods = [p for p in await cluster.pods("team-a", jid) if p["status"].get("phase") == "Running"]
            return [j["metadata"]["name"] for j in jobs] == [f"{jid}-a0-r1"] and len(pods) == 3

        await eventually_true(rescaled, within=60)  # the real plane: 15-20 s here, more on a busy machine
        pods = await cluster.pods("team-a", jid)
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["east-a100-0", "east-a100-1", "east-a100-2"]


async def test_a_rescale_starts_the_new_revision_only_once_the_old_pods_are_gone(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    """The old pods take a second to terminate; binding the new ones onto the same GPUs earlier would be refused."""
    jid = job_id("resize")
    async with running(registry_settings, kube_backend) as cluster:
        cluster.require_sim().kubelet.profile = KubeletProfile("slow-stop", (0.0, 0.0), 0.0, 1.0)
        await cluster.decide(admitted(jid, 0, plan=placement("east-a100-0", pods_per_node=2),
                                      job_spec=job_spec(replicas=2, gpus=4, **TRAINING, annotations=runs_for(60))))
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        await cluster.decide(scaled(jid, 0, plan=placement("east-a100-0", "east-a100-1", pods_per_node=2)))
        await cluster.outputs.wait_for(JobDispatched, job_id=jid, count=2)
        new = next(j for j in await cluster.jobs("team-a", jid) if j["metadata"]["name"] == f"{jid}-a0-r1")
        assert new["spec"]["suspend"] is True  # held while the old pods terminate
        assert new["metadata"]["annotations"]["muster.dev/replaces"] == f"{jid}-a0"

        async def rescaled() -> bool:
            pods = await cluster.pods("team-a", jid)
            return len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods)

        await eventually_true(rescaled, within=60)  # the real plane: 15-20 s here, more on a busy machine
        assert not cluster.outputs.messages(RunFailed, job_id=jid)  # no pod was refused by a kubelet
        jobs = await cluster.jobs("team-a", jid)
        assert [(j["metadata"]["name"], j["spec"]["suspend"]) for j in jobs] == [(f"{jid}-a0-r1", False)]


async def test_a_suspended_user_job_is_released_onto_its_placement(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = job_id("native")
    async with running(registry_settings, kube_backend) as cluster:
        user_job = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "my-notebook", "namespace": "team-b", "labels": {"muster.dev/queue": "team-b"}},
            "spec": {"suspend": True, "completions": 1, "parallelism": 1, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"kubesim.muster.dev/duration-seconds": "60"}},
                "spec": {"restartPolicy": "Never", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                         "containers": [{"name": "nb", "image": "jupyter:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
        }
        await create_or_get(cluster.rest, JOBS, user_job)
        source = {"muster.dev/source-job": "team-b/my-notebook"}
        decision = admitted(jid, 0, plan=placement("east-t4-1"), namespace="team-b",
                            job_spec=job_spec(replicas=1, gpus=1, **TRAINING, annotations={**source, **runs_for(30.0)}))
        await cluster.decide(decision)
        dispatched = (await cluster.outputs.wait_for(JobDispatched, job_id=jid))[0]
        assert dispatched.object_name == "my-notebook"
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        job = await cluster.rest.get(JOBS, "my-notebook", "team-b")
        assert job["spec"]["suspend"] is False
        pods = await cluster.pods("team-b", jid)
        assert [p["spec"]["nodeName"] for p in pods] == ["east-t4-1"]


async def test_a_job_reading_secrets_runs_with_the_references_in_its_pods(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    """The spec names a Secret's key and a whole Secret; the dispatcher's Job is accepted, its pods carry the
    references (never a value: Muster does not read Secrets) and the gang runs to success."""
    jid = job_id("secrets")
    base = job_spec(replicas=2, **TRAINING, annotations=runs_for(1.0))
    with_secrets = base.model_copy(update={"template": base.template.model_copy(update={
        "env": {**base.template.env, "HF_TOKEN": EnvVar(secret_ref=SecretKeyRef(name="hf", key="token"))},
        "env_from": [EnvFromSecret(secret_ref=SecretRef(name="wandb"), prefix="WANDB_")]})})
    async with running(registry_settings, kube_backend) as cluster:
        await cluster.decide(admitted(jid, 0, plan=placement("east-a100-0", "east-a100-1"), job_spec=with_secrets))
        await cluster.outputs.wait_for(RunSucceeded, job_id=jid)
        pods = await cluster.pods("team-a", jid)
        assert len(pods) == 2
        for pod in pods:
            container = pod["spec"]["containers"][0]
            env = {e["name"]: e for e in container["env"]}
            assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
            assert env["EPOCHS"]["value"] == "3"
            assert container["envFrom"] == [{"secretRef": {"name": "wandb"}, "prefix": "WANDB_"}]
