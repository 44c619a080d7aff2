"""The order inside a queue (remaining work, submit time, attained service), promotions, learnt
runtimes and the preemptions that reorder a queue."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from services.core import Admit, Preempt, PreemptReason, SchedulerConfig, SchedulerState, queue_order
from services.core.ordering import QueueOrder
from services.core.runtimes import WINDOW, RuntimeHistory, RuntimeSample, name_stem

from .builders import admitted, cycle, job, node, queue, state

REMAINING = SchedulerConfig(min_runtime_s=0.0, backfill=False)
TIRESIAS = SchedulerConfig(policy="tiresias")


def ordered_ids(st: SchedulerState, now: float, cfg: SchedulerConfig = REMAINING) -> list[str]:
    return list(st.walk_queue("q", now, queue_order(cfg)))


# ---------------------------------------------------------------------- ranking


def test_least_remaining_work_first_within_a_priority() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("long", gpus_per_pod=2, runtime_estimate=1000.0, submit=0))
    st.submit(job("short", gpus_per_pod=2, runtime_estimate=100.0, submit=1))
    st.submit(job("wide", gpus_per_pod=8, runtime_estimate=100.0, submit=2))  # 800 GPU-s: after short
    st.submit(job("urgent", gpus_per_pod=8, runtime_estimate=5000.0, priority=5, submit=3))
    assert ordered_ids(st, 10) == ["urgent", "short", "wide", "long"]
    assert ordered_ids(st, 10, SchedulerConfig(queue_order="submit")) == ["urgent", "long", "short", "wide"]


def test_a_job_waiting_longer_than_its_slowdown_limit_goes_first() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=1000.0, submit=0))
    st.submit(job("short", gpus_per_pod=1, runtime_estimate=10.0, submit=2990))
    assert ordered_ids(st, 2999) == ["short", "long"]
    assert ordered_ids(st, 3000) == ["long", "short"]  # waited 3x its estimate (slowdown_limit 3)
    assert ordered_ids(st, 3000, replace(REMAINING, slowdown_limit=0.0)) == ["short", "long"]
    assert ordered_ids(st, 3020) == ["long", "short"]  # both promoted: the earlier bound first


def test_promoted_jobs_go_by_their_bound_not_by_submit_time() -> None:
    """In an overloaded queue every waiting job is soon promoted; by promotion time (a deadline order)
    a short job whose bound came first stays ahead of a long one submitted before it."""
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=1000.0, submit=0))
    st.submit(job("short", gpus_per_pod=1, runtime_estimate=10.0, submit=1))
    assert ordered_ids(st, 5000) == ["short", "long"]  # bounds 31 and 3000, both passed
    st.submit(job("later", gpus_per_pod=1, runtime_estimate=10.0, submit=4000))
    assert ordered_ids(st, 5000) == ["short", "long", "later"]  # a newer job never passes a due bound


def test_promoted_jobs_take_every_other_place_so_new_short_work_keeps_flowing() -> None:
    """In an overloaded queue every job that waited is promoted; if they all went first, the queue would be
    first come, first served. Interleaved, the promoted jobs (by their bound) and the rest (by rank) take
    turns, a promoted job first, within each priority."""
    st = state([queue("q", 8)], [node("n", 8)])
    for i in range(3):
        st.submit(job(f"old-{i}", gpus_per_pod=1, runtime_estimate=100.0, submit=i))
    st.submit(job("new-long", gpus_per_pod=1, runtime_estimate=50.0, submit=900))
    st.submit(job("new-short", gpus_per_pod=1, runtime_estimate=10.0, submit=901))
    st.submit(job("urgent", gpus_per_pod=1, runtime_estimate=1000.0, priority=5, submit=902))
    assert ordered_ids(st, 902) == ["urgent", "old-0", "new-short", "old-1", "new-long", "old-2"]
    first = replace(REMAINING, promotion_interleaved=False)
    assert ordered_ids(st, 902, first) == ["urgent", "old-0", "old-1", "old-2", "new-short", "new-long"]


FLAT = replace(REMAINING, remaining_in_levels=False)


@pytest.mark.parametrize(("cfg", "first"), [(REMAINING, "fresh"), (FLAT, "rerun")])
def test_remaining_work_ranks_inside_the_levels_of_attained_service(cfg: SchedulerConfig, first: str) -> None:
    """A job that has received more than 16 GPU-hours goes behind every job below that, however little its
    estimate says it still needs (``remaining_in_levels``, the default; ``FLAT``: the order before it)."""
    st = state([queue("q", 8)], [node("n", 8)], order=queue_order(cfg))
    # 8 GPUs x 10,000 s estimated, 79,000 GPU-s (22 GPU-hours) received already: 1,000 GPU-s left
    st.submit(job("rerun", gpus_per_pod=8, runtime_estimate=10_000.0, attained_gpu_s=79_000.0, submit=0))
    st.submit(job("fresh", gpus_per_pod=8, runtime_estimate=1_000.0, submit=1))  # 8,000 GPU-s left
    assert ordered_ids(st, 10, cfg)[0] == first


@pytest.mark.parametrize(("cfg", "preempts"), [(REMAINING, True), (FLAT, False)])
def test_a_job_of_the_first_level_preempts_one_that_left_it(cfg: SchedulerConfig, preempts: bool) -> None:
    """Inside a level the ``reorder_ratio`` rule holds; a running job above the threshold is behind any job
    below it, so it is preempted for one even when its own remaining work is not ``reorder_ratio`` times more."""
    st = state([queue("q", 8)], [node("n", 8)], order=queue_order(cfg))
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=10_000.0, checkpointable=True))
    assert admitted(cycle(st, 0, cfg)) == {"long"}
    st.submit(job("new", gpus_per_pod=8, runtime_estimate=2_000.0, submit=10))
    assert cycle(st, 7_100, cfg).decisions == ()  # 8 x 7,100 GPU-s: still in the first level
    # at 7,300 s "long" has 58,400 GPU-s (past 16 GPU-hours) and 21,600 left, less than 4 x the new job's 16,000
    found = cycle(st, 7_300, cfg).decisions
    assert bool(found) is preempts
    if preempts:
        (d,) = found
        assert isinstance(d, Preempt) and d.job_id == "long" and d.reason == PreemptReason.QUEUE_ORDER.value


def test_a_job_past_its_estimate_is_expected_to_need_as_much_again() -> None:
    order = QueueOrder()
    j = job("j", gpus_per_pod=2, runtime_estimate=100.0)
    assert order.remaining(j, 100.0, 150.0) == 50.0
    assert order.remaining(j, 100.0, 200.0) == 0.0
    assert order.remaining(j, 100.0, 500.0) == 300.0  # overdue: the further past, the more it still needs
    assert order.remaining(j, None, 0.0) == 2 * order.default_estimate_s


def test_las_levels_and_starvation_guard() -> None:
    order = queue_order(TIRESIAS)
    fresh = job("fresh", submit=100.0)
    served = job("served", submit=0.0, attained_gpu_s=order.las_threshold_gpu_s, queued_at=500.0, last_run_s=50.0)
    assert order.rank(fresh, None) == 0.0 and order.rank(served, None) == 1.0
    assert order.promote_at(served, None) == 500.0 + 8 * 50.0
    st = state([queue("q", 8)], [node("n", 8)], [served, fresh])
    assert ordered_ids(st, 600, TIRESIAS) == ["fresh", "served"]
    assert ordered_ids(st, 900, TIRESIAS) == ["served", "fresh"]


jobs_strategy = st_.lists(
    st_.tuples(
        st_.integers(0, 3),  # priority
        st_.floats(0, 1000),  # submit time
        st_.sampled_from([None, 10.0, 100.0, 1000.0]),  # runtime estimate
        st_.integers(1, 8),  # GPUs
        st_.floats(0, 5000),  # attained GPU-seconds
    ),
    min_size=1,
    max_size=30,
)


def _order_config(kind: str) -> SchedulerConfig:
    """``promoted-first``: the remaining order with promoted jobs all ahead instead of interleaved."""
    return SchedulerConfig(queue_order="remaining" if kind == "promoted-first" else kind,
                           promotion_interleaved=kind != "promoted-first",
                           las_threshold_gpu_s=1000.0, las_promote_knob=2.0)


@settings(max_examples=60, deadline=None)
@given(jobs=jobs_strategy, now=st_.floats(0, 20000), kind=st_.sampled_from(["remaining", "submit", "las"]))
def test_the_indexed_walk_equals_sorting_on_the_spot(
    jobs: list[tuple[int, float, float | None, int, float]], now: float, kind: str
) -> None:
    """The heaps the state keeps give exactly the order a full sort at ``now`` would give."""
    cfg = _order_config(kind)
    order = queue_order(cfg)
    st = SchedulerState(queues=[queue("q", 64)], nodes=[node("n", 8)], order=order)
    for i, (prio, submit, est, gpus, attained) in enumerate(jobs):
        st.submit(
            job(f"j{i:02d}", submit=submit, priority=prio, runtime_estimate=est, gpus_per_pod=gpus,
                attained_gpu_s=attained, last_run_s=attained / gpus)
        )
    for i in range(0, len(jobs), 3):
        st.cancel(f"j{i:02d}")  # lazily deleted entries must not show
    fast = list(st.walk_queue("q", now, order))
    slow = st._sorted_queue("q", now, order)
    assert fast == slow


@settings(max_examples=60, deadline=None)
@given(jobs=jobs_strategy, times=st_.lists(st_.floats(0, 20000), min_size=1, max_size=6),
       kind=st_.sampled_from(["remaining", "las", "promoted-first"]))
def test_the_indexed_walk_equals_sorting_as_time_goes_on(
    jobs: list[tuple[int, float, float | None, int, float]], times: list[float], kind: str
) -> None:
    """Walks at later and later times, with jobs arriving and leaving between them, keep giving the order a
    full sort gives: promotions the index moved over at one walk stay right at the next."""
    cfg = _order_config(kind)
    order = queue_order(cfg)
    st = SchedulerState(queues=[queue("q", 64)], nodes=[node("n", 8)], order=order)
    pending = list(enumerate(jobs))
    for step, now in enumerate(sorted(times)):
        for i, (prio, submit, est, gpus, attained) in pending[step::len(times)]:
            st.submit(job(f"j{i:02d}", submit=submit, priority=prio, runtime_estimate=est, gpus_per_pod=gpus,
                          attained_gpu_s=attained, last_run_s=attained / gpus))
        walked = list(st.walk_queue("q", now, order))
        assert walked == st._sorted_queue("q", now, order)
        for job_id in walked[step % 2::3]:
            st.cancel(job_id)


# ---------------------------------------------------------------------- learnt runtimes


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("train-resnet-17", "train-resnet"),
        ("cifar10-0", "cifar10"),
        ("nightly-eval-20261125", "nightly-eval"),
        ("sweep_lr_0003", "sweep_lr"),
        ("job-7f3a9c2e", "job"),
        ("bert", "bert"),
        ("42", "42"),
        ("Train-LLM", "train-llm"),
    ],
)
def test_name_stem(name: str, stem: str) -> None:
    assert name_stem(name) == stem


def test_history_answers_from_the_most_specific_key() -> None:
    h = RuntimeHistory()
    base = job("x", gpus_per_pod=4, name="train-1", tenant="t", user="ann")
    assert h.estimate(base) is None
    h.observe(replace(base, user="bob"), 100.0)
    assert h.estimate(base) == 100.0  # same tenant, stem and GPUs
    h.observe(base, 300.0)
    assert h.estimate(base) == 300.0  # her own runs first
    assert h.estimate(replace(base, gpus_per_pod=8)) == 200.0  # other GPU counts: the stem's median
    assert h.estimate(replace(base, tenant="other")) is None
    assert h.estimate(replace(base, name="")) is None
    for _ in range(WINDOW):
        h.observe(base, 50.0)
    assert h.estimate(base) == 50.0  # the window keeps the recent runs only


@pytest.mark.parametrize(("samples", "attained", "expected"), [
    ((100.0,), 0.0, 100.0),  # one sample: its remaining time, as the median gives
    ((100.0,), 40.0, 60.0),
    ((100.0,), 150.0, 150.0),  # past every sample: expected to run on as long as it has run
    ((100.0, 100.0, 100.0), 0.0, 100.0),  # samples that agree: the median's answer
    ((10.0, 10_000.0), 0.0, 20.0),  # half end after 10 s: 20 s of service per completion
    ((10.0, 10_000.0), 10.0, 9_990.0),  # ran past the short half: the long half is what is left
    ((10.0, 20.0, 30.0, 10_000.0), 0.0, 30.0),  # quantum 30 s: (10+20+30+30) / 3 completions of 4
])
def test_learnt_runtimes_read_as_a_distribution(samples: tuple[float, ...], attained: float, expected: float) -> None:
    assert RuntimeSample(samples).per_completion(attained) == pytest.approx(expected)


@settings(max_examples=200, deadline=None)
@given(st_.lists(st_.floats(1.0, 1e6), min_size=1, max_size=WINDOW), st_.floats(0.0, 1e6))
def test_service_per_completion_lies_between_the_nearest_end_and_the_mean_of_those_beyond(
        values: list[float], attained: float) -> None:
    beyond = [v - attained for v in values if v > attained]
    got = RuntimeSample(tuple(sorted(values))).per_completion(attained)
    if not beyond:
        assert got == attained
    else:
        assert min(beyond) * (1 - 1e-9) <= got <= sum(beyond) / len(beyond) * (1 + 1e-9)


def test_a_wide_spread_does_not_rank_as_a_known_short_runtime() -> None:
    """Two kinds of job with the same median (100 s): one whose runs all take about 100 s, one whose runs
    take 10 s or a day. Ranked by the median they tie; read as distributions, a fresh job of the spread
    kind goes first (half its kind ends at once), and one that has run past 10 s goes behind the steady kind."""
    st = state([queue("q", 8)], [node("n", 8)])
    steady = [job(f"steady-{i}", gpus_per_pod=1, name=f"steady-{i}") for i in range(3)]
    spread = [job(f"spread-{i}", gpus_per_pod=1, name=f"spread-{i}") for i in range(3)]
    for j, runtime in zip(steady + spread, (99.0, 100.0, 101.0, 10.0, 100.0, 86_400.0), strict=True):
        st.runtimes.observe(j, runtime)
    fresh, ran = job("spread-9", gpus_per_pod=1, name="spread-9"), job("steady-9", gpus_per_pod=1, name="steady-9")
    assert st.estimate(fresh) == st.estimate(ran) == 100.0
    order, median = queue_order(REMAINING), queue_order(replace(REMAINING, runtime_distribution=False))
    assert order.rank(fresh, 100.0, st.sample(fresh)) < order.rank(ran, 100.0, st.sample(ran))
    served = replace(fresh, attained_gpu_s=20.0)
    assert order.rank(served, 100.0, st.sample(served)) > order.rank(ran, 100.0, st.sample(ran))
    assert median.rank(served, 100.0, st.sample(served)) < median.rank(ran, 100.0, st.sample(ran))
    given_estimate = replace(fresh, runtime_estimate=5.0)  # a submitter's estimate is taken as it is
    assert st.sample(given_estimate) is None


def test_a_success_teaches_the_full_size_runtime_and_reranks_waiting_jobs() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("a-1", gpus_per_pod=8, name="a-1", submit=0))
    cycle(st, 0, REMAINING)
    st.submit(job("b-1", gpus_per_pod=8, name="b-1", runtime_estimate=600.0, submit=1))
    st.submit(job("a-2", gpus_per_pod=8, name="a-2", submit=2))
    assert ordered_ids(st, 10) == ["b-1", "a-2"]  # a-2 unknown: the default 3600 s
    st.job_finished("a-1", 120, succeeded=True)
    assert st.estimate(st.pending["a-2"]) == 120.0
    assert ordered_ids(st, 120) == ["a-2", "b-1"]
    st.job_finished("b-1", 130)  # a failure or a cancel teaches nothing
    assert st.runtimes.estimate(job("b-2", name="b-2", gpus_per_pod=8)) is None


def test_lessons_between_two_walks_rerank_the_stems_waiting_jobs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stem's waiting jobs are ranked again before the next walk, not at every success of the stem:
    a backlog of n jobs and m successes between cycles costs n rankings, not n x m."""
    st = state([queue("q", 64)], [node("n", 8)])
    for i in range(8):
        st.submit(job(f"a-{i}", gpus_per_pod=1, name=f"a-{i}", submit=i))
    cycle(st, 0, REMAINING)  # eight run
    for i in range(8, 58):
        st.submit(job(f"a-{i}", gpus_per_pod=1, name=f"a-{i}", submit=i))
    st.submit(job("b-1", gpus_per_pod=1, name="b-1", runtime_estimate=600.0, submit=100))
    rankings = 0
    ranking = SchedulerState._ranking

    def counted(self: SchedulerState, j: object) -> tuple[float, float]:
        nonlocal rankings
        rankings += 1
        return ranking(self, j)  # type: ignore[arg-type]

    monkeypatch.setattr(SchedulerState, "_ranking", counted)
    for i in range(8):  # each success moves the stem's median
        st.job_finished(f"a-{i}", 200 + 10 * i, succeeded=True)
        assert st.runtimes.estimate(st.pending["a-8"]) is not None
    assert rankings == 0  # nothing ranked yet
    walked = ordered_ids(st, 300)
    assert rankings == 50  # each waiting job of the stem once
    assert walked == st._sorted_queue("q", 300, queue_order(REMAINING))
    assert ordered_ids(st, 301) == walked and rankings == 50  # nothing new learnt: nothing ranked again


