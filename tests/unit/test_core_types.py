"""Wire <-> core conversions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from schemas.capacity import NodeState, NodeTopology, Taint
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest, RoleSpec, TopologySpec, WorkloadObject
from services.core.model import ANY_GPU, NodeAssignment, Placement, TopologyMode
from services.spec.core_types import job_from_submit, node_from_state, placement_from_plan, placement_plan
from tests.builders.jobspecs import job_spec
from tests.builders.messages import T0, example_messages


def _submit() -> SubmitJob:
    return next(m for m in example_messages() if isinstance(m, SubmitJob))


def test_submit_to_core_job() -> None:
    msg = _submit()
    job = job_from_submit(msg, priority=100, submit_time=12.5, attempt=2)
    assert (job.job_id, job.queue, job.priority, job.submit_time, job.attempt) == ("j-0001", "team-a", 100, 12.5, 2)
    assert (job.replicas, job.min_size, job.gpus_per_pod, job.gpu_type) == (4, 2, 8, "a100")
    assert job.cpu_m == 16000 and job.memory_mb == 128 * 1024
    assert job.checkpointable and job.grace_period_s == 120.0 and job.runtime_estimate == 6 * 3600
    no_ckpt = msg.spec.model_copy(update={"checkpoint": msg.spec.checkpoint.model_copy(update={"enabled": False})})
    plain = job_from_submit(msg.model_copy(update={"spec": no_ckpt}), priority=0, submit_time=0)
    assert plain.grace_period_s == 0.0 and not plain.checkpointable  # no checkpoint to wait for
    assert job.topology is not None and job.topology.level == "rack" and job.topology.mode is TopologyMode.PREFERRED
    assert "nvidia.com/gpu" in job.tolerations and job.user == "alice" and job.tenant == "team-a"


def test_any_gpu_type() -> None:
    msg = _submit()
    spec = msg.spec.model_copy(update={"template": msg.spec.template.model_copy(
        update={"resources": msg.spec.template.resources.model_copy(update={"gpu_type": None})})})
    assert job_from_submit(msg.model_copy(update={"spec": spec}), priority=0, submit_time=0).gpu_type == ANY_GPU


def test_node_state_to_core_node() -> None:
    state = NodeState(cluster="c1", node="n1", gpu_type="h100", gpus_allocatable=8,
                      topology=NodeTopology(zone="z", rack="r3", nvlink_groups=[4, 4]),
                      taints=[Taint(key="nvidia.com/gpu"), Taint(key="soft", effect="PreferNoSchedule")],
                      healthy=False)
    node = node_from_state(state)
    assert node.domain("rack") == ("c1", "z", "", "r3")
    assert node.nvlink_groups == (4, 4) and node.taints == frozenset({"nvidia.com/gpu"}) and not node.healthy
    assert T0.tzinfo is not None


def test_placement_round_trip() -> None:
    plan = next(m for m in example_messages() if m.TYPE == "JobAdmitted").placement  # type: ignore[attr-defined]
    core: Placement = placement_from_plan(plan)
    assert core.pods == 4 and placement_plan(core) == plan


def _roles_spec(**extra: object) -> JobSpec:
    def template(gpus: int, cpu: str = "1") -> PodTemplate:
        return PodTemplate(image="registry.example/train:1",
                           resources=ResourceRequest(gpus=gpus, gpu_type="a100" if gpus else None, cpu=cpu))

    fields: dict[str, object] = {
        "roles": [RoleSpec(name="launcher", template=template(0, "2")),
                  RoleSpec(name="worker", replicas=4, min_replicas=2, template=template(8)),
                  RoleSpec(name="head", template=template(1), topology=TopologySpec(level="rack"))],
        "workload": WorkloadObject(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="mpi"),
        **extra,
    }
    return job_spec("mpi", "team-a", **fields)


def test_a_job_of_several_roles_becomes_a_main_role_and_companions() -> None:
    spec = _roles_spec()
    assert spec.main_role().name == "worker" and spec.main_replicas == 4 and spec.total_gpus == 4 * 8 + 1
    msg = _submit().model_copy(update={"spec": spec})
    job = job_from_submit(msg, priority=1, submit_time=0)
    assert (job.role, job.replicas, job.min_size, job.gpus_per_pod, job.gpu_type) == ("worker", 4, 2, 8, "a100")
    assert [(c.name, c.replicas, c.gpus_per_pod, c.cpu_m) for c in job.companions] == [
        ("launcher", 1, 0, 2000), ("head", 1, 1, 1000)]
    assert job.companions[1].topology is not None and job.companions[1].topology.level == "rack"
    assert job.total_gpus == 33 and "nvidia.com/gpu" in job.tolerations
    assert spec.gpus_for(2) == 17 and spec.gpus_charged_at(2) == 17.0
    assert spec.resized(3).main_role().replicas == 3 and spec.resized(1).main_role().min_replicas == 1


def test_role_placements_cross_the_wire_with_their_names() -> None:
    core = Placement("c1", (NodeAssignment("n1", 4), NodeAssignment("n2", 1, role="head")))
    plan = placement_plan(core, "worker")
    assert [(n.node, n.role) for n in plan.nodes] == [("n1", "worker"), ("n2", "head")]
    assert placement_from_plan(plan, "worker") == core and plan.pods_of("head") == 1
    assert [n.role for n in placement_plan(Placement("c1", (NodeAssignment("n1", 2),))).nodes] == [None]


@pytest.mark.parametrize(("change", "message"), [
    ({"template": PodTemplate(image="x")}, "not both"),
    ({"replicas": 3}, "per role"),
    ({"roles": []}, "template"),
])
def test_a_spec_gives_template_or_roles(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _roles_spec(**change)


def test_roles_are_unique_and_at_most_one_is_elastic() -> None:
    spec = _roles_spec()
    twice = [*spec.roles, spec.roles[0]]
    with pytest.raises(ValidationError, match="unique"):
        _roles_spec(roles=twice)
    elastic = [r.model_copy(update={"min_replicas": 1}) for r in spec.roles]
    with pytest.raises(ValidationError, match="at most one role"):
        _roles_spec(roles=elastic)


def test_a_workload_object_is_named_or_given() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        WorkloadObject(api_version="ray.io/v1", kind="RayJob")
    with pytest.raises(ValidationError, match="not a RayJob"):
        WorkloadObject(api_version="ray.io/v1", kind="RayJob", manifest={"kind": "JobSet"})


def test_a_one_role_spec_reads_and_writes_as_before() -> None:
    msg = _submit()
    data = msg.spec.model_dump(mode="json")
    assert "roles" not in data and "workload" not in data
    assert JobSpec.model_validate(data) == msg.spec and msg.spec.pod_roles()[0].name == "main"


def test_a_submission_of_several_roles_crosses_the_wire_and_back() -> None:
    """The JSON of a spec with roles carries the defaults of replicas and min_replicas; it must read back."""
    from schemas.codec import decode, encode
    from schemas.envelope import make_envelope

    msg = _submit().model_copy(update={"spec": _roles_spec()})
    back = decode(encode(make_envelope(msg, "test")), topic="muster.intents.v1").payload
    assert back == msg


def test_a_job_of_several_roles_shows_each_role_in_its_status_and_description() -> None:
    from datetime import UTC, datetime

    from schemas.api import Explanation, JobView
    from schemas.status import role_statuses
    from services.cli.render import describe_text

    spec = _roles_spec()
    roles = role_statuses(spec, 2)  # the main role (workers) at its current size
    assert [(r.name, r.replicas, r.gpus_per_pod) for r in roles] == [("launcher", 1, 0), ("worker", 2, 8),
                                                                       ("head", 1, 1)]
    assert role_statuses(_submit().spec, 4) == []  # a job of one role lists none
    now = datetime(2026, 11, 26, tzinfo=UTC)
    job = JobView(job_id="j1", tenant="team-a", queue="team-a", name="mpi", state="running", priority_class="normal",
                  replicas=2, gpus=17, submitted_at=now, updated_at=now, roles=roles)
    text = describe_text(Explanation(job=job, summary="running", reason="", message="", position=None,
                                     estimated_start=None, history=[]), now)
    assert "Size:           4 pods, 17 GPUs, one gang of" in text
    assert "role worker             2 x 8 GPUs" in text and "role head               1 x 1 GPU" in text
