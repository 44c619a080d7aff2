"""The replay of the log carries each job's whole spec: the simulator builds the core job from it by the queue
manager's own translation, and what it cannot replay it says."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from schemas.decisions import JobPreemptionRequested
from schemas.intents import SubmitJob
from schemas.jobspec import CheckpointSpec, DependencySpec, PodTemplate, ResourceRequest, TopologySpec
from schemas.kube import GPU_RESOURCE, NODE_GROUP, POOL
from schemas.runs import DispatchFailed, JobStopped, RunIdle
from services.core.model import SchedulerConfig
from services.simulator.engine import SimOptions, Simulator
from services.simulator.replay import node_groups, reconstruct
from services.simulator.whatif import compare, render_text
from services.spec.core_types import configured_job, job_from_submit
from tests.builders.jobspecs import job_spec
from tests.unit.simulator.log_builders import Log, at

SCHED = SchedulerConfig()


def _stopped_for_max_runtime(log: Log, job_id: str, t: float) -> Log:
    log.add(JobPreemptionRequested(job_id=job_id, attempt=0, reason="max_runtime_exceeded", grace_period_s=0,
                                   requeue=False, cluster="east"), t)
    log.add(JobStopped(job_id=job_id, attempt=0, cluster="east", observed_at=log.at(t + 10),
                       reason="max_runtime_exceeded", requeue=False), t + 10)
    return log.status(job_id, "failed", t + 10)


def test_a_job_replays_with_its_node_selector_and_its_max_runtime() -> None:
    log = Log().cluster(nodes=2).node("east-ssd-0", labels={NODE_GROUP: "ssd", "disk": "ssd"})
    log.submit_spec("long", job_spec("long", replicas=1, gpus=8, node_selector={"disk": "ssd"}, max_runtime_s=300), 0)
    log.admit("long", 0).start("long", 0)
    _stopped_for_max_runtime(log, "long", 300)
    log.submit_spec("next", job_spec("next", replicas=1, gpus=8, node_selector={"disk": "ssd"}), 0)
    log.admit("next", 310).start("next", 310).succeed("next", 410)
    recon = reconstruct(log.envelopes, as_of=at(1000), since=at(0))
    replayed = {w.job_id: w for w in recon.workload.jobs}
    assert replayed["long"].spec is not None and replayed["long"].spec.node_selector == {"disk": "ssd"}
    assert replayed["long"].spec.max_runtime_s == 300
    result = Simulator(recon.workload, recon.cluster, SCHED, options=SimOptions(tick_s=5)).run()
    long, following = result.records["long"], result.records["next"]
    assert long.job.node_selector == {"disk": "ssd"} and long.job.max_runtime_s == 300
    # it really ran 310 s, but its max runtime stops it at 300 s, as it stopped the real one: not checkpointable,
    # nothing to wait for
    assert (long.first_start, long.end, long.killed, long.outcome) == (0.0, 300.0, True, "failed")
    # both select the one ssd node: the second waits for the first although two other nodes are free
    assert following.first_start == 300.0 and following.outcome == "succeeded"


def test_the_replay_builds_the_core_job_the_queue_manager_builds() -> None:
    pooled = Log().cluster()
    shared = ResourceRequest(gpu_fraction=0.5, gpu_type="a100", cpu="6", memory="40Gi")
    spec = job_spec("train-resnet-7", replicas=2, template=PodTemplate(image="img", resources=shared),
                    topology=TopologySpec(level="block"), cluster="east", max_wait_s=900,
                    checkpoint=CheckpointSpec(enabled=True, grace_period_s=45), runtime_estimate_s=600)
    pooled.node("east-shared-0", labels={NODE_GROUP: "shared"}, gpus_shared=4)
    pooled.submit_spec("j", spec, 0, user="alice").admit("j", 0).start("j", 0).succeed("j", 100)
    recon = reconstruct(pooled.envelopes, as_of=at(200), since=at(0))
    result = Simulator(recon.workload, recon.cluster, SCHED).run()
    replayed = result.records["j"].job
    submitted = next(e.payload for e in pooled.envelopes if isinstance(e.payload, SubmitJob))
    assert isinstance(submitted, SubmitJob)
    queue_manager = configured_job(job_from_submit(submitted, priority=100, submit_time=0.0),
                                   class_preemptible=True, pool=None)
    assert replayed == queue_manager
    assert (replayed.name, replayed.user, replayed.tenant) == ("train-resnet-7", "alice", "team-a")
    assert replayed.tolerations == frozenset({GPU_RESOURCE}) and replayed.grace_period_s == 45
    assert (replayed.cpu_m, replayed.memory_mb, replayed.gpu_share, replayed.cluster) == (6000, 40960, 0.5, "east")
    # half a GPU per pod is what its two pods hold, and what the replay counts for the 100 s it ran
    assert result.records["j"].gpu_seconds == pytest.approx(100.0)
    assert recon.jobs["j"].gpu_seconds == pytest.approx(100.0)


def test_a_queues_pool_and_a_priority_class_apply_as_in_the_queue_manager() -> None:
    from schemas.config import (
        PoolConfig,
        PoolDefined,
        PriorityClassConfig,
        PriorityClassDefined,
        QueueConfig,
        QueueDefined,
    )

    log = Log().cluster()
    log.add(PoolDefined(item=PoolConfig(name="training", node_labels={"pool": "training"})), -100)
    log.add(QueueDefined(item=QueueConfig(name="team-a", cohort="research", tenant="team-a", pool="training",
                                          quotas={"gpu:a100": {"nominal": 8}})), -100)
    log.add(PriorityClassDefined(item=PriorityClassConfig(name="serving", value=500, preemptible=False)), -100)
    log.submit_spec("j", job_spec("j", replicas=1, gpus=8, priority_class="serving", node_selector={"disk": "any"}), 0)
    recon = reconstruct(log.envelopes, as_of=at(10), since=at(0))
    record = Simulator(recon.workload, recon.cluster, SCHED).run().records["j"]
    job = record.job
    assert record.first_start == 0.0  # the pool's nodes are the cluster's
    assert not job.preemptible
    assert job.node_selector == MappingProxyType({POOL: "training"})  # "disk" no replayed node has: dropped
    assert any("node selector" in line for line in recon.not_replayed)


def test_a_retryable_dispatch_failure_ends_an_attempt_only_before_it_started() -> None:
    log = Log().cluster().submit("j", "team-a", 0).admit("j", 0)
    log.add(DispatchFailed(job_id="j", attempt=0, cluster="east", observed_at=log.at(5), reason="api_unavailable",
                           message="503", retryable=True), 5)  # the admission's Job never existed: requeued
    log.admit("j", 10, 1).start("j", 10, 1)
    log.add(DispatchFailed(job_id="j", attempt=1, cluster="east", observed_at=log.at(50), reason="api_unavailable",
                           message="503", retryable=True), 50)  # a rescale failed: the run goes on
    log.succeed("j", 110, 1)
    recon = reconstruct(log.envelopes, as_of=at(200), since=at(0))
    assert recon.jobs["j"].run_s == 100
    assert [w.duration for w in recon.workload.jobs] == [100]


def test_a_dependency_named_by_job_name_is_replayed() -> None:
    log = Log().cluster(nodes=4)
    log.submit_spec("prep-1", job_spec("prep", replicas=1, gpus=8), 0)
    log.admit("prep-1", 0).start("prep-1", 0).succeed("prep-1", 100)
    log.submit_spec("train-1", job_spec("train", replicas=1, gpus=8, after=[DependencySpec(job="prep")]), 5)
    log.admit("train-1", 100).start("train-1", 100).succeed("train-1", 150)
    recon = reconstruct(log.envelopes, as_of=at(400), since=at(0))
    train = next(w for w in recon.workload.jobs if w.job_id == "train-1")
    assert [(dep, on.value) for dep, on in train.after] == [("prep-1", "succeeded")]
    result = Simulator(recon.workload, recon.cluster, SCHED, options=SimOptions(tick_s=5)).run()
    assert result.records["train-1"].first_start == 100.0  # four nodes free, but it waits for prep


def test_what_the_replay_cannot_replay_is_in_its_output() -> None:
    log = Log().cluster().submit("idle", "team-a", 0).admit("idle", 0).start("idle", 0)
    log.add(RunIdle(job_id="idle", attempt=0, cluster="east", observed_at=log.at(50), idle_since=log.at(0), pods=1),
            50)
    pinned = job_spec("pinned", replicas=1, gpus=8, node_selector={"kubernetes.io/hostname": "east-a100-1"})
    log.submit_spec("pinned", pinned, 0)
    recon = reconstruct(log.envelopes, as_of=at(100), since=at(0))
    lines = recon.not_replayed
    assert any(line.startswith("1 job(s) released for idleness") for line in lines)
    assert any(line.startswith("1 job(s) selecting nodes by a label") for line in lines)
    pinned = next(w for w in recon.workload.jobs if w.job_id == "pinned")
    assert pinned.spec is not None and pinned.spec.node_selector == {}
    result = Simulator(recon.workload, recon.cluster, SCHED).run()
    report = compare(recon, {"baseline": (result, recon.cluster)})
    assert report["not_replayed"] == list(lines)
    assert "not replayed: 1 job(s) released for idleness" in render_text(report)


def test_node_groups_keep_shared_gpus_mig_slices_and_the_labels_their_nodes_share() -> None:
    log = Log().node("east-mig-0", labels={NODE_GROUP: "mig", "kubernetes.io/hostname": "east-mig-0",
                                           "nvidia.com/gpu.product": "A100-SXM4-80GB"},
                     gpus_allocatable=6, mig={"1g.10gb": 14})
    log.node("east-mig-1", labels={NODE_GROUP: "mig", "kubernetes.io/hostname": "east-mig-1",
                                   "nvidia.com/gpu.product": "A100-SXM4-80GB"}, gpus_allocatable=6, mig={"1g.10gb": 14})
    log.node("east-frac-0", labels={NODE_GROUP: "frac"}, gpus_shared=2,
             taints=[{"key": "nvidia.com/gpu"}, {"key": "spot", "effect": "PreferNoSchedule"}])
    states = [e.payload.state for e in log.envelopes]  # type: ignore[attr-defined]
    [cluster] = node_groups(states)
    groups = {g.name: g for g in cluster.node_groups}
    mig, frac = groups["mig"], groups["frac"]
    assert (mig.count, mig.gpus_per_node, mig.mig_gpus, mig.mig_layout) == (2, 8, 2, {"1g.10gb": 7})
    assert mig.labels == {"nvidia.com/gpu.product": "A100-SXM4-80GB"}  # the hostname differs, Muster's own are set anew
    assert (frac.shared_gpus, frac.taints) == (2, ["nvidia.com/gpu"])  # a preference is not a taint to tolerate


def test_a_trace_job_is_built_as_before() -> None:
    from tests.unit.simulator.builders import job, one_node_cluster, workload

    result = Simulator(workload(job("t-1", 0, 10, 4)), one_node_cluster(), SCHED).run()
    built = result.records["t-1"].job
    assert (built.name, built.grace_period_s, built.replicas, built.gpus_per_pod) == ("t-1", 30.0, 1, 4)
    assert (built.user, built.tenant, built.node_selector) == ("", "default", {})  # its queue's tenant


def test_a_job_that_failed_ends_failed_in_the_replay_too() -> None:
    log = Log().cluster(nodes=4).submit("f", "team-a", 0).admit("f", 0).start("f", 0).fail("f", 50)
    log.submit_spec("on-success", job_spec("on-success", replicas=1, gpus=8, after=[DependencySpec(job="f")]), 1)
    log.cancel("on-success", 50)  # it could never run
    log.submit_spec("on-end", job_spec("on-end", replicas=1, gpus=8, after=[DependencySpec(job="f", on="finished")]), 1)
    log.admit("on-end", 50).start("on-end", 50).succeed("on-end", 80)
    recon = reconstruct(log.envelopes, as_of=at(200), since=at(0))
    assert [(w.job_id, w.fails) for w in recon.workload.jobs] == [("f", True), ("on-end", False)]
    result = Simulator(recon.workload, recon.cluster, SCHED, options=SimOptions(tick_s=5)).run()
    assert result.records["f"].outcome == "failed"
    assert (result.records["on-end"].first_start, result.records["on-end"].outcome) == (50.0, "succeeded")