def test_attained_service_adds_up_over_attempts_and_sizes() -> None:
    st = state([queue("q", 16)], [node("n", 16)])
    st.submit(job("e", gpus_per_pod=2, replicas=4, min_replicas=1, checkpointable=True))
    (d,) = cycle(st, 0, REMAINING).decisions
    assert isinstance(d, Admit) and d.replicas == 4
    st.job_stopped("e", 100)  # 8 GPUs x 100 s
    requeued = st.pending["e"]
    assert requeued.attained_gpu_s == 800.0 and requeued.queued_at == 100 and requeued.last_run_s == 100
    cycle(st, 100, REMAINING)
    assert st.running["e"].attained(150) == 800.0 + 8 * 50


# ---------------------------------------------------------------------- preemption for the queue's order


def long_runner(st: SchedulerState, **kw: object) -> None:
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=10_000.0, checkpointable=True, **kw))  # type: ignore[arg-type]
    assert admitted(cycle(st, 0, REMAINING)) == {"long"}


def test_a_short_job_that_would_wait_long_preempts_a_long_checkpointable_one() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    long_runner(st)
    st.submit(job("short", gpus_per_pod=8, runtime_estimate=100.0, submit=10))
    result = cycle(st, 600, REMAINING)
    assert result.decisions == (Preempt("long", 0, PreemptReason.QUEUE_ORDER.value, 30.0, preemptor="short"),)


