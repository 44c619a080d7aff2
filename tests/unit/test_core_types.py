"""Wire <-> core conversions."""

from __future__ import annotations

from schemas.capacity import NodeState, NodeTopology, Taint
from schemas.intents import SubmitJob
from services.core.model import ANY_GPU, Placement, TopologyMode
from services.spec.core_types import job_from_submit, node_from_state, placement_from_plan, placement_plan
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
