"""Capacity that grows, in the queue manager (no broker): a cluster with a node group that can grow and a queue
with a burst budget; a gang that existing capacity cannot serve has nodes requested for it, waits for them with
the reason and the plan in its status, runs on them once they are provisioned, and the nodes are given back once
idle. A failed or unanswered request falls back to waiting, with the reason shown, and is not retried at once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.config import (
    AutoscaleConfig,
    BurstBudgetConfig,
    ClusterConfig,
    ClusterDefined,
    NodeGroupConfig,
    QueueConfig,
    QueueDefined,
    ResourceQuotaConfig,
)
from schemas.decisions import JobAdmitted, NodeReleaseRequested, NodesRequested
from schemas.jobs import JobRecord, JobRecorded
from schemas.kube import NODE_GROUP, PROVISIONING_REQUEST
from schemas.runs import NodesProvisioned, ProvisioningFailed, RunStarted, RunSucceeded
from schemas.status import JobStatusChanged
from schemas.usage import BurstSpendReported
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import CycleOutcome, run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.recovery import rebuild
from tests.queue_manager.builders import NOW, config_messages, node, of_type, run_fields, submit

CFG = SchedulerConfig(min_runtime_s=0.0, provision_margin_s=60.0, provision_booking_s=600.0,
                      provision_timeout_s=300.0, provision_retry_s=1200.0)
CLOUD = ClusterConfig(name="cloud", burst=True, node_groups=[NodeGroupConfig(
    name="a100", count=0, gpus_per_node=8, gpu_type="a100", cpu=96, memory_gb=1024,
    autoscale=AutoscaleConfig(max=8, provision_delay_s=360, price_per_gpu_hour=3.0, idle_s=300))])
REQUEST = "big-a0"


def _state(budget_gpu_hours: float = 1000.0) -> QueueState:
    qs = QueueState.for_shard(QueueState().shard, CFG)
    for msg in config_messages(64):
        if isinstance(msg, QueueDefined):
            msg = QueueDefined(item=msg.item.model_copy(update={
                "burst_budget": BurstBudgetConfig(gpu_hours=budget_gpu_hours, window="month")}))
        qs.fold_config(msg.key(), msg, NOW)
    cloud = ClusterDefined(item=CLOUD)
    qs.fold_config(cloud.key(), cloud, NOW)
    n = node("east-a100-0", 8)
    qs.fold_capacity(n.key(), n, NOW)
    return qs


def _cloud_node(name: str, request: str | None = REQUEST) -> NodeStateObserved:
    labels = {NODE_GROUP: "a100", **({PROVISIONING_REQUEST: request} if request else {})}
    state = NodeState(cluster="cloud", node=name, gpu_type="a100", gpus_allocatable=8, cpu_m=96_000,
                      memory_mb=1 << 20, labels=labels)
    return NodeStateObserved(state=state, observed_at=datetime.fromtimestamp(NOW, UTC))


def _input(qs: QueueState, message: object, now: float) -> list[Out]:
    return on_input(qs, message, uuid.uuid4().hex, now)  # type: ignore[arg-type]


def _status(outs: list[Out], job_id: str) -> JobStatusChanged:
    return [s for s in of_type(outs, JobStatusChanged) if s.job_id == job_id][-1]


def _outs(c: CycleOutcome) -> list[Out]:
    return [*c.records, *c.decisions, *c.statuses]


def _big(qs: QueueState) -> None:
    """A 32-GPU gang (4 pods of 8) of an hour: the cluster has one 8-GPU node."""
    _input(qs, submit("big", gpus=8, replicas=4, runtime_estimate_s=3600), NOW)


def test_a_gang_that_does_not_fit_has_nodes_bought_runs_there_and_the_nodes_are_given_back() -> None:
    qs = _state()
    _big(qs)
    first = run_cycle(qs, NOW, CFG)
    [req] = of_type(first.decisions, NodesRequested)
    assert (req.job_id, req.attempt, req.cluster, req.group, req.request, req.nodes) == ("big", 0, "cloud", "a100",
                                                                                        REQUEST, 4)
    assert (req.gpus_per_node, req.gpu_type, req.namespace) == (8, "a100", "ns-team-a")
    assert req.ready_by.timestamp() == NOW + 360
    assert req.gpu_hours == round(4 * 8 * (3600 + 300) / 3600, 6)  # its hour and the idle time, charged up front
    assert req.money == round(req.gpu_hours * 3.0, 4) and req.price_per_gpu_hour == 3.0
    waiting = _status(_outs(first), "big")
    assert (waiting.state, waiting.reason) == ("pending", "waiting_for_provisioning")
    assert "provisioning 4 x a100 nodes" in waiting.message and "ready in ~6 min" in waiting.message
    assert not of_type(run_cycle(qs, NOW + 10, CFG).decisions, NodesRequested)  # one request in flight

    # the cloud's nodes appear before the answer: nobody else may take them meanwhile
    names = [f"cloud-a100-{i}" for i in range(4)]
    for name in names:
        n = _cloud_node(name)
        qs.fold_capacity(n.key(), n, NOW + 300)
    assert not set(names) & set(qs.sched.cap.nodes)
    _input(qs, NodesProvisioned(**{**run_fields("big"), "cluster": "cloud"}, request=REQUEST, group="a100",
                                nodes=names), NOW + 360)
    assert set(names) <= set(qs.sched.cap.nodes)
    admitted = run_cycle(qs, NOW + 361, CFG)
    [adm] = of_type(admitted.decisions, JobAdmitted)
    assert adm.placement.cluster == "cloud" and {n.node for n in adm.placement.nodes} == set(names)
    assert adm.bought  # the accountant charges the attempt to neither quota nor usage
    [rec] = [r.record for r in of_type(admitted.records, JobRecorded) if r.job_id == "big"]
    assert rec.bought and qs.sched.queue_usage("team-a").get("gpu:a100", 0) == 0  # outside the queue's quota

    # a restart keeps the job outside quota
    fresh = _state()
    for name in names:
        n = _cloud_node(name, None)
        fresh.fold_capacity(n.key(), n, NOW + 362)
    rebuild(fresh, [(rec, None)])
    assert fresh.jobs["big"].bought and fresh.sched.queue_usage("team-a").get("gpu:a100", 0) == 0

    _input(qs, RunStarted(**run_fields("big"), pods_running=4, pods_total=4), NOW + 370)
    _input(qs, RunSucceeded(**run_fields("big")), NOW + 3970)
    assert not of_type(run_cycle(qs, NOW + 4000, CFG).decisions, NodeReleaseRequested)  # idle 30 s of 300
    released = of_type(run_cycle(qs, NOW + 4300, CFG).decisions, NodeReleaseRequested)
    assert sorted(r.node for r in released) == names
    assert {(r.cluster, r.group, r.queue) for r in released} == {("cloud", "a100", "team-a")}  # whose budget paid
    assert not set(names) & set(qs.sched.cap.nodes)
    again = _cloud_node(names[0], None)  # still observed until the autoscaler removes it: kept out of the core
    qs.fold_capacity(again.key(), again, NOW + 4310)
    assert names[0] not in qs.sched.cap.nodes
    gone = NodeRemoved(cluster="cloud", node=names[0], observed_at=datetime.fromtimestamp(NOW + 4400, UTC))
    qs.fold_capacity(gone.key(), gone, NOW + 4400)
    assert names[0] not in qs.growth.releasing and names[0] not in qs.nodes
    spent = qs.sched.growth.spent["team-a"]
    assert spent[1] == pytest.approx(4 * 8 * (4300 - 360) / 3600)  # what the nodes cost: ready until given back


def test_a_failed_request_falls_back_to_waiting_with_the_reason_and_is_not_retried_at_once() -> None:
    qs = _state()
    _big(qs)
    run_cycle(qs, NOW, CFG)
    outs = _input(qs, ProvisioningFailed(**{**run_fields("big"), "cluster": "cloud"}, request=REQUEST,
                                         reason="OutOfCapacity", message="no a100 left in the zone"), NOW + 100)
    assert outs == [] or all(not isinstance(o.message, JobAdmitted) for o in outs)
    after = run_cycle(qs, NOW + 101, CFG)
    status = _status(_outs(after), "big")
    assert status.state == "pending" and status.reason != "waiting_for_provisioning"
    assert "buying nodes failed (OutOfCapacity: no a100 left in the zone)" in status.message
    assert not of_type(after.decisions, NodesRequested)
    assert qs.sched.growth.spent.get("team-a", (0.0, 0.0, 0.0))[1:] == (0.0, 0.0)  # the charge was given back
    assert of_type(run_cycle(qs, NOW + 100 + 1201, CFG).decisions, NodesRequested)  # after provision_retry_s


def test_an_unanswered_request_counts_as_failed_after_the_timeout() -> None:
    qs = _state()
    _big(qs)
    run_cycle(qs, NOW, CFG)
    assert qs.sched.growth.requests
    late = run_cycle(qs, NOW + 360 + 301, CFG)
    status = _status(_outs(late), "big")
    assert "buying nodes failed (no answer within 5 min of the expected time)" in status.message
    assert not qs.sched.growth.requests and not of_type(late.decisions, NodesRequested)


def test_a_queue_without_room_in_its_burst_budget_waits_for_existing_capacity() -> None:
    qs = _state(budget_gpu_hours=10.0)  # four 8-GPU nodes for an hour and the idle time cost far more
    _big(qs)
    c = run_cycle(qs, NOW, CFG)
    assert not of_type(c.decisions, NodesRequested)
    assert _status(_outs(c), "big").reason != "waiting_for_provisioning"


def test_what_the_accountant_reports_spent_counts_against_the_budget_after_a_restart() -> None:
    """A restarted queue manager has charged nothing itself: the quota accountant's report of the bought nodes'
    real cost in the budget's window is what it counts (a report of another window counts for nothing)."""
    need = 4 * 8 * (3600 + 300) / 3600
    for start, end, spent, buys in ((NOW - 100, NOW + 86400, 200.0 - need + 1, False),
                                    (NOW - 100, NOW + 86400, 200.0 - need - 1, True),
                                    (NOW - 86500, NOW - 100, 200.0, True)):
        qs = _state(budget_gpu_hours=200.0)
        report = BurstSpendReported(queue="team-a", window="month", window_start=_utc(start), window_end=_utc(end),
                                    as_of=_utc(NOW - 1), gpu_hours=spent, money=spent * 3.0, nodes_held=0)
        assert qs.fold_usage(report)
        _big(qs)
        assert bool(of_type(run_cycle(qs, NOW, CFG).decisions, NodesRequested)) is buys, (start, spent)


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def test_a_queue_without_a_burst_budget_never_has_nodes_bought() -> None:
    qs = _state()
    plain = QueueDefined(item=QueueConfig(name="team-a", cohort="research", tenant="team-a",
                                          quotas={"gpu:a100": ResourceQuotaConfig(nominal=64)}))
    qs.fold_config(plain.key(), plain, NOW)
    _big(qs)
    assert not of_type(run_cycle(qs, NOW, CFG).decisions, NodesRequested)