@pytest.mark.parametrize(
    ("why", "setup", "cfg"),
    [
        ("the victim cannot checkpoint", {"checkpointable": False}, REMAINING),
        ("the victim was requeued often enough", {"attempt": 3}, replace(REMAINING, max_reorder_restarts=3)),
        ("preemption for order is off", {}, replace(REMAINING, reorder_preemption=False)),
        ("first come first served", {}, replace(REMAINING, queue_order="submit")),
    ],
)
def test_no_preemption_for_order(why: str, setup: dict[str, object], cfg: SchedulerConfig) -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=10_000.0, **{"checkpointable": True, **setup}))  # type: ignore[arg-type]
    cycle(st, 0, REMAINING)
    st.submit(job("short", gpus_per_pod=8, runtime_estimate=100.0, submit=10))
    assert cycle(st, 600, cfg).decisions == (), why


def test_no_preemption_when_the_wait_is_short_anyway() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("almost", gpus_per_pod=8, runtime_estimate=700.0, checkpointable=True))
    cycle(st, 0, REMAINING)
    st.submit(job("short", gpus_per_pod=8, runtime_estimate=100.0, submit=10))
    # "almost" should end at 700: the short job waits 100 s, no more than its own runtime
    assert cycle(st, 600, REMAINING).decisions == ()


