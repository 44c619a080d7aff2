"""GPU sharing in the core: fractional GPUs on shared GPUs, MIG slices per profile, and their quota charges."""

from __future__ import annotations

from fractions import Fraction
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core import Admit, Job, PendingReason, SchedulerConfig, SchedulerState, schedule
from services.core.model import mig_resource, mig_share, valid_fraction
from services.core.quota import job_request

from .builders import FCFS, admitted, check_invariants, cycle, job, node, queue, state

HALF = Fraction(1, 2)
QUARTER = Fraction(1, 4)
MIG_1G = "1g.10gb"
SEVEN_1G = MappingProxyType({MIG_1G: 7})


def placement_of(st_: SchedulerState, job_id: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(a.node, a.slots) for a in st_.running_jobs()[job_id].placement.nodes]


def frac(job_id: str, share: Fraction, submit: float = 0.0, **kw: object) -> Job:
    return job(job_id, submit=submit, gpus_per_pod=0, gpu_share=share, **kw)  # type: ignore[arg-type]


def mig(job_id: str, slices: int = 1, profile: str = MIG_1G, submit: float = 0.0, **kw: object) -> Job:
    return job(job_id, submit=submit, gpus_per_pod=0, mig_profile=profile, mig_per_pod=slices, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("profile", "share"),
    [("1g.10gb", Fraction(1, 7)), ("2g.20gb", Fraction(2, 7)), ("3g.40gb", Fraction(3, 7)),
     ("7g.80gb", Fraction(1)), ("1g.10gb+me", Fraction(1, 7)), ("1g.5gb", Fraction(1, 7))],
)
def test_mig_share_is_compute_slices_out_of_seven(profile: str, share: Fraction) -> None:
    assert mig_share(profile) == share
    assert mig_resource(profile) == f"nvidia.com/mig-{profile}"


def test_mig_share_rejects_what_is_not_a_profile() -> None:
    with pytest.raises(ValueError):
        mig_share("gpu")


@pytest.mark.parametrize(
    ("share", "ok"),
    [(Fraction(1, 8), True), (QUARTER, True), (HALF, True), (Fraction(7, 8), True),
     (Fraction(0), False), (Fraction(1), False), (Fraction(3, 10), False), (Fraction(1, 16), False)],
)
def test_allowed_fractions_are_eighths_below_one(share: Fraction, ok: bool) -> None:
    assert valid_fraction(share) is ok


def test_job_validates_its_share() -> None:
    with pytest.raises(ValueError):
        frac("x", Fraction(3, 10))
    with pytest.raises(ValueError):
        job("x", gpus_per_pod=1, gpu_share=HALF)
    with pytest.raises(ValueError):
        job("x", gpus_per_pod=0, mig_profile=MIG_1G, mig_per_pod=0)
    assert mig("m", 2).gpu_share == Fraction(2, 7)  # charged by the standard rule by default
    assert mig("m", 2, gpu_share=Fraction(1, 2)).gpu_share == HALF  # or as its GPU type says


def test_whole_gpu_jobs_are_charged_as_before() -> None:
    assert job_request(job("w", gpus_per_pod=2, cpu_m=100), "a100", 3) == {"gpu:a100": 6, "cpu": 300}
    assert job_request(frac("f", QUARTER, replicas=2), "a100", 2) == {"gpu:a100": HALF}
    assert job_request(mig("m", 3), "a100", 1) == {"gpu:a100": Fraction(3, 7)}


# ---------------------------------------------------------------- fractions


def test_two_half_gpu_jobs_share_one_gpu_and_keep_whole_jobs_off_it() -> None:
    st_ = state([queue("q", 8)], [node("n", 1, shared_gpus=1)], [frac("a", HALF), frac("b", HALF, 1)])
    assert admitted(cycle(st_, 0, FCFS)) == {"a", "b"}
    assert placement_of(st_, "a") == [("n", (0,))] and placement_of(st_, "b") == [("n", (0,))]
    assert st_.free_gpus("n") == 0
    st_.submit(job("whole", submit=2))
    st_.submit(frac("third", HALF, 3, runtime_estimate=100.0))
    assert admitted(cycle(st_, 5, FCFS)) == set()  # the GPU is full of fractions
    check_invariants(st_)
    st_.job_finished("a", 10)
    result = cycle(st_, 10, FCFS)  # the freed half goes to the short fraction, ending before b would
    assert admitted(result) == {"third"} and result.pending["whole"].reason is PendingReason.RESERVATION
    st_.job_finished("b", 20)
    st_.job_finished("third", 20)
    assert st_.free_gpus("n") == 1
    assert admitted(cycle(st_, 20, FCFS)) == {"whole"}
    check_invariants(st_)


