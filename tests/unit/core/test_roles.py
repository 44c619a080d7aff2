"""Jobs of several roles: a main role and companion roles admitted, charged, placed and preempted as one."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from services.core import (
    Admit,
    PendingReason,
    Preempt,
    Role,
    Scale,
    TopologyMode,
    TopologyRequest,
)
from services.core.quota import job_request

from .builders import FCFS, admitted, check_invariants, cycle, job, node, queue, state

LAUNCHER = Role("launcher", 1, 0, cpu_m=2000)
HEAD = Role("head", 1, 1, cpu_m=1000)


def roles_of(d: Admit) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for a in d.placement.nodes:
        out.setdefault(a.role, []).append((a.node, a.pods))
    return out


def only_admit(result: object) -> Admit:
    (d,) = [d for d in result.decisions if isinstance(d, Admit)]  # type: ignore[attr-defined]
    return d


def test_a_launcher_and_its_workers_start_together_the_launcher_beside_them() -> None:
    st = state([queue("q", 16)], [node("n1", 8, cpu_m=16000), node("n2", 8, cpu_m=16000)])
    st.submit(job("mpi", replicas=2, gpus_per_pod=4, role="worker", companions=(LAUNCHER,)))
    d = only_admit(cycle(st, 0.0, FCFS))
    placed = roles_of(d)
    assert sum(p for _, p in placed[""]) == 2 and placed["launcher"] == [(placed[""][0][0], 1)]
    assert d.replicas == 2
    check_invariants(st)
    assert st.queue_usage("q") == {"gpu:a100": 8, "cpu": 2000}


def test_quota_counts_every_role() -> None:
    st = state([queue("q", 8)], [node("n1", 8), node("n2", 8)])
    st.submit(job("ray", replicas=2, gpus_per_pod=4, role="worker", companions=(HEAD,)))  # 8 + 1 GPUs
    result = cycle(st, 0.0, FCFS)
    assert not admitted(result)
    assert result.pending["ray"].reason is PendingReason.QUEUE_QUOTA
    assert "with head 1x1 GPU" in result.pending["ray"].message


def test_a_gang_whose_companion_does_not_fit_waits_whole() -> None:
    st = state([queue("q", 32)], [node("n1", 8)])
    st.submit(job("other", gpus_per_pod=8))
    st.submit(job("ray", replicas=2, gpus_per_pod=4, role="worker", companions=(HEAD,), submit=1.0))
    st.upsert_node(node("n2", 8))
    first = cycle(st, 0.0, FCFS)
    assert admitted(first) == {"other"}
    assert first.pending["ray"].reason is PendingReason.RESERVATION  # 8 free GPUs on n2 but 9 wanted
    st.job_finished("other", 5.0)
    d = only_admit(cycle(st, 5.0, FCFS))
    assert d.job_id == "ray" and set(roles_of(d)) == {"", "head"}
    check_invariants(st)


def test_a_gang_that_can_never_fit_says_so() -> None:
    st = state([queue("q", 32)], [node("n1", 2)])
    st.submit(job("big", gpus_per_pod=2, role="worker", companions=(HEAD,)))
    assert cycle(st, 0.0, FCFS).pending["big"].reason is PendingReason.NO_MATCHING_NODES


@pytest.mark.parametrize(("mode", "placed"), [(TopologyMode.REQUIRED, False), (TopologyMode.PREFERRED, True)])
def test_a_companion_with_a_topology_goes_to_the_main_roles_rack(mode: TopologyMode, placed: bool) -> None:
    st = state([queue("q", 32)], [node("a1", 8, rack="r1"), node("b1", 8, rack="r2")])
    head = replace(HEAD, topology=TopologyRequest("rack", mode))
    st.submit(job("ray", replicas=2, gpus_per_pod=4, role="worker", companions=(head,),
                  topology=TopologyRequest("rack")))  # the workers fill one rack's only node
    result = cycle(st, 0.0, FCFS)
    assert bool(admitted(result)) is placed
    if placed:
        d = only_admit(result)
        workers = {n for n, _ in roles_of(d)[""]}
        assert len(workers) == 1 and roles_of(d)["head"][0][0] not in workers


def test_a_companion_that_does_not_fit_beside_the_main_role_moves_it_to_another_domain() -> None:
    """The best fitting rack for the workers (r2, 8 free GPUs) has no room left for their head; the next
    rack (r1) has room for both, so the gang goes there."""
    st = state([queue("q", 32)], [node("a1", 8, rack="r1"), node("a2", 8, rack="r1"), node("b1", 8, rack="r2")])
    st.submit(job("filler", gpus_per_pod=4))
    head = replace(HEAD, topology=TopologyRequest("rack"))
    st.submit(job("ray", gpus_per_pod=8, role="worker", companions=(head,), submit=1.0,
                  topology=TopologyRequest("rack")))
    result = cycle(st, 0.0, FCFS)
    d = next(d for d in result.decisions if isinstance(d, Admit) and d.job_id == "ray")
    assert roles_of(d) == {"": [("a2", 1)], "head": [("a1", 1)]}
    check_invariants(st)


def test_a_preempted_gang_gives_back_every_roles_capacity_and_quota() -> None:
    st = state([queue("q", 16)], [node("n1", 8, cpu_m=8000)])
    st.submit(job("low", replicas=1, gpus_per_pod=6, role="worker", companions=(HEAD, LAUNCHER), priority=0))
    cycle(st, 0.0, FCFS)
    assert st.free_gpus("n1") == 1
    st.submit(job("high", gpus_per_pod=8, priority=5, submit=1.0))
    result = cycle(st, 400.0, FCFS)
    (p,) = [d for d in result.decisions if isinstance(d, Preempt)]
    assert p.job_id == "low"
    st.job_stopped("low", 401.0)
    assert st.free_gpus("n1") == 8 and not st.queue_usage("q")
    d = only_admit(cycle(st, 401.0, FCFS))
    assert d.job_id == "high"
    check_invariants(st)


def test_an_elastic_main_role_shrinks_and_grows_while_its_companion_stays() -> None:
    cfg = replace(FCFS, resize_cost_s=0.0)
    st = state([queue("q", 32)], [node("n1", 8), node("n2", 1)])
    st.submit(job("el", replicas=4, min_replicas=2, gpus_per_pod=2, role="worker", companions=(HEAD,),
                  checkpointable=True))
    d = only_admit(cycle(st, 0.0, cfg))
    assert d.replicas == 4 and roles_of(d)["head"]
    assert roles_of(d)["head"] == [("n2", 1)]
    st.submit(job("urgent", gpus_per_pod=4, priority=9, submit=1.0))
    shrink = cycle(st, 400.0, cfg)
    (scale,) = [x for x in shrink.decisions if isinstance(x, Scale)]
    assert scale.replicas == 2 and [(a.node, a.pods) for a in scale.placement.nodes if a.role == "head"] == [("n2", 1)]
    assert shrink.pending["urgent"].reason is PendingReason.PREEMPTING
    assert admitted(cycle(st, 401.0, cfg)) == {"urgent"}
    check_invariants(st)
    st.job_finished("urgent", 500.0)
    grow = cycle(st, 500.0, cfg)
    (up,) = [x for x in grow.decisions if isinstance(x, Scale)]
    assert up.replicas == 4 and [a for a in up.placement.nodes if a.role == "head"]
    check_invariants(st)
    assert st.running_jobs()["el"].gpus == 4 * 2 + 1


def test_the_request_of_a_job_counts_its_companions_once() -> None:
    j = job("x", replicas=3, gpus_per_pod=2, cpu_m=100, role="worker", companions=(HEAD, LAUNCHER))
    assert job_request(j, "a100", 3) == {"gpu:a100": 7, "cpu": 300 + 1000 + 2000}
    assert job_request(j, "a100", 1, companions=False) == {"gpu:a100": 2, "cpu": 100}
    assert j.total_gpus == 7 and j.min_gpus == 7 and j.shape("head") == (1, 1000, 0) and j.shape("") == (2, 100, 0)


def test_companion_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique"):
        job("x", role="worker", companions=(HEAD, HEAD))
    with pytest.raises(ValueError, match="no GPUs"):
        job("y", gpus_per_pod=0, gpu_share=Fraction(1, 2), companions=(HEAD,))


def test_a_companion_tied_to_the_main_roles_rack_is_placed_before_one_free_to_go_anywhere() -> None:
    """The workers fill 2 of r0's 4 GPUs; a free 2-GPU companion placed first would take the rest of r0 (the
    workers' node comes first) and leave the head, which must share the workers' rack, nowhere to go."""
    st = state([queue("q", 8)], [node("a", 4, rack="r0"), node("b", 2, rack="r1")])
    head = replace(HEAD, topology=TopologyRequest("rack"))
    group = Role("group", 1, 2)
    st.submit(job("ray", replicas=2, gpus_per_pod=1, role="worker", companions=(group, head)))
    d = only_admit(cycle(st, 0.0, FCFS))
    placed = roles_of(d)
    assert placed["head"] == [("a", 1)] and placed["group"] == [("b", 1)]
    assert [a.role for a in d.placement.companions] == ["group", "head"]  # the job's own order of roles
    check_invariants(st)


def serving(job_id: str, replicas: int, **kw: object) -> object:
    return job(job_id, replicas=replicas, gpus_per_pod=2, serving=True, **kw)


def test_a_serving_job_scaled_up_grows_through_quota_as_room_allows() -> None:
    st = state([queue("q", 6)], [node("n1", 8)])
    web = serving("web", 2)
    st.submit(web)
    assert only_admit(cycle(st, 0.0, FCFS)).replicas == 2
    st.run_started("web", 1.0)
    # its owner asks for 4 pods: it keeps the 2 it runs as its floor; quota (6 GPUs) lets it grow to 3
    assert st.resize_running(replace(web, replicas=4, min_replicas=2), 10.0) is None
    assert st.running_jobs()["web"].replicas == 2
    (up,) = [d for d in cycle(st, 20.0, FCFS).decisions if isinstance(d, Scale)]
    assert up.replicas == 3 and up.placement.pods == 3
    st.apply(up, 20.0)
    assert st.queue_usage("q") == {"gpu:a100": 6}
    check_invariants(st)


def test_a_serving_job_grows_whatever_its_estimate_says() -> None:
    """An elastic batch job long past its estimate is not worth a resize; a serving job's size is its owner's."""
    cfg = replace(FCFS, resize_cost_s=300.0)
    st = state([queue("q", 16)], [node("n1", 8)])
    web = serving("web", 1, runtime_estimate=10.0)
    st.submit(web)
    cycle(st, 0.0, cfg)
    st.resize_running(replace(web, replicas=3, min_replicas=1), 5000.0)
    (up,) = [d for d in cycle(st, 5000.0, cfg).decisions if isinstance(d, Scale)]
    assert up.replicas == 3


def test_a_serving_job_scaled_down_frees_the_nodes_its_pods_left_at_once() -> None:
    st = state([queue("q", 16)], [node("n1", 4), node("n2", 4)])
    web = serving("web", 4)
    st.submit(web)
    d = only_admit(cycle(st, 0.0, FCFS))
    assert sorted((a.node, a.pods) for a in d.placement.nodes) == [("n1", 2), ("n2", 2)]
    # the owner scaled it to 1; the pod left runs on n2
    scale = st.resize_running(replace(web, replicas=1), 50.0, kept={"n2": 1})
    assert scale is not None and scale.replicas == 1
    assert [(a.node, a.pods) for a in scale.placement.nodes] == [("n2", 1)]
    assert st.running_jobs()["web"].replicas == 1 and st.free_gpus("n1") == 4 and st.free_gpus("n2") == 2
    assert st.queue_usage("q") == {"gpu:a100": 2}
    check_invariants(st)
    # not told where the pods are: the plan's first ones stay
    st.submit(serving("api", 2, submit=60.0))
    d2 = only_admit(cycle(st, 60.0, FCFS))
    first = d2.placement.nodes[0].node
    cut = st.resize_running(replace(serving("api", 2, submit=60.0), replicas=1), 70.0)
    assert cut is not None and [(a.node, a.pods) for a in cut.placement.nodes] == [(first, 1)]
    check_invariants(st)


def test_a_resize_of_a_job_that_is_not_running_this_attempt_changes_nothing() -> None:
    st = state([queue("q", 16)], [node("n1", 8)])
    web = serving("web", 2)
    assert st.resize_running(replace(web, replicas=1), 0.0) is None  # waiting: nothing held
    st.submit(web)
    cycle(st, 0.0, FCFS)
    assert st.resize_running(replace(web, replicas=1, attempt=1), 1.0) is None  # another attempt
    assert st.running_jobs()["web"].replicas == 2
    with pytest.raises(ValueError, match="minimum"):
        st.resize_running(replace(web, replicas=4, min_replicas=3), 2.0)


def test_a_tied_companion_goes_to_the_domain_holding_most_of_the_main_roles_pods() -> None:
    """The workers spread one pod per node over racks r0 (a) and r1 (b, c); the group must share a rack with
    them: r1 holds two of their pods and has room, r0 (the first worker's rack) has not."""
    st = state([queue("q", 32)], [node("a", 8, rack="r0"), node("b", 8, rack="r1"), node("c", 8, rack="r1")])
    group = Role("group", 2, 2, topology=TopologyRequest("rack"))
    st.submit(job("ray", replicas=3, gpus_per_pod=5, role="worker", companions=(group,)))
    d = only_admit(cycle(st, 0.0, FCFS))
    assert sorted(n for n, _ in roles_of(d)["group"]) == ["b", "c"]
    check_invariants(st)