def test_no_preemption_when_the_remaining_work_is_close() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    long_runner(st)
    st.submit(job("medium", gpus_per_pod=8, runtime_estimate=3000.0, submit=10))  # 10,000 < 4 x 3,000
    assert cycle(st, 600, REMAINING).decisions == ()


def test_tiresias_preempts_the_job_that_left_the_first_level() -> None:
    st = state([queue("q", 8)], [node("n", 8)], order=queue_order(TIRESIAS))
    st.submit(job("big", gpus_per_pod=8, checkpointable=True))
    assert admitted(cycle(st, 0, TIRESIAS)) == {"big"}
    st.submit(job("new", gpus_per_pod=8, submit=10))
    assert cycle(st, 7199, TIRESIAS).decisions == ()  # 8 x 7199 GPU-s: still under 16 GPU-hours
    (d,) = cycle(st, 7200, TIRESIAS).decisions
    assert isinstance(d, Preempt) and d.job_id == "big" and d.reason == PreemptReason.QUEUE_ORDER.value


OVERTAKEN = replace(REMAINING, overtaken_preemption=True)


def overtaken_gang(cfg: SchedulerConfig, late_s: float = 5000.0) -> tuple[SchedulerState, list[str]]:
    """An 8-GPU gang (8,000 GPU-s, bound 3,000 s) behind 1-GPU jobs of 5,000 GPU-s on one 8-GPU node. After its
    bound each GPU that frees goes to a later 1-GPU job (the promoted gang does not fit on one GPU), of ``late_s``
    seconds each. Returns the state when seven have done so and the last early job leaves, with a new 1-GPU job
    waiting, and the seven."""
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("gang", gpus_per_pod=8, runtime_estimate=1000.0, checkpointable=True))
    for i in range(8):
        st.submit(job(f"early-{i}", gpus_per_pod=1, runtime_estimate=5000.0, checkpointable=True))
    assert admitted(cycle(st, 0, cfg)) == {f"early-{i}" for i in range(8)}
    for i in range(8):
        now = 3100.0 + 100 * i
        st.job_finished(f"early-{i}", now)
        st.submit(job(f"late-{i}", gpus_per_pod=1, runtime_estimate=late_s, checkpointable=True, submit=now))
        if i < 7:
            assert admitted(cycle(st, now, cfg)) == {f"late-{i}"}
    return st, [f"late-{i}" for i in range(7)]


