"""Run observations from a Job and its pods."""

from __future__ import annotations

from schemas.runs import RunAllPodsReady, RunDeleted, RunEvicted, RunFailed, RunStarted, RunSucceeded
from services.node_watcher.runs import job_ref, observe, observe_deleted
from tests.node_watcher.builders import CLUSTER, NOW, complete, job, pod


def kinds(observations: list) -> list[str]:  # type: ignore[type-arg]
    return [o.message.TYPE for o in observations]


def test_pending_gang_says_nothing() -> None:
    owner = job(gang=2)
    assert observe(owner, [pod(owner, 0), pod(owner, 1)], CLUSTER, NOW) == []


def test_first_running_pod_starts_the_run() -> None:
    owner = job(gang=2)
    result = observe(owner, [pod(owner, 0, "Running"), pod(owner, 1)], CLUSTER, NOW)
    assert kinds(result) == ["RunStarted"]
    started = result[0].message
    assert isinstance(started, RunStarted)
    assert (started.job_id, started.attempt, started.cluster) == ("train-1", 0, CLUSTER)
    assert (started.pods_running, started.pods_total) == (1, 2)


def test_all_pods_ready_needs_every_index_ready() -> None:
    owner = job(gang=2)
    not_yet = observe(owner, [pod(owner, 0, "Running"), pod(owner, 1, "Running", ready=False)], CLUSTER, NOW)
    assert kinds(not_yet) == ["RunStarted"]
    ready = observe(owner, [pod(owner, 0, "Running"), pod(owner, 1, "Running")], CLUSTER, NOW)
    assert kinds(ready) == ["RunStarted", "RunAllPodsReady"]
    assert isinstance(ready[1].message, RunAllPodsReady) and ready[1].message.pods_total == 2


def test_all_pods_ready_names_the_pods_and_their_nodes() -> None:
    owner = job(gang=2)
    pods = [pod(owner, 1, "Running", node="east-a100-1"), pod(owner, 0, "Running")]
    [_, ready] = observe(owner, pods, CLUSTER, NOW)
    assert isinstance(ready.message, RunAllPodsReady)
    assert ready.message.object_name == "train-1-a0"
    assert [(p.index, p.name, p.node) for p in ready.message.pods] == [
        (0, "train-1-a0-0-abcd0", "east-a100-0"), (1, "train-1-a0-1-abcd1", "east-a100-1")]


def test_complete_job_succeeds() -> None:
    owner = job(gang=2, conditions=complete())
    result = observe(owner, [pod(owner, 0, "Succeeded"), pod(owner, 1, "Succeeded")], CLUSTER, NOW)
    assert kinds(result) == ["RunStarted", "RunAllPodsReady", "RunSucceeded"]
    assert isinstance(result[-1].message, RunSucceeded)


def test_failed_pod_fails_the_run_with_its_exit_code() -> None:
    owner = job(gang=2)
    result = observe(owner, [pod(owner, 0, "Running"), pod(owner, 1, "Failed", exit_code=3)], CLUSTER, NOW)
    failed = [o.message for o in result if isinstance(o.message, RunFailed)]
    assert len(failed) == 1
    assert (failed[0].reason, failed[0].exit_code, failed[0].pod) == ("Error", 3, "train-1-a0-1-abcd1")
    assert result[-1].key == ("train-1", "0", "failure", "train-1-a0")


def test_failure_carries_the_restarts_done_before_the_failed_revision() -> None:
    owner = job(gang=2, name="train-1-a0-r2", annotations={"muster.dev/restarts": "2"})
    again = observe(owner, [pod(owner, 0, "Failed", exit_code=1), pod(owner, 1, "Failed", exit_code=1)], CLUSTER, NOW)
    failed = [o.message for o in again if isinstance(o.message, RunFailed)]
    assert [f.restarts for f in failed] == [2]
    unannotated = job(gang=1)
    [first] = [o.message for o in observe(unannotated, [pod(unannotated, 0, "Failed", exit_code=1)], CLUSTER, NOW)
               if isinstance(o.message, RunFailed)]
    assert first.restarts is None


def test_pod_lost_with_its_node_is_an_eviction() -> None:
    owner = job(gang=2)
    pods = [pod(owner, 0, "Failed", exit_code=137, reason="NodeLost", node="east-a100-2"),
            pod(owner, 1, "Failed", exit_code=1)]
    result = observe(owner, pods, CLUSTER, NOW)
    evicted = result[-1].message
    assert isinstance(evicted, RunEvicted)
    assert (evicted.reason, evicted.node) == ("NodeLost", "east-a100-2")
    assert not any(isinstance(o.message, RunFailed) for o in result)


def test_failed_job_without_failed_pods() -> None:
    owner = job(conditions=[{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "late"}])
    result = observe(owner, [], CLUSTER, NOW)
    assert isinstance(result[0].message, RunFailed) and result[0].message.reason == "DeadlineExceeded"


def test_failures_during_a_preemption_are_not_reported() -> None:
    owner = job(annotations={"muster.dev/preempt-requested": NOW.isoformat()})
    assert kinds(observe(owner, [pod(owner, 0, "Failed", exit_code=143)], CLUSTER, NOW)) == []


def test_pods_of_other_jobs_are_ignored() -> None:
    owner = job(gang=1)
    stranger = pod(job(name="other", uid="uid-other"), 0, "Running")
    assert observe(owner, [stranger], CLUSTER, NOW) == []


def test_deletion_by_muster_and_by_someone_else() -> None:
    ours = observe_deleted(job(annotations={"muster.dev/deleted-by": "muster",
                                            "muster.dev/delete-reason": "preempted"}), CLUSTER, NOW)
    assert ours is not None and isinstance(ours.message, RunDeleted) and ours.message.by == "muster"
    theirs = observe_deleted(job(), CLUSTER, NOW)
    assert theirs is not None and isinstance(theirs.message, RunDeleted) and theirs.message.by == "external"


def test_replacing_a_job_within_its_attempt_is_not_a_deletion() -> None:
    for reason in ("restart", "rescale"):
        replaced = job(annotations={"muster.dev/deleted-by": "muster", "muster.dev/delete-reason": reason})
        assert observe_deleted(replaced, CLUSTER, NOW) is None


def test_jobs_without_muster_identity_are_not_runs() -> None:
    plain = job()
    plain["metadata"]["labels"] = {}
    plain["metadata"]["annotations"] = {}
    assert job_ref(plain) is None
    assert observe(plain, [], CLUSTER, NOW) == [] and observe_deleted(plain, CLUSTER, NOW) is None


def test_a_deadline_explains_the_killed_pods() -> None:
    owner = job(conditions=[{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "late"}])
    result = observe(owner, [pod(owner, 0, "Failed", exit_code=143)], CLUSTER, NOW)
    assert len(result) == 1 and isinstance(result[0].message, RunFailed)
    assert result[0].message.reason == "DeadlineExceeded" and result[0].message.pod is None
