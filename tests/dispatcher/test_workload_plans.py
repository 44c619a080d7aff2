"""What the dispatcher writes on a workload object, where each of its gated pods goes, and the pods of a group it
creates itself (pure)."""

from __future__ import annotations

from typing import Any

from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest, RoleSpec, WorkloadObject
from schemas.kube import ADMISSION_GATE, GANG_SIZE, HOSTNAME_LABEL, JOB_ID, ROLE
from services.dispatcher.workload_plans import PLAN as PLAN_ANNOTATION
from services.dispatcher.workload_plans import (
    beyond_plan,
    choose_node,
    node_of,
    planned,
    resized_annotations,
    roles_changed,
)
from services.dispatcher.workloads import released_group
from services.spec.kinds import kind_for
from services.spec.pod_resources import holds_node
from tests.builders.jobspecs import job_spec

PLAN = PlacementPlan(cluster="east", nodes=[
    NodePods(node="n1", pods=2, role="workers"), NodePods(node="n2", pods=1, role="workers"),
    NodePods(node="n1", pods=1, role="launcher"),
])


def role(name: str, replicas: int, gpus: int) -> RoleSpec:
    resources = ResourceRequest(gpus=gpus, gpu_type="a100" if gpus else None)
    return RoleSpec(name=name, replicas=replicas, template=PodTemplate(image="x", resources=resources))


def spec(*roles: RoleSpec) -> JobSpec:
    """The JobSet ``js`` of ``roles``."""
    return job_spec("js", roles=list(roles),
                    workload=WorkloadObject(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js"))


def test_each_role_fills_its_planned_nodes_in_the_plans_order() -> None:
    assert planned(PLAN, "workers", "workers") == {"n1": 2, "n2": 1}
    assert choose_node(PLAN, "workers", "workers", []) == "n1"
    assert choose_node(PLAN, "workers", "workers", ["n1"]) == "n1"
    assert choose_node(PLAN, "workers", "workers", ["n1", "n1"]) == "n2"
    assert choose_node(PLAN, "workers", "workers", ["n1", "n1", "n2"]) is None  # a surplus pod stays gated
    assert choose_node(PLAN, "launcher", "workers", []) == "n1"  # the workers' pods there are not the launcher's
    assert choose_node(PLAN, "launcher", "workers", ["n1"]) is None


def test_a_plan_of_one_role_names_no_role() -> None:
    plan = PlacementPlan(cluster="east", nodes=[NodePods(node="n3", pods=2)])
    assert choose_node(plan, "main", "main", ["n3"]) == "n3"


def test_a_pod_counts_on_its_node_until_it_ends_or_goes() -> None:
    pod: dict[str, Any] = {"metadata": {}, "spec": {"nodeSelector": {HOSTNAME_LABEL: "n1"}}, "status": {}}
    assert holds_node(pod) and node_of(pod) == "n1"
    assert node_of({"spec": {"nodeName": "n2"}}) == "n2"
    assert not holds_node({**pod, "status": {"phase": "Succeeded"}})
    assert not holds_node({**pod, "metadata": {"deletionTimestamp": "2026-11-26T00:00:00Z"}})


def test_an_object_edited_after_submission_is_told_apart() -> None:
    admitted = spec(role("workers", 2, 8), role("launcher", 1, 0))
    assert roles_changed(admitted, [role("workers", 2, 8), role("launcher", 1, 0)]) is None
    why = roles_changed(admitted, [role("workers", 4, 8), role("launcher", 1, 0)])
    assert why is not None and "workers: admitted 2 pods x 8 GPUs a100" in why and "now 4 pods" in why
    assert "extra: admitted none" in (roles_changed(admitted, [*admitted.roles, role("extra", 1, 1)]) or "")


def _pod(name: str, node: str, *, ready: bool = True, going: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if going:
        meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_a_shrunk_plan_takes_back_the_pods_beyond_it_on_each_node_not_ready_ones_first() -> None:
    shrunk = PlacementPlan(cluster="east", nodes=[NodePods(node="n1", pods=1)])
    pods = [_pod("web-a", "n1"), _pod("web-b", "n1", ready=False), _pod("web-c", "n2"),
            _pod("web-d", "n2", going=True)]  # web-d is going already: it counts for nothing
    assert [p["metadata"]["name"] for p in beyond_plan(shrunk, "main", "main", pods)] == ["web-b", "web-c"]
    assert beyond_plan(shrunk, "main", "main", [_pod("web-a", "n1")]) == []  # its owner's shrink: gone already
    notes = resized_annotations(shrunk)
    assert notes[GANG_SIZE] == "1" and PlacementPlan.model_validate_json(notes[PLAN_ANNOTATION]) == shrunk


def test_a_plan_written_by_a_newer_dispatcher_is_read_without_the_fields_this_one_does_not_know() -> None:
    import json

    from services.dispatcher.workload_plans import plan_of

    newer = json.loads(PLAN.model_dump_json())
    newer["spread"] = "racks"
    newer["nodes"][0]["nic"] = "mlx5_0"
    obj = {"metadata": {"annotations": {PLAN_ANNOTATION: json.dumps(newer)}}}
    assert plan_of(obj) == PLAN


def test_a_pod_group_muster_creates_is_released_as_created_and_a_pod_beyond_the_plan_stays_gated() -> None:
    def pod(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "w", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}

    kind = kind_for("v1", "Pod")
    manifest = {"apiVersion": "v1", "kind": "List", "items": [pod("a"), pod("b"), pod("c")]}
    group = kind.hold_manifest(manifest, name="j-a0", namespace="ns", labels={}, annotations={})
    plan = PlacementPlan(cluster="east", nodes=[NodePods(node="n1", pods=1), NodePods(node="n2", pods=1)])
    job = job_spec("j", roles=[role("main", 3, 4)], workload=WorkloadObject(api_version="v1", kind="Pod",
                                                                             manifest=manifest))
    decision = JobAdmitted(job_id="j", attempt=0, tenant="t", queue="q", namespace="ns", priority=1, replicas=3,
                           placement=plan, spec=job)
    first, second, third = released_group(decision, group)
    for made, node in ((first, "n1"), (second, "n2")):
        assert not made["spec"].get("schedulingGates") and made["spec"]["nodeSelector"] == {HOSTNAME_LABEL: node}
        assert "schedulerName" not in made["spec"]  # no binder named: the default scheduler binds it
        assert made["metadata"]["labels"][JOB_ID] == "j" and made["metadata"]["labels"][ROLE] == "main"
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in made["spec"]["tolerations"]
    assert third["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]  # no slot left: it waits, as released
    assert group["items"][0]["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]  # the group is not changed
    # with Muster's binder, every pod names it (the gated one too, for when it is released), unless its
    # manifest names a scheduler of its own
    group["items"][1]["spec"]["schedulerName"] = "volcano"
    bound = released_group(decision, group, scheduler_name="muster")
    assert [p["spec"].get("schedulerName") for p in bound] == ["muster", "volcano", "muster"]
    assert "schedulerName" not in group["items"][0]["spec"]
