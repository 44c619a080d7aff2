"""The autoscaler's answers to Muster's ProvisioningRequests, as the node watcher reports them: the nodes made
for a request once they are all observed (either watch may come first), failures with their reason, each once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.kube import ATTEMPT, JOB_ID, NODE_GROUP, PROVISIONING_REQUEST
from schemas.runs import NodesProvisioned, ProvisioningFailed
from services.dispatcher.provisioning import pod_template, provisioning_request
from services.node_watcher.provisioning import NODES_GRACE_S, ProvisioningTracker
from services.runtime.kube.store import ADDED, DELETED, MODIFIED
from tests.builders.messages import example_messages

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _request(*conditions: tuple[str, str, str], count: int = 2, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "big-a0", "namespace": "team-a", "uid": uid,
                         "labels": {JOB_ID: "big", ATTEMPT: "0", NODE_GROUP: "a100"}},
            "spec": {"podSets": [{"podTemplateRef": {"name": "big-a0"}, "count": count}]},
            "status": {"conditions": [{"type": t, "status": "True", "reason": r, "message": m}
                                      for t, r, m in conditions]}}


def _node(name: str, request: str = "big-a0") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {PROVISIONING_REQUEST: request}}}


def test_the_nodes_of_a_provisioned_request_are_named_once_all_are_observed() -> None:
    t = ProvisioningTracker("cloud")
    assert t.on_node(ADDED, _node("n1"), T0) == []
    assert t.on_request(MODIFIED, _request(("Accepted", "", "")), T0) == []
    assert t.on_request(MODIFIED, _request(("Provisioned", "Done", "")), T0) == []  # one node of two seen
    [answer] = t.on_node(ADDED, _node("n2"), T0)
    assert isinstance(answer, NodesProvisioned)
    assert (answer.job_id, answer.attempt, answer.request, answer.group, answer.nodes) == ("big", 0, "big-a0",
                                                                                         "a100", ["n1", "n2"])
    assert t.on_request(MODIFIED, _request(("Provisioned", "Done", "")), T0) == []  # answered once


def test_a_request_whose_nodes_are_not_all_observed_is_answered_after_the_grace_period() -> None:
    t = ProvisioningTracker("cloud")
    t.on_request(ADDED, _request(("Provisioned", "Done", "")), T0)
    assert t.tick(T0 + timedelta(seconds=NODES_GRACE_S - 1)) == []
    [answer] = t.tick(T0 + timedelta(seconds=NODES_GRACE_S))
    assert isinstance(answer, NodesProvisioned) and answer.nodes == []


def test_failures_carry_the_conditions_reason_and_a_deleted_request_is_forgotten() -> None:
    t = ProvisioningTracker("cloud")
    [failed] = t.on_request(MODIFIED, _request(("Failed", "OutOfCapacity", "no a100 left")), T0)
    assert isinstance(failed, ProvisioningFailed)
    assert (failed.reason, failed.message) == ("OutOfCapacity", "no a100 left")
    assert t.on_request(MODIFIED, _request(("Failed", "OutOfCapacity", "no a100 left")), T0) == []
    revoked = t.on_request(MODIFIED, _request(("CapacityRevoked", "Revoked", ""), uid="u2"), T0)
    assert [type(m) for m in revoked] == [ProvisioningFailed]
    t.on_request(MODIFIED, _request(("Provisioned", "Done", ""), uid="u3"), T0)
    assert t.on_request(DELETED, _request(uid="u3"), T0) == [] and not t.requests


def test_a_request_for_nodes_becomes_a_provisioning_request_and_a_pod_template_of_one_node() -> None:
    from schemas.decisions import NodesRequested

    [d] = [m for m in example_messages() if isinstance(m, NodesRequested)]
    pr, tpl = provisioning_request(d), pod_template(d)
    assert pr["metadata"]["name"] == tpl["metadata"]["name"] == d.request
    assert pr["spec"]["podSets"] == [{"podTemplateRef": {"name": d.request}, "count": d.nodes}]
    assert pr["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert pr["metadata"]["labels"][JOB_ID] == d.job_id and pr["metadata"]["labels"][ATTEMPT] == str(d.attempt)
    pod = tpl["template"]["spec"]
    assert pod["nodeSelector"] == {NODE_GROUP: d.group}
    assert pod["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": str(d.gpus_per_node)}
