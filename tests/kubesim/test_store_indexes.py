"""The store's owner index and the event recorder's index: a Job's pods and a repeated Event are found
without reading every object of the cluster, and stay right as objects change owners or go."""

from __future__ import annotations

from services.kubesim.events import EventRecorder
from services.kubesim.registry import Registry
from services.kubesim.resources import EVENTS, NAMESPACES, PODS
from services.kubesim.store import Store


def _pod(name: str, *owners: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": o, "uid": o, "controller": True} for o in owners]},
        "spec": {"containers": [{"name": "main", "image": "x"}]}}


def test_objects_are_found_by_owner_through_creation_adoption_orphaning_and_deletion() -> None:
    store = Store()
    store.create(PODS, _pod("a", "job-1"))
    store.create(PODS, _pod("b", "job-1"))
    store.create(PODS, _pod("c", "job-2"))
    assert [p["metadata"]["name"] for p in store.owned_by(PODS, "job-1")] == ["a", "b"]
    moved = store.get(PODS, "ns", "b")
    moved["metadata"]["ownerReferences"][0]["uid"] = "job-2"
    store.replace(PODS, moved)
    assert [p["metadata"]["name"] for p in store.owned_by(PODS, "job-1")] == ["a"]
    assert [p["metadata"]["name"] for p in store.owned_by(PODS, "job-2")] == ["b", "c"]
    orphan = store.get(PODS, "ns", "a")
    orphan["metadata"]["ownerReferences"] = []
    store.replace(PODS, orphan)
    store.remove(PODS, "ns", "c")
    assert store.owned_by(PODS, "job-1") == []
    assert [p["metadata"]["name"] for p in store.owned_by(PODS, "job-2")] == ["b"]
    assert store.owned_by(EVENTS, "job-2") == []  # by resource type


def test_a_repeated_event_is_bumped_and_one_deleted_meanwhile_is_recorded_afresh() -> None:
    registry = Registry(Store())
    registry.store.create(NAMESPACES, {"metadata": {"name": "ns"}})
    pod = registry.store.create(PODS, _pod("a", "job-1"))
    recorder = EventRecorder(registry)
    recorder.record(pod, "Normal", "Started", "started", "kubelet")
    recorder.record(pod, "Normal", "Started", "started", "kubelet")
    recorder.record(pod, "Normal", "Killing", "stopping", "kubelet")
    events, _ = registry.store.list(EVENTS, "ns")
    assert sorted((e["reason"], e["count"]) for e in events) == [("Killing", 1), ("Started", 2)]
    started = next(e for e in events if e["reason"] == "Started")
    registry.store.remove(EVENTS, "ns", started["metadata"]["name"])
    recorder.record(pod, "Normal", "Started", "started", "kubelet")
    events, _ = registry.store.list(EVENTS, "ns")
    assert sorted((e["reason"], e["count"]) for e in events) == [("Killing", 1), ("Started", 1)]
