"""The binder's view of free GPUs per node: allocatable minus the unfinished Muster pods bound there."""

from __future__ import annotations

from typing import Any

from services.dispatcher.node_room import NodeRoom, node_allocatable_gpus

KubeObject = dict[str, Any]


def node(name: str = "n1", gpus: str | None = "8") -> KubeObject:
    allocatable = {} if gpus is None else {"nvidia.com/gpu": gpus}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def pod(name: str, gpus: int, node_name: str | None = "n1", phase: str = "Running",
        terminating: bool = False) -> KubeObject:
    meta: KubeObject = {"name": name, "namespace": "team-a"}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-01T12:00:00Z"
    spec: KubeObject = {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_allocatable_is_read_from_the_node() -> None:
    assert node_allocatable_gpus(node(gpus="8")) == 8
    assert node_allocatable_gpus(node(gpus=None)) is None
    assert node_allocatable_gpus(node(gpus="lots")) is None


def test_terminating_pods_hold_their_gpus_until_they_finish_or_go() -> None:
    room = NodeRoom()
    room.set_node(node())
    assert room.observe(pod("old", 8)) is None
    assert room.observe(pod("old", 8, terminating=True)) is None
    assert room.free("n1") == 0 and not room.fits("n1", 1)
    assert room.observe(pod("old", 8, phase="Failed", terminating=True)) == "n1"
    assert room.free("n1") == 8 and room.fits("n1", 8)


def test_a_deleted_pod_releases_its_node_once() -> None:
    room = NodeRoom()
    room.set_node(node())
    room.observe(pod("a", 4))
    assert room.forget(pod("a", 4)) == "n1"
    assert room.forget(pod("a", 4)) is None
    assert room.free("n1") == 8


def test_a_reservation_counts_until_the_watch_shows_the_pod_and_can_be_undone() -> None:
    room = NodeRoom()
    room.set_node(node())
    waiting = pod("new", 6, node_name=None, phase="Pending")
    room.reserve(waiting, "n1")
    assert room.free("n1") == 2
    room.observe(pod("new", 6, phase="Pending"))  # bound: the same pod, counted once
    assert room.free("n1") == 2
    room.unreserve(waiting, "n2")  # another node: nothing to undo
    assert room.free("n1") == 2
    room.unreserve(waiting, "n1")
    assert room.free("n1") == 8


def test_an_unbound_pod_holds_nothing_and_an_unknown_node_has_room() -> None:
    room = NodeRoom()
    assert room.observe(pod("pending", 8, node_name=None, phase="Pending")) is None
    assert room.fits("unknown-node", 64) and room.free("unknown-node") is None
    room.set_node(node(gpus="4"))
    assert room.fits("n1", 0) and room.fits("n1", 4) and not room.fits("n1", 5)


def test_a_node_that_grows_says_so() -> None:
    room = NodeRoom()
    assert room.set_node(node(gpus="4"))
    assert not room.set_node(node(gpus="4"))
    assert room.set_node(node(gpus="8"))
    assert not room.set_node(node(gpus="2"))
    room.remove_node("n1")
    assert room.free("n1") is None
