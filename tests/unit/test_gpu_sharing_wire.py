"""GPU sharing on the wire: the job spec, node groups and node state, their translation into the core's
values (what the queue manager builds), placements that carry shares, and the accountant's charges."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from schemas.capacity import NodeState
from schemas.config import NodeGroupConfig
from schemas.decisions import NodePods, PlacementPlan
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, ResourceRequest
from services.core import SchedulerConfig, SchedulerState, schedule
from services.core.model import Admit, NodeAssignment, Placement
from services.quota_accountant.attempts import Admission
from services.quota_accountant.ledger import Ledger
from services.spec.cluster_file import core_nodes, core_queues, load_cluster_file
from services.spec.core_types import job_from_submit, node_from_state, placement_from_plan, placement_plan
from tests.builders.messages import example_messages


def _submit(**resources: object) -> SubmitJob:
    msg = next(m for m in example_messages() if isinstance(m, SubmitJob))
    res = ResourceRequest(**{"cpu": "2", "memory": "8Gi", "gpu_type": "a100", **resources})
    spec = msg.spec.model_copy(update={"template": msg.spec.template.model_copy(update={"resources": res}),
                                       "min_replicas": None, "replicas": 2})
    return msg.model_copy(update={"spec": spec})


# ---------------------------------------------------------------- job spec


@pytest.mark.parametrize("fraction", [0.125, 0.25, 0.5, 0.875])
def test_fractions_are_eighths(fraction: float) -> None:
    assert ResourceRequest(gpu_fraction=fraction).gpus_charged == fraction


@pytest.mark.parametrize("fraction", [0.0, 0.3, 1.0, 1.5, 0.0625])
def test_other_fractions_are_refused(fraction: float) -> None:
    with pytest.raises(ValidationError):
        ResourceRequest(gpu_fraction=fraction)


@pytest.mark.parametrize(
    "resources",
    [{"gpus": 1, "gpu_fraction": 0.5}, {"gpus": 1, "mig_profile": "1g.10gb"},
     {"gpu_fraction": 0.5, "mig_profile": "1g.10gb"}, {"mig_profile": "1g"}, {"mig_profile": "a100"},
     {"mig_profile": "1g.10gb", "mig_slices": 0}],
)
def test_one_kind_of_gpu_per_pod_and_real_profiles(resources: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ResourceRequest(**resources)


def test_mig_charge_is_compute_slices_out_of_seven() -> None:
    assert ResourceRequest(mig_profile="1g.10gb", mig_slices=2).gpus_charged == pytest.approx(2 / 7)
    assert ResourceRequest(mig_profile="3g.40gb").gpus_charged == pytest.approx(3 / 7)
    assert ResourceRequest(gpus=2).gpus_charged == 2


# ---------------------------------------------------------------- into the core (the queue manager's jobs)


def test_fractional_submission_becomes_a_fractional_core_job() -> None:
    job = job_from_submit(_submit(gpu_fraction=0.25), priority=0, submit_time=0)
    assert (job.gpus_per_pod, job.gpu_share, job.fraction, job.mig_profile) == (0, Fraction(1, 4), Fraction(1, 4), "")
    assert job.gpu_amount == Fraction(1, 4) and job.shares_gpus
    assert "nvidia.com/gpu" in job.tolerations  # it runs on tainted GPU nodes like any GPU job


def test_mig_submission_becomes_a_mig_core_job() -> None:
    job = job_from_submit(_submit(mig_profile="1g.10gb", mig_slices=3), priority=0, submit_time=0)
    assert (job.gpus_per_pod, job.mig_profile, job.mig_per_pod) == (0, "1g.10gb", 3)
    assert job.gpu_share == Fraction(3, 7) and job.fraction == 0
    assert "nvidia.com/gpu" in job.tolerations


def test_whole_gpu_submission_is_unchanged() -> None:
    job = job_from_submit(_submit(gpus=4), priority=0, submit_time=0)
    assert (job.gpus_per_pod, job.gpu_share, job.mig_profile, job.mig_per_pod) == (4, 0, "", 0)


# ---------------------------------------------------------------- nodes


def test_node_state_advertises_shared_gpus_and_mig_slices() -> None:
    state = NodeState(cluster="c1", node="n1", gpu_type="a100", gpus_allocatable=6, gpus_shared=2,
                      mig={"1g.10gb": 14, "3g.40gb": 0})
    node = node_from_state(state)
    assert node.gpus == 6 and node.shared_gpus == 2 and dict(node.mig) == {"1g.10gb": 14}


def test_node_group_mig_layout_and_shared_gpus() -> None:
    group = NodeGroupConfig(name="a100-mig", count=1, gpus_per_node=8, gpu_type="a100", shared_gpus=2,
                            mig_gpus=2, mig_layout={"1g.10gb": 7})
    assert group.whole_gpus == 6 and group.mig_slices == {"1g.10gb": 14}
    mixed = NodeGroupConfig(name="m", count=1, gpus_per_node=1, mig_gpus=1, mig_layout={"3g.40gb": 1, "1g.10gb": 4})
    assert mixed.whole_gpus == 0


@pytest.mark.parametrize(
    "fields",
    [{"mig_gpus": 2}, {"mig_layout": {"1g.10gb": 7}}, {"mig_gpus": 9, "mig_layout": {"1g.10gb": 7}},
     {"mig_gpus": 1, "mig_layout": {"1g.10gb": 8}}, {"mig_gpus": 1, "mig_layout": {"big": 1}},
     {"shared_gpus": 8, "mig_gpus": 1, "mig_layout": {"7g.80gb": 1}}],
)
def test_node_group_refuses_impossible_layouts(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        NodeGroupConfig(name="g", count=1, gpus_per_node=8, **fields)


# ---------------------------------------------------------------- placements


def test_sharing_placements_round_trip() -> None:
    core = Placement("c1", (
        NodeAssignment("n1", 2, fraction=Fraction(1, 2), slots=(0, 0)),
        NodeAssignment("n2", 1, mig_profile="1g.10gb", mig_per_pod=2),
        NodeAssignment("n3", 1, (0,)),
    ))
    plan = placement_plan(core)
    assert plan.nodes[0].gpu_fraction == 0.5 and plan.nodes[0].gpu_slots == [0, 0]
    assert plan.nodes[1].mig_profile == "1g.10gb" and plan.nodes[1].mig_slices == 2
    assert plan.nodes[2].gpu_fraction is None and plan.nodes[2].mig_profile is None
    assert placement_from_plan(plan) == core
    again = PlacementPlan.model_validate_json(plan.model_dump_json())
    assert placement_from_plan(again) == core


def test_old_plans_without_shares_still_read() -> None:
    plan = PlacementPlan.model_validate({"cluster": "c1", "nodes": [{"node": "n1", "pods": 2}]})
    assert placement_from_plan(plan) == Placement("c1", (NodeAssignment("n1", 2),))
    assert NodePods(node="n1", pods=1).mig_slices == 0


# ---------------------------------------------------------------- chargeback


def test_gpu_seconds_count_the_share() -> None:
    ledger = Ledger(7 * 86400.0)
    half = ResourceRequest(gpu_fraction=0.5).gpus_charged
    ledger.admit("h", 1, Admission("q", "t", "a100", half, 2, 0.0))
    slice_ = ResourceRequest(mig_profile="1g.10gb").gpus_charged
    ledger.admit("m", 1, Admission("q", "t", "a100", slice_, 7, 0.0))
    assert ledger.queue_usage("q", 0.0).allocated == {"gpu:a100": pytest.approx(2.0)}
    ledger.start("h", 1, 0.0)
    ledger.start("m", 1, 0.0)
    charge = ledger.end("h", 1, 3600.0, "succeeded").charge
    assert charge is not None and charge.gpus == 1 and charge.gpu_seconds == pytest.approx(3600.0)
    charge = ledger.end("m", 1, 3600.0, "succeeded").charge
    assert charge is not None and charge.gpu_seconds == pytest.approx(3600.0)  # seven 1/7 slices: one GPU-hour


# ---------------------------------------------------------------- the README's GPU sharing tour, in the core


def test_tour_examples_share_one_node_of_the_sharing_cluster() -> None:
    """examples/cluster-sharing.yaml with examples/jobs/mig-inference.yaml and half-gpu.yaml twice: all three
    run at once on the sharing node, the halves on its one shared GPU, team-a charged 1/7 + 1/2 + 1/2."""
    root = Path(__file__).resolve().parents[2] / "examples"
    cfg = load_cluster_file(root / "cluster-sharing.yaml")
    st = SchedulerState(queues=core_queues(cfg), nodes=core_nodes(cfg))
    base = next(m for m in example_messages() if isinstance(m, SubmitJob))
    for i, name in enumerate(["mig-inference", "half-gpu", "half-gpu"]):
        spec = JobSpec.model_validate(yaml.safe_load((root / "jobs" / f"{name}.yaml").read_text()))
        st.submit(job_from_submit(base.model_copy(update={"job_id": f"j{i}", "spec": spec}), priority=100,
                                  submit_time=float(i)))
    result = schedule(st, 10.0, SchedulerConfig())
    admits = {d.job_id: d for d in result.decisions if isinstance(d, Admit)}
    assert set(admits) == {"j0", "j1", "j2"}
    for d in admits.values():
        st.apply(d, 10.0)
    assert {a.node for d in admits.values() for a in d.placement.nodes} == {"east-a100-share-0"}
    assert [a.slots for d in (admits["j1"], admits["j2"]) for a in d.placement.nodes] == [(0,), (0,)]
    assert st.queue_usage("team-a")["gpu:a100-80gb"] == Fraction(1, 7) + Fraction(1, 2) + Fraction(1, 2)