def test_fractions_pack_best_fit_on_partly_used_gpus() -> None:
    st_ = state([queue("q", 8)], [node("n", 4, shared_gpus=2)], [frac("a", Fraction(3, 4))])
    cycle(st_, 0, FCFS)
    st_.submit(frac("b", HALF, 1))  # does not fit beside a: opens the second shared GPU
    cycle(st_, 1, FCFS)
    st_.submit(frac("c", QUARTER, 2))  # fits both: goes where the least room is left (beside a)
    cycle(st_, 2, FCFS)
    assert placement_of(st_, "a") == [("n", (0,))]
    assert placement_of(st_, "b") == [("n", (1,))]
    assert placement_of(st_, "c") == [("n", (0,))]
    assert st_.free_gpus("n") == 2  # two shared GPUs hold fractions, two are whole and free
    check_invariants(st_)


def test_fractions_prefer_a_node_with_a_partly_used_gpu() -> None:
    nodes = [node("empty", 1, shared_gpus=1), node("partly", 1, shared_gpus=1)]
    st_ = state([queue("q", 8)], nodes, [frac("a", HALF, node_selector=MappingProxyType({"k": "v"}))])
    st_.upsert_node(node("partly", 1, shared_gpus=1, labels=MappingProxyType({"k": "v"})))
    cycle(st_, 0, FCFS)
    assert placement_of(st_, "a") == [("partly", (0,))]
    st_.submit(frac("b", HALF, 1))
    cycle(st_, 1, FCFS)
    assert placement_of(st_, "b") == [("partly", (0,))]
    assert st_.free_gpus("empty") == 1


def test_a_gang_of_fractions_spreads_over_shared_gpus() -> None:
    st_ = state([queue("q", 8)], [node("n", 2, shared_gpus=2)], [frac("g", Fraction(3, 4), replicas=2)])
    cycle(st_, 0, FCFS)
    assert placement_of(st_, "g") == [("n", (0, 1))]
    assert st_.free_gpus("n") == 0
    check_invariants(st_)


def test_a_fraction_waits_when_whole_jobs_hold_every_gpu() -> None:
    st_ = state([queue("q", 8)], [node("n", 2, shared_gpus=1)], [job("w", gpus_per_pod=2)])
    cycle(st_, 0, FCFS)
    st_.submit(frac("f", QUARTER, 1))
    result = cycle(st_, 1, FCFS)
    assert admitted(result) == set()
    assert result.pending["f"].reason in {PendingReason.CAPACITY, PendingReason.RESERVATION}


def test_a_fraction_never_fits_a_node_without_shared_gpus() -> None:
    st_ = state([queue("q", 8)], [node("n", 8)], [frac("f", QUARTER)])
    result = cycle(st_, 0, FCFS)
    assert admitted(result) == set()
    assert result.pending["f"].reason is PendingReason.NO_MATCHING_NODES


def test_node_update_keeps_the_shares_of_running_jobs() -> None:
    st_ = state([queue("q", 8)], [node("n", 2, shared_gpus=1)], [frac("a", QUARTER), frac("b", QUARTER, 1)])
    cycle(st_, 0, FCFS)
    st_.upsert_node(node("n", 2, shared_gpus=1, labels=MappingProxyType({"new": "label"})))
    assert st_.free_gpus("n") == 1
    check_invariants(st_)
    st_.job_finished("a", 5)
    st_.job_finished("b", 5)
    assert st_.free_gpus("n") == 2


# ---------------------------------------------------------------- MIG


