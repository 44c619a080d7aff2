"""The informer's object store: events, repeats, re-list differences."""

from __future__ import annotations

import pytest

from services.runtime.kube import ADDED, DELETED, MODIFIED, Change, ObjectStore
from services.runtime.kube.store import object_key
from tests.kube.builders import obj


def kinds(changes: list[Change]) -> list[tuple[str, str, str]]:
    return [(c.type, object_key(c.object), c.object["metadata"]["resourceVersion"]) for c in changes]


def test_events_are_applied_and_repeats_dropped() -> None:
    store = ObjectStore()
    assert kinds(store.apply(ADDED, obj("a", 1))) == [(ADDED, "default/a", "1")]
    assert store.apply(ADDED, obj("a", 1)) == []
    assert store.apply(MODIFIED, obj("a", 1)) == []
    assert kinds(store.apply(MODIFIED, obj("a", 2))) == [(MODIFIED, "default/a", "2")]
    assert kinds(store.apply(MODIFIED, obj("b", 3))) == [(ADDED, "default/b", "3")]  # first sight is an add
    assert kinds(store.apply(DELETED, obj("a", 4))) == [(DELETED, "default/a", "4")]
    assert store.apply(DELETED, obj("a", 4)) == []
    assert store.keys() == ["default/b"]


def test_cluster_scoped_keys() -> None:
    store = ObjectStore()
    store.apply(ADDED, obj("node-1", 1, namespace=None))
    assert "node-1" in store and store.get("node-1") is not None


def test_replace_reports_exactly_the_difference() -> None:
    store = ObjectStore()
    store.replace([obj("same", 1), obj("changed", 1), obj("gone", 1), obj("recreated", 1, uid="u1")])
    changes = store.replace([obj("same", 1), obj("changed", 5), obj("new", 6), obj("recreated", 7, uid="u2")])
    assert sorted(kinds(changes)) == sorted([
        (DELETED, "default/gone", "1"), (MODIFIED, "default/changed", "5"), (ADDED, "default/new", "6"),
        (DELETED, "default/recreated", "1"), (ADDED, "default/recreated", "7"),
    ])
    assert changes[0].type == DELETED
    assert sorted(store.keys()) == ["default/changed", "default/new", "default/recreated", "default/same"]
    assert store.replace([obj("same", 1), obj("changed", 5), obj("new", 6), obj("recreated", 7, uid="u2")]) == []


def test_unknown_event_type_is_an_error() -> None:
    with pytest.raises(ValueError):
        ObjectStore().apply("BOOKMARK", obj("a", 1))
