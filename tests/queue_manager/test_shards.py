"""Sharding the queue manager by pool: each shard schedules only its pools' queues onto its pools' nodes,
so shards fed the very same inputs never admit onto the same GPUs and never both take a job."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.capacity import NodeState, NodeStateObserved
from schemas.config import (
    ConfigItemDeleted,
    PoolConfig,
    PoolDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    ResourceQuotaConfig,
    TenantConfig,
    TenantDefined,
)
from schemas.decisions import JobAdmitted
from schemas.envelope import Message
from schemas.jobs import JobRecorded
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.pools import DEFAULT_POOL, Shard, node_pool, queue_pool
from services.queue_manager.queue_state import QueueState
from services.queue_manager.recovery import rebuild
from tests.queue_manager.builders import CLUSTER, NOW, T0, of_type, submit

CFG = SchedulerConfig(min_runtime_s=0.0)
POOLS = ("blue", "green")


def pool_defined(name: str) -> PoolDefined:
    return PoolDefined(item=PoolConfig(name=name, node_labels={"pool": name}))


def queue(name: str, pool: str | None) -> QueueDefined:
    quotas = {"gpu:a100": ResourceQuotaConfig(nominal=64), "cpu": ResourceQuotaConfig(nominal=1_000_000),
              "memory": ResourceQuotaConfig(nominal=1 << 30)}
    return QueueDefined(item=QueueConfig(name=name, cohort="all", tenant="team-a", quotas=quotas, pool=pool))


def labelled_node(name: str, pool: str | None) -> NodeStateObserved:
    state = NodeState(cluster=CLUSTER, node=name, gpu_type="a100", gpus_allocatable=8, cpu_m=96_000,
                      memory_mb=1 << 20, labels={"pool": pool} if pool else {})
    return NodeStateObserved(state=state, observed_at=T0)


def config() -> list[Message]:
    return [
        *(pool_defined(p) for p in POOLS),
        queue("q-blue", "blue"), queue("q-green", "green"), queue("q-any", None),
        PriorityClassDefined(item=PriorityClassConfig(name="normal", value=100)),
        TenantDefined(item=TenantConfig(name="team-a", namespace="team-a")),
    ]


def nodes() -> list[NodeStateObserved]:
    return [labelled_node(f"{p or DEFAULT_POOL}-{i}", p) for p in (*POOLS, None) for i in range(2)]


def shard_state(*pools: str) -> QueueState:
    qs = QueueState.for_shard(Shard.of(pools))
    for msg in config():
        qs.fold_config(msg.key(), msg)
    for n in nodes():
        qs.fold_capacity(n.key(), n)
    return qs


def feed(qs: QueueState, msg: Message, event_id: str | None = None) -> None:
    on_input(qs, msg, event_id or uuid.uuid4().hex, NOW)


def admitted_nodes(qs: QueueState) -> dict[str, set[str]]:
    out = run_cycle(qs, NOW, CFG)
    return {a.job_id: {n.node for n in a.placement.nodes} for a in of_type(out.decisions, JobAdmitted)}


def test_pools_of_nodes_and_queues() -> None:
    pools = [pool_defined("blue"), PoolDefined(item=PoolConfig(name="aaa", node_labels={}))]
    assert node_pool({"pool": "blue", "zone": "z"}, [p.item for p in pools]) == "blue"
    assert node_pool({"pool": "red"}, [p.item for p in pools]) == DEFAULT_POOL  # an empty selector selects nothing
    overlapping = [PoolConfig(name="b", node_labels={"gpu": "a100"}), PoolConfig(name="a", node_labels={"rack": "1"})]
    assert node_pool({"gpu": "a100", "rack": "1"}, overlapping) == "a"  # the first by name wins
    assert queue_pool(None) == DEFAULT_POOL and queue_pool(queue("q", "blue").item) == "blue"
    assert not Shard().sharded and Shard.of([]).owns("anything")
    assert Shard.of(["blue"]).owns("blue") and not Shard.of(["blue"]).owns(DEFAULT_POOL)


def test_each_shard_takes_only_its_pools_jobs_onto_its_pools_nodes() -> None:
    blue, rest = shard_state("blue"), shard_state("green", DEFAULT_POOL)
    jobs = [submit("b1", queue="q-blue"), submit("g1", queue="q-green"), submit("a1", queue="q-any"),
            submit("x1", queue="no-such-queue")]
    for shard in (blue, rest):
        for job in jobs:
            feed(shard, job, event_id=f"submit-{job.job_id}")
    assert set(blue.jobs) == {"b1"} and set(rest.jobs) == {"g1", "a1", "x1"}
    assert admitted_nodes(blue) == {"b1": {"blue-0"}}
    placed = admitted_nodes(rest)
    assert placed["g1"] <= {"green-0", "green-1"} and placed["a1"] <= {"green-0", "green-1", "default-0", "default-1"}
    assert rest.jobs["x1"].state == "rejected"  # the default pool's shard answers for unknown queues
    assert not (set(blue.sched.cap.nodes) & set(rest.sched.cap.nodes))


def test_unsharded_instance_confines_a_pool_queue_to_its_pool() -> None:
    qs = shard_state()
    for i in range(3):
        feed(qs, submit(f"b{i}", queue="q-blue"))
    placed = admitted_nodes(qs)
    assert set(placed) == {"b0", "b1"}  # two 8-GPU blue nodes, and the third waits although other nodes are free
    assert set().union(*placed.values()) == {"blue-0", "blue-1"}
    assert qs.jobs["b2"].state == "pending"


def test_a_pool_defined_later_moves_nodes_out_of_the_shard() -> None:
    qs = QueueState.for_shard(Shard.of([DEFAULT_POOL]))
    for n in nodes():
        qs.fold_capacity(n.key(), n)
    assert len(qs.sched.cap.nodes) == 6  # no pools defined yet: every node is the default pool's
    qs.fold_config("pool/blue", pool_defined("blue"))
    assert set(qs.sched.cap.nodes) == {"green-0", "green-1", "default-0", "default-1"}
    deleted = ConfigItemDeleted(kind="pool", name="blue")
    qs.fold_config(deleted.key(), deleted)
    assert len(qs.sched.cap.nodes) == 6


def test_recovery_keeps_only_the_shards_own_records() -> None:
    everything = shard_state()
    outs = []
    for job in (submit("b1", queue="q-blue"), submit("g1", queue="q-green")):
        outs += on_input(everything, job, uuid.uuid4().hex, NOW)
    records = [(o.message.record, None) for o in outs if isinstance(o.message, JobRecorded)]
    green = shard_state("green")
    rebuild(green, records)
    assert set(green.jobs) == {"g1"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q-blue", "q-green", "q-any"]), st.integers(1, 8)), max_size=25))
def test_shards_fed_the_same_inputs_never_share_a_job_or_a_gpu(submissions: list[tuple[str, int]]) -> None:
    shards = [shard_state("blue"), shard_state("green"), shard_state(DEFAULT_POOL)]
    for i, (queue_name, gpus) in enumerate(submissions):
        job = submit(f"j{i}", queue=queue_name, gpus=gpus, offset_s=i)
        for shard in shards:
            feed(shard, job, event_id=f"e{i}")
    owners = [set(s.jobs) for s in shards]
    assert sum(len(o) for o in owners) == len(submissions) == len(set().union(*owners))
    used = [set().union(*admitted_nodes(s).values()) for s in shards]
    for a in range(3):
        for b in range(a + 1, 3):
            assert not (used[a] & used[b]), "two shards admitted onto one node"
    assert used[0] <= {"blue-0", "blue-1"} and used[1] <= {"green-0", "green-1"}
    assert used[2] <= {"default-0", "default-1"}
