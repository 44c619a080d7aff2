"""The watcher's memory: each observation once, node states only when they change."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.envelope import make_envelope
from schemas.runs import RunDeleted, RunFailed
from services.node_watcher.published import live_nodes
from services.node_watcher.tracker import NodeTracker, RunTracker
from tests.node_watcher.builders import CLUSTER, NOW, complete, example_node, example_nodes, job, not_ready, pod


def types(messages: list) -> list[str]:  # type: ignore[type-arg]
    return [m.TYPE for m in messages]


def test_each_observation_is_reported_once() -> None:
    tracker = RunTracker(CLUSTER)
    owner = job(gang=2)
    assert tracker.on_job("ADDED", owner, NOW) == []
    assert types(tracker.on_pod("ADDED", pod(owner, 0, "Running"), NOW)) == ["RunStarted"]
    assert tracker.on_pod("MODIFIED", pod(owner, 0, "Running"), NOW) == []
    assert types(tracker.on_pod("ADDED", pod(owner, 1, "Running"), NOW)) == ["RunAllPodsReady"]
    tracker.on_pod("MODIFIED", pod(owner, 0, "Succeeded"), NOW)
    tracker.on_pod("MODIFIED", pod(owner, 1, "Succeeded"), NOW)
    done = job(gang=2, conditions=complete())
    assert types(tracker.on_job("MODIFIED", done, NOW)) == ["RunSucceeded"]
    assert tracker.on_job("MODIFIED", done, NOW) == []


def test_pods_seen_before_their_job() -> None:
    tracker = RunTracker(CLUSTER)
    owner = job(gang=1)
    assert tracker.on_pod("ADDED", pod(owner, 0, "Running"), NOW) == []
    assert types(tracker.on_job("ADDED", owner, NOW)) == ["RunStarted", "RunAllPodsReady"]


def test_a_restarted_gang_can_fail_again_but_does_not_start_again() -> None:
    tracker = RunTracker(CLUSTER)
    first = job(gang=1)
    tracker.on_job("ADDED", first, NOW)
    tracker.on_pod("ADDED", pod(first, 0, "Running"), NOW)
    assert types(tracker.on_pod("MODIFIED", pod(first, 0, "Failed", exit_code=2), NOW)) == ["RunFailed"]
    replaced = job(gang=1, annotations={"muster.dev/deleted-by": "muster", "muster.dev/delete-reason": "restart"})
    second = job(gang=1, name="train-1-a0-r1")
    tracker.on_job("ADDED", second, NOW)
    assert tracker.on_job("DELETED", replaced, NOW) == []
    assert tracker.on_pod("ADDED", pod(second, 0, "Running"), NOW) == []
    again = tracker.on_pod("MODIFIED", pod(second, 0, "Failed", exit_code=2), NOW)
    assert types(again) == ["RunFailed"]
    assert isinstance(again[0], RunFailed) and again[0].pod == "train-1-a0-r1-0-abcd0"


def test_final_deletion_is_reported_and_forgotten() -> None:
    tracker = RunTracker(CLUSTER)
    owner = job(gang=1)
    tracker.on_job("ADDED", owner, NOW)
    tracker.on_pod("ADDED", pod(owner, 0, "Running"), NOW)
    deleted = tracker.on_job("DELETED", job(gang=1, annotations={"muster.dev/deleted-by": "muster"}), NOW)
    assert isinstance(deleted[0], RunDeleted) and deleted[0].by == "muster"
    assert not any(key[0] == "train-1" for key in tracker.reported)


def test_node_states_are_published_when_they_change() -> None:
    tracker = NodeTracker(CLUSTER)
    first = [m for n in example_nodes() for m in tracker.on_node("ADDED", n, NOW)]
    assert len(first) == 6 and all(isinstance(m, NodeStateObserved) for m in first)
    node = example_node()
    touched = copy.deepcopy(node)
    touched["metadata"]["resourceVersion"] = "99"  # a heartbeat: nothing Muster cares about changed
    assert tracker.on_node("MODIFIED", touched, NOW) == []
    down = tracker.on_node("MODIFIED", not_ready(node), NOW)
    assert isinstance(down[0], NodeStateObserved) and not down[0].state.healthy


def test_pods_move_gpus_in_use() -> None:
    tracker = NodeTracker(CLUSTER)
    tracker.on_node("ADDED", example_node(), NOW)
    owner = job(gang=1)
    bound = tracker.on_pod("ADDED", pod(owner, 0, "Pending", gpus=4), NOW)
    assert isinstance(bound[0], NodeStateObserved) and bound[0].state.gpus_in_use == 4
    assert tracker.on_pod("MODIFIED", pod(owner, 0, "Running", gpus=4), NOW) == []
    ended = tracker.on_pod("MODIFIED", pod(owner, 0, "Succeeded", gpus=4), NOW)
    assert isinstance(ended[0], NodeStateObserved) and ended[0].state.gpus_in_use == 0
    assert tracker.on_pod("DELETED", pod(owner, 0, "Succeeded", gpus=4), NOW) == []


def test_node_deletion() -> None:
    tracker = NodeTracker(CLUSTER)
    node = example_node()
    tracker.on_node("ADDED", node, NOW)
    removed = tracker.on_node("DELETED", node, NOW)
    assert isinstance(removed[0], NodeRemoved) and removed[0].node == "east-a100-0"
    assert tracker.on_node("DELETED", node, NOW) == []


def test_live_nodes_of_the_published_capacity() -> None:
    state = NodeState(cluster="east", node="n1", gpu_type="a100", gpus_allocatable=8)
    rows = {
        "east/n1": make_envelope(NodeStateObserved(state=state, observed_at=datetime.now(UTC)), "node_watcher"),
        "east/n2": make_envelope(NodeRemoved(cluster="east", node="n2", observed_at=datetime.now(UTC)), "node_watcher"),
        "west/n3": make_envelope(NodeStateObserved(state=state.model_copy(update={"cluster": "west", "node": "n3"}),
                                                   observed_at=datetime.now(UTC)), "node_watcher"),
    }
    assert live_nodes(dict(rows), "east") == {"n1"}