def test_nodes_of_a_growable_group_observed_before_its_definition_become_its_members() -> None:
    qs = QueueState.for_shard(QueueState().shard, CFG)
    n = _cloud_node("cloud-a100-0", None)
    qs.fold_capacity(n.key(), n, NOW)
    cloud = ClusterDefined(item=CLOUD)
    qs.fold_config(cloud.key(), cloud, NOW)
    assert qs.sched.growth.node_group == {"cloud-a100-0": "cloud-a100"}
    later = _cloud_node("cloud-a100-1", None)
    qs.fold_capacity(later.key(), later, NOW)
    assert set(qs.sched.growth.members["cloud-a100"]) == {"cloud-a100-0", "cloud-a100-1"}


def test_a_record_without_bought_reads_as_before() -> None:
    rec = JobRecord.model_validate_json(JobRecord(submission=submit("x"), priority=1, state="pending")
                                        .model_dump_json())
    assert not rec.bought and "bought" not in rec.model_dump(mode="json")


def test_an_answer_that_names_no_nodes_books_the_groups_new_idle_nodes() -> None:
    """cluster-autoscaler labels no node with its request: the nodes of the group that joined since are the job's."""
    qs = _state()
    _big(qs)
    run_cycle(qs, NOW, CFG)
    names = [f"cloud-a100-{i}" for i in range(4)]
    for name in names:
        n = _cloud_node(name, None)
        qs.fold_capacity(n.key(), n, NOW + 300)
    _input(qs, NodesProvisioned(**{**run_fields("big"), "cluster": "cloud"}, request=REQUEST, group="a100",
                                nodes=[]), NOW + 360)
    assert {n: b.job_id for n, b in qs.sched.growth.booked.items()} == dict.fromkeys(names, "big")
    [adm] = of_type(run_cycle(qs, NOW + 361, CFG).decisions, JobAdmitted)
    assert {n.node for n in adm.placement.nodes} == set(names)