def test_mig_slices_are_counted_per_profile() -> None:
    layout = MappingProxyType({MIG_1G: 7, "3g.40gb": 2})
    jobs = [mig("a", 3), mig("b", 3, submit=1), mig("c", 3, submit=2), mig("big", 1, "3g.40gb", submit=3)]
    st_ = state([queue("q", 8)], [node("n", 0, mig=layout)], jobs)
    assert admitted(cycle(st_, 0, FCFS)) == {"a", "b", "big"}  # c would need 9 of the 7 1g slices
    check_invariants(st_)
    st_.job_finished("a", 5)
    assert admitted(cycle(st_, 5, FCFS)) == {"c"}
    check_invariants(st_)


def test_mig_slices_leave_whole_gpus_alone() -> None:
    st_ = state([queue("q", 16)], [node("n", 1, mig=SEVEN_1G)], [mig("m", 7), job("w", submit=1)])
    assert admitted(cycle(st_, 0, FCFS)) == {"m", "w"}  # MIG-enabled GPUs are not whole GPUs
    assert st_.free_gpus("n") == 0


def test_mig_job_without_its_profile_anywhere_never_fits() -> None:
    st_ = state([queue("q", 8)], [node("n", 8, mig=SEVEN_1G)], [mig("m", 1, "2g.20gb")])
    result = cycle(st_, 0, FCFS)
    assert result.pending["m"].reason is PendingReason.NO_MATCHING_NODES


def test_mig_picks_the_node_with_fewest_free_slices_of_its_profile() -> None:
    nodes = [node("roomy", 0, mig=SEVEN_1G), node("tight", 0, mig=MappingProxyType({MIG_1G: 2}))]
    st_ = state([queue("q", 8)], nodes, [mig("m", 2)])
    cycle(st_, 0, FCFS)
    assert placement_of(st_, "m") == [("tight", ())]


# ---------------------------------------------------------------- quotas and usage


def test_seven_one_g_slices_fill_a_one_gpu_quota() -> None:
    jobs = [mig(f"m{i}", 1, submit=i) for i in range(8)]
    st_ = state([queue("q", 1)], [node("n", 0, mig=MappingProxyType({MIG_1G: 14}))], jobs)
    result = cycle(st_, 0, FCFS)
    assert admitted(result) == {f"m{i}" for i in range(7)}
    assert result.pending["m7"].reason is PendingReason.QUEUE_QUOTA
    assert st_.queue_usage("q") == {"gpu:a100": 1}
    assert st_.queue_gpus("q") == 1.0


def test_a_mig_job_and_two_half_gpu_jobs_in_one_gpu_quota_and_one_gpus_worth() -> None:
    """The tour's shape in the core: a GPU cut into seven 1g slices and a shared GPU; a MIG job of all seven
    slices and two half-GPU jobs all run, each queue charged exactly its one GPU's worth."""
    queues = [queue("mig", 1), queue("frac", 1)]
    n = node("n", 1, shared_gpus=1, mig=SEVEN_1G)
    jobs = [job("m", "mig", gpus_per_pod=0, mig_profile=MIG_1G, mig_per_pod=7),
            job("h1", "frac", 1, gpus_per_pod=0, gpu_share=HALF), job("h2", "frac", 2, gpus_per_pod=0, gpu_share=HALF)]
    st_ = state(queues, [n], jobs)
    assert admitted(cycle(st_, 0, FCFS)) == {"m", "h1", "h2"}
    assert st_.queue_usage("mig") == {"gpu:a100": 1} and st_.queue_usage("frac") == {"gpu:a100": 1}
    st_.submit(job("h3", "frac", 3, gpus_per_pod=0, gpu_share=Fraction(1, 8)))
    assert cycle(st_, 3, FCFS).pending["h3"].reason is PendingReason.QUEUE_QUOTA
    check_invariants(st_)


def test_attained_service_counts_the_share() -> None:
    st_ = state([queue("q", 8)], [node("n", 1, shared_gpus=1)], [frac("a", QUARTER, replicas=2)])
    cycle(st_, 0, FCFS)
    assert st_.running_jobs()["a"].attained(100.0) == pytest.approx(50.0)  # 2 pods x 1/4 GPU x 100 s
    assert st_.decayed_usage("q", 100.0) == pytest.approx(50.0, rel=1e-3)