def test_a_promoted_gang_preempts_the_jobs_that_overtook_it() -> None:
    """Each GPU that freed after the gang's bound went to a 1-GPU job walked after it (the gang needs the whole
    node). None of them is far behind it by remaining work, but all started after it was promoted: with the
    last GPU free, the gang takes the node back from them instead of letting one more job overtake it."""
    st, overtook = overtaken_gang(OVERTAKEN)
    decisions = cycle(st, 3800, OVERTAKEN).decisions
    assert {d.job_id for d in decisions if isinstance(d, Preempt)} == set(overtook)
    assert {(d.reason, d.preemptor) for d in decisions if isinstance(d, Preempt)} == {
        (PreemptReason.QUEUE_ORDER.value, "gang")}
    assert not admitted(cycle(st, 3801, OVERTAKEN)) & {"late-7"}  # the free GPU is held for the gang


@pytest.mark.parametrize(
    ("why", "cfg"),
    [
        ("the rule is off", replace(REMAINING, overtaken_preemption=False)),
        ("the gang is not promoted: no bound", replace(OVERTAKEN, slowdown_limit=0.0, starvation_age_s=1e9)),
    ],
)
def test_no_preemption_of_jobs_that_overtook_no_promoted_job(why: str, cfg: SchedulerConfig) -> None:
    st, _ = overtaken_gang(cfg)
    result = cycle(st, 3800, cfg)
    assert admitted(result) == {"late-7"}, why
    assert not [d for d in result.decisions if isinstance(d, Preempt)], why


