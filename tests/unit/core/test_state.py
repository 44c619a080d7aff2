"""SchedulerState lifecycle methods: idempotent, and schedule() never mutates the state."""

from __future__ import annotations

from dataclasses import replace

from services.core import Admit, PendingReason, Preempt, Reject, Scale, SchedulerConfig, schedule

from .builders import admitted, check_invariants, cycle, job, node, queue, state


def test_submit_is_idempotent() -> None:
    st = state([queue("q", 8)], [node("n")])
    st.submit(job("a"))
    st.submit(job("a"))
    assert st.pending_count == 1
    cycle(st, 0)
    st.submit(job("a"))  # running: a repeated submit is a no-op
    assert st.pending_count == 0 and "a" in st.running_jobs()


def test_apply_is_idempotent_and_checks_attempt() -> None:
    st = state([queue("q", 8)], [node("n")], [job("a", gpus_per_pod=2)])
    result = schedule(st, 0, SchedulerConfig())
    (d,) = result.decisions
    st.apply(d, 0)
    st.apply(d, 1)
    assert st.free_gpus("n") == 6 and st.queue_usage("q") == {"gpu:a100": 2}
    assert isinstance(d, Admit)
    st.apply(replace(d, job_id="ghost"), 1)
    stale = Preempt("a", 7, "higher_priority", 30.0)
    st.apply(stale, 2)
    assert not st.running_jobs()["a"].terminating
    check_invariants(st)


def test_schedule_does_not_mutate_and_is_deterministic() -> None:
    st = state([queue("q", 8)], [node("n1"), node("n2")], [job(f"j{i}", gpus_per_pod=3, submit=i) for i in range(6)])
    first = schedule(st, 5, SchedulerConfig())
    second = schedule(st, 5, SchedulerConfig())
    assert first == second
    assert st.pending_count == 6 and st.running_jobs() == {}
    assert st.free_gpus("n1") == 8 and st.queue_usage("q") == {}


def test_cancel_pending_and_running() -> None:
    st = state([queue("q", 8)], [node("n")], [job("run", gpus_per_pod=4), job("wait", gpus_per_pod=8, submit=1)])
    cycle(st, 0)
    st.cancel("wait")
    st.cancel("wait")
    st.cancel("run")
    st.cancel("run")
    assert st.pending_count == 0 and st.running_jobs() == {} and st.free_gpus("n") == 8
    assert st.queue_usage("q") == {}


def test_job_stopped_requeues_with_next_attempt_and_original_submit_time() -> None:
    st = state([queue("q", 8)], [node("n")], [job("a", submit=3.0)])
    cycle(st, 5)
    st.apply(Preempt("a", 0, "higher_priority", 30.0), 6)
    st.job_stopped("a", 10)
    st.job_stopped("a", 11)  # repeated: no-op
    again = st.job("a")
    assert again is not None and again.attempt == 1 and again.submit_time == 3.0
    assert st.pending_count == 1 and st.free_gpus("n") == 8
    (d,) = cycle(st, 12).decisions
    assert isinstance(d, Admit) and d.attempt == 1


def test_job_finished_is_idempotent() -> None:
    st = state([queue("q", 8)], [node("n")], [job("a", gpus_per_pod=4)])
    cycle(st, 0)
    st.job_finished("a", 10)
    st.job_finished("a", 11)
    assert st.job("a") is None and st.free_gpus("n") == 8


def test_suspend_resume_and_priority() -> None:
    st = state([queue("q", 1)], [node("n")], [job("a"), job("b", submit=1)])
    st.suspend("b")
    st.suspend("b")
    result = cycle(st, 0)
    assert admitted(result) == {"a"}
    assert result.pending["b"].reason is PendingReason.SUSPENDED
    st.resume("b")
    st.resume("b")
    st.set_priority("b", 7)
    st.set_priority("b", 7)
    b = st.job("b")
    assert b is not None and b.priority == 7 and st.pending_count == 1
    st.job_finished("a", 5)
    assert admitted(cycle(st, 5)) == {"b"}


def test_reject_and_scale_apply() -> None:
    st = state([queue("q", 8)], [node("n")], [job("e", gpus_per_pod=2, replicas=4, min_replicas=1)])
    (d,) = cycle(st, 0).decisions
    assert isinstance(d, Admit) and d.replicas == 4
    small = replace(d.placement, nodes=(replace(d.placement.nodes[0], pods=1),))
    shrink = Scale("e", 0, 1, small)
    st.apply(shrink, 1)
    st.apply(shrink, 2)
    assert st.running_jobs()["e"].replicas == 1 and st.free_gpus("n") == 6
    st.submit(job("x", "q", submit=3))
    st.apply(Reject("x", "max_wait_exceeded", "too long"), 4)
    st.apply(Reject("x", "max_wait_exceeded", "too long"), 4)
    assert st.job("x") is None


def test_node_changes() -> None:
    n = node("n", 8)
    st = state([queue("q", 8)], [n], [job("a", gpus_per_pod=4)])
    cycle(st, 0)
    st.upsert_node(replace(n, gpus=6))
    assert st.free_gpus("n") == 2
    st.upsert_node(replace(n, gpus=6))
    assert st.free_gpus("n") == 2 and set(st.nodes()) == {"n"}
    st.remove_node("n")
    st.remove_node("n")
    assert st.nodes() == {} and st.free_gpus("n") == 0
    st.job_finished("a", 5)
    assert st.queue_usage("q") == {}


def test_unknown_queue_job_is_kept_until_queue_appears() -> None:
    st = state([], [node("n")], [job("x", "later")])
    assert st.pending_count == 1
    st.set_queue(queue("later", 8))
    assert admitted(cycle(st, 0)) == {"x"}
