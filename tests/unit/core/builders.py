"""Builders and invariant checks shared by the core tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from services.core import (
    Admit,
    CycleResult,
    Job,
    Node,
    QueueSpec,
    ResourceQuota,
    SchedulerConfig,
    SchedulerState,
    gpu_resource,
    schedule,
)
from services.core.quota import job_request

GPU = "a100"
#: first come, first served inside each queue: for tests of mechanisms the queue order does not matter to
FCFS = SchedulerConfig(queue_order="submit")


def node(
    name: str,
    gpus: int = 8,
    gpu_type: str = GPU,
    cluster: str = "c1",
    zone: str = "z1",
    block: str = "b1",
    rack: str = "r1",
    **kw: Any,
) -> Node:
    topo = MappingProxyType({"zone": zone, "block": block, "rack": rack})
    return Node(name=name, cluster=cluster, gpu_type=gpu_type, gpus=gpus, topology=topo, **kw)


def quotas(**by_resource: int | tuple[int, int | None, int | None]) -> Mapping[str, ResourceQuota]:
    """``gpu_a100=8`` or ``gpu_a100=(nominal, borrowing_limit, lending_limit)``; ``cpu``/``memory`` as is."""
    out: dict[str, ResourceQuota] = {}
    for key, value in by_resource.items():
        res = gpu_resource(key[4:]) if key.startswith("gpu_") else key
        out[res] = ResourceQuota(*value) if isinstance(value, tuple) else ResourceQuota(value)
    return MappingProxyType(out)


def queue(name: str, gpus: int | tuple[int, int | None, int | None] | None = None, **kw: Any) -> QueueSpec:
    """A queue with ``gpus`` nominal a100 GPUs (or explicit ``quotas=``)."""
    if gpus is not None and "quotas" not in kw:
        kw["quotas"] = quotas(gpu_a100=gpus)
    return QueueSpec(name=name, **kw)


def job(job_id: str, queue: str = "q", submit: float = 0.0, **kw: Any) -> Job:
    return Job(job_id=job_id, queue=queue, submit_time=submit, **kw)


def state(queues: Iterable[QueueSpec], nodes: Iterable[Node], jobs: Iterable[Job] = (), **kw: Any) -> SchedulerState:
    st = SchedulerState(queues=queues, nodes=nodes, **kw)
    for j in jobs:
        st.submit(j)
    return st


def cycle(st: SchedulerState, now: float, config: SchedulerConfig | None = None) -> CycleResult:
    """Run one cycle and fold its decisions back."""
    result = schedule(st, now, config or SchedulerConfig())
    for d in result.decisions:
        st.apply(d, now)
    return result


def admitted(result: CycleResult) -> set[str]:
    return {d.job_id for d in result.decisions if isinstance(d, Admit)}


def check_invariants(st: SchedulerState) -> None:
    """Capacity per node and NVLink group, quotas, cohort pools and gangs are all respected; only
    preemptible work runs on borrowed quota."""
    nodes = st.nodes()
    assert st.gpuless_pending == sum(not j.total_gpus for j in st.pending.values())
    assert st.elastic_pending == sum(j.elastic for j in st.pending.values())
    used: dict[str, int] = {}
    cpu_used: dict[str, int] = {}
    group_used: dict[tuple[str, int], int] = {}
    charged: dict[str, dict[str, Any]] = {}  # what the running jobs' requests add up to, per queue
    for rj in st.running_jobs().values():
        assert rj.placement.pods == rj.replicas, rj
        assert rj.replicas >= rj.job.min_size, rj
        assert rj.job.preemptible or not rj.borrowed, rj  # borrowed quota must stay reclaimable
        clusters = {nodes[a.node].cluster for a in rj.placement.nodes if a.node in nodes}
        assert len(clusters) <= 1, rj
        # the gang across roles: every companion role is placed whole, and no pod belongs to an unknown role
        by_role: dict[str, int] = {}
        for a in rj.placement.nodes:
            by_role[a.role] = by_role.get(a.role, 0) + a.pods
        assert by_role == {"": rj.replicas, **{c.name: c.replicas for c in rj.job.companions}}, (rj, by_role)
        for a in rj.placement.nodes:
            gpus, cpu_m, _ = rj.job.shape(a.role)
            used[a.node] = used.get(a.node, 0) + a.pods * gpus
            cpu_used[a.node] = cpu_used.get(a.node, 0) + a.pods * cpu_m
            for g in a.groups:
                if g >= 0:
                    group_used[(a.node, g)] = group_used.get((a.node, g), 0) + gpus
        gpu_type = st.run_type.get(rj.job.job_id, "")
        mine = charged.setdefault(rj.job.queue, {})
        for res, amount in job_request(rj.job, gpu_type, rj.replicas).items():
            mine[res] = mine.get(res, 0) + amount
    for qname in st.book.queues:  # the quota book holds exactly what the running jobs ask for
        assert dict(st.queue_usage(qname)) == {r: v for r, v in charged.get(qname, {}).items() if v}, qname
    for name, cpu in cpu_used.items():
        if name in nodes and nodes[name].cpu_m:
            assert cpu <= nodes[name].cpu_m, (name, cpu)
    # GPU sharing: fractions per shared GPU never exceed it, MIG slices never exceed the node's layout
    shares: dict[tuple[str, int], Fraction] = {}
    slices: dict[tuple[str, str], int] = {}
    for rj in st.running_jobs().values():
        for a in rj.placement.nodes:
            for slot in a.slots:
                shares[(a.node, slot)] = shares.get((a.node, slot), Fraction(0)) + a.fraction
            if a.mig_profile:
                slices[(a.node, a.mig_profile)] = slices.get((a.node, a.mig_profile), 0) + a.pods * a.mig_per_pod
    opened: dict[str, int] = {}
    for (name, slot), share in shares.items():
        if name in nodes:
            assert 0 <= slot < nodes[name].shared_gpus and share <= 1, (name, slot, share)
            opened[name] = opened.get(name, 0) + 1
    for (name, profile), n in slices.items():
        if name in nodes:
            assert n <= nodes[name].mig.get(profile, 0), (name, profile, n)
    for name in set(used) | set(opened):
        if name in nodes:
            amount = used.get(name, 0) + opened.get(name, 0)
            assert amount <= nodes[name].gpus, (name, amount)
            assert st.free_gpus(name) == nodes[name].gpus - amount
    for (name, g), amount in group_used.items():
        if name in nodes and nodes[name].nvlink_groups:
            assert amount <= nodes[name].nvlink_groups[g], (name, g, amount)
    book = st.book
    for qname, spec in book.queues.items():
        for res, amount in st.queue_usage(qname).items():
            if not book.is_governed(qname, res):
                continue  # CPU or memory no quota of its tree declares: only node capacity limits it
            q = spec.quotas.get(res)
            nominal = q.nominal if q else 0
            if spec.cohort is None:
                assert amount <= nominal, (qname, res, amount)
            elif q is not None and q.borrowing_limit is not None:
                assert amount <= nominal + q.borrowing_limit, (qname, res, amount)
    for root, used_pool in book.pool_used.items():
        for res, amount in used_pool.items():
            if not res.startswith("gpu:") and res not in book.pool_cap.get(root, {}):
                continue  # not governed in this tree
            assert amount <= book.pool_cap.get(root, {}).get(res, 0), (root, res, amount)


def snapshot(obj: object, skip: frozenset[str] = frozenset({"facts"})) -> object:
    """Everything ``obj`` holds, recursively, as plain comparable values (attributes named in ``skip`` left
    out): two snapshots are equal only if nothing reachable from it changed, insertion order included."""
    seen: dict[int, int] = {}

    def walk(o: object) -> object:
        if o is None or isinstance(o, (bool, int, float, str, bytes, Fraction)):
            return o
        if id(o) in seen:
            return ("seen", seen[id(o)])
        seen[id(o)] = len(seen)
        if isinstance(o, (dict, MappingProxyType)):
            return ("map", [(walk(k), walk(v)) for k, v in o.items()])
        if isinstance(o, (list, tuple)):
            return (type(o).__name__, [walk(v) for v in o])
        if isinstance(o, (set, frozenset)):
            return (type(o).__name__, sorted(repr(walk(v)) for v in o))
        names = list(getattr(o, "__dict__", {})) + [
            s for c in type(o).__mro__ for s in getattr(c, "__slots__", ()) if isinstance(s, str)]
        return (type(o).__name__, [(n, walk(getattr(o, n))) for n in names if n not in skip and hasattr(o, n)])

    return walk(obj)