def test_a_promoted_gang_that_would_start_soon_anyway_takes_nothing_back() -> None:
    """The jobs that overtook the gang are estimated to end within 800 s, sooner than the gang's own 1,000 s
    runtime: waiting for them is cheaper than their checkpoints and restarts (``reorder_wait_ratio``)."""
    st, _ = overtaken_gang(OVERTAKEN, late_s=800.0)
    result = cycle(st, 3800, OVERTAKEN)
    assert not [d for d in result.decisions if isinstance(d, Preempt)]


def test_a_promoted_gang_takes_nothing_back_from_jobs_that_would_preempt_it_right_back() -> None:
    """With the wait ratio off, the gang (8,000 GPU-s to go) would take back the node from 1-GPU jobs of 1,500
    GPU-s: but it is then more than ``reorder_ratio`` times behind each of them, and the first one requeued would
    preempt it again for the queue's order. No take-back; the jobs that overtook the gang keep running."""
    cfg = replace(OVERTAKEN, reorder_wait_ratio=0.0)
    st, overtook = overtaken_gang(cfg, late_s=1500.0)
    result = cycle(st, 3800, cfg)
    assert not {d.job_id for d in result.decisions if isinstance(d, Preempt)} & set(overtook)


def test_jobs_that_started_before_the_promotion_did_not_overtake_it() -> None:
    """At the gang's bound the node is held by jobs that started before it: they ran ahead of it by the queue's
    order, not by overtaking a promoted job, and are not preempted for it."""
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("gang", gpus_per_pod=8, runtime_estimate=1000.0, checkpointable=True))
    for i in range(8):
        st.submit(job(f"early-{i}", gpus_per_pod=1, runtime_estimate=5000.0, checkpointable=True))
    cycle(st, 0, OVERTAKEN)
    assert cycle(st, 3600, OVERTAKEN).decisions == ()