def test_a_sharing_job_preempts_nothing_but_may_be_preempted() -> None:
    cfg = SchedulerConfig(queue_order="submit", min_runtime_s=0)
    st_ = state([queue("q", 8)], [node("n", 1, shared_gpus=1)], [frac("low", HALF, priority=0)])
    cycle(st_, 0, cfg)
    st_.submit(frac("hi", Fraction(3, 4), 1, priority=10))
    result = cycle(st_, 1, cfg)
    assert result.decisions == ()
    assert result.pending["hi"].reason in {PendingReason.CAPACITY, PendingReason.RESERVATION}
    st_.submit(job("whole", submit=2, priority=10))
    result = cycle(st_, 2, cfg)
    assert [(d.kind.value, d.job_id) for d in result.decisions] == [("preempt", "low")]


# ---------------------------------------------------------------- property


@st.composite
def sharing_worlds(draw: st.DrawFn) -> tuple[list, list[tuple[Job, float]]]:  # type: ignore[type-arg]
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.integers(0, 4))
        layout = draw(st.sampled_from(({}, {MIG_1G: 7}, {MIG_1G: 3, "2g.20gb": 2})))
        nodes.append(node(f"n{i}", gpus, shared_gpus=draw(st.integers(0, gpus)), mig=MappingProxyType(layout)))
    jobs = []
    for i in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(("whole", "frac", "mig")))
        replicas = draw(st.integers(1, 3))
        queue_name = draw(st.sampled_from(("a", "b")))
        if kind == "whole":
            j = job(f"j{i}", queue_name, i, gpus_per_pod=draw(st.integers(1, 2)), replicas=replicas)
        elif kind == "frac":
            share = Fraction(draw(st.integers(1, 7)), 8)
            j = job(f"j{i}", queue_name, i, gpus_per_pod=0, gpu_share=share, replicas=replicas)
        else:
            profile = draw(st.sampled_from((MIG_1G, "2g.20gb")))
            j = job(f"j{i}", queue_name, i, gpus_per_pod=0, mig_profile=profile,
                    mig_per_pod=draw(st.integers(1, 3)), replicas=replicas)
        jobs.append((j, float(draw(st.integers(1, 30)))))
    return nodes, jobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sharing_worlds(), st.integers(1, 4), st.booleans())
def test_shares_never_exceed_gpus_slices_or_quota_and_charges_add_up(
    world: tuple[list, list[tuple[Job, float]]], quota: int, cohort: bool  # type: ignore[type-arg]
) -> None:
    nodes, jobs = world
    queues = [queue(name, quota, cohort="c" if cohort else None) for name in ("a", "b")]
    st_ = SchedulerState(queues=queues, nodes=nodes)
    durations = {j.job_id: d for j, d in jobs}
    for j, _ in jobs:
        st_.submit(j)
    ends: dict[str, float] = {}
    now = 0.0
    for _ in range(60):
        result = schedule(st_, now, SchedulerConfig(min_runtime_s=0))
        for d in result.decisions:
            st_.apply(d, now)
            if isinstance(d, Admit):
                ends[d.job_id] = now + durations[d.job_id]
        check_invariants(st_)
        for qname in ("a", "b"):  # the quota book holds exactly what its running jobs are charged
            charged: dict[str, Fraction] = {}
            for job_id, rj in st_.running_jobs().items():
                if rj.job.queue == qname:
                    for res, amount in job_request(rj.job, st_.run_type[job_id], rj.replicas).items():
                        charged[res] = charged.get(res, Fraction(0)) + amount
            assert {r: v for r, v in charged.items() if v} == dict(st_.queue_usage(qname))
        for job_id in [j for j in st_.running_jobs() if ends.get(j, 0) <= now]:
            st_.job_finished(job_id, now, succeeded=True)
        if not st_.pending and not st_.running_jobs():
            break
        now += 5.0
    for job_id in list(st_.running_jobs()):
        st_.job_finished(job_id, now)
    for n in nodes:  # everything given back
        assert st_.free_gpus(n.name) == n.gpus
    assert all(not v for q in ("a", "b") for v in st_.queue_usage(q).values())