def test_service_counts_while_the_pods_run_not_while_they_start_or_stop() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("j", gpus_per_pod=8, checkpointable=True))
    cycle(st, 0, REMAINING)
    st.run_started("j", 20)  # images pulled, pods up
    st.apply(Preempt("j", 0, PreemptReason.QUEUE_ORDER.value, 30.0), 50)
    st.job_stopped("j", 90)  # checkpoint and teardown took 40 s
    assert st.pending["j"].attained_gpu_s == 8 * (50 - 20)


def test_a_job_confined_to_a_pool_is_not_promised_another_pools_gpus() -> None:
    """The wait model pools every node of a GPU type; for a job whose selector confines it to one pool
    its wait is unknown, so the far-behind job of its own pool is preempted for it."""
    from types import MappingProxyType

    pool_a, pool_b = MappingProxyType({"pool": "a"}), MappingProxyType({"pool": "b"})
    st = state([queue("q", 16)], [node("n1", labels=pool_a), node("n2", labels=pool_b)])
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=10_000.0, checkpointable=True, node_selector=pool_a))
    st.submit(job("almost", gpus_per_pod=8, runtime_estimate=700.0, node_selector=pool_b, submit=1))
    assert admitted(cycle(st, 0, REMAINING)) == {"long", "almost"}
    st.submit(job("short", gpus_per_pod=8, runtime_estimate=100.0, node_selector=pool_a, submit=10))
    (d,) = cycle(st, 600, REMAINING).decisions  # n2 frees at 700, but "short" can never use it
    assert isinstance(d, Preempt) and d.job_id == "long" and d.preemptor == "short"
