"""The queue manager with GPU sharing (no broker): fractional and MIG submissions become core jobs, their
admissions carry the shares, the quota book charges them, and a rebuild from the records restores the
fractions on each shared GPU."""

from __future__ import annotations

import uuid
from fractions import Fraction

from schemas.capacity import NodeState, NodeStateObserved
from schemas.decisions import JobAdmitted
from schemas.jobs import JobRecord, JobRecorded
from schemas.jobspec import ResourceRequest
from schemas.runs import RunStarted
from schemas.status import JobStatusChanged
from services.cli.render import gpus_text
from services.core import SchedulerConfig
from services.gateway.presenters import job_from_status
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import QueueState
from services.queue_manager.recovery import rebuild
from tests.queue_manager.builders import CLUSTER, NOW, T0, config_messages, of_type, run_fields, submit

CFG = SchedulerConfig(min_runtime_s=0.0)
NODE = "east-share-0"


def _state() -> QueueState:
    qs = QueueState()
    for msg in config_messages(4):
        qs.fold_config(msg.key(), msg)
    state = NodeState(cluster=CLUSTER, node=NODE, gpu_type="a100", gpus_allocatable=1, gpus_shared=1,
                      mig={"1g.10gb": 7}, cpu_m=96_000, memory_mb=1 << 20)
    n = NodeStateObserved(state=state, observed_at=T0)
    qs.fold_capacity(n.key(), n)
    return qs


def _sharing(job_id: str, offset_s: float, **resources: object) -> object:
    msg = submit(job_id, offset_s=offset_s)
    res = ResourceRequest(gpu_type="a100", cpu="1", memory="1Gi", **resources)  # type: ignore[arg-type]
    spec = msg.spec.model_copy(update={"template": msg.spec.template.model_copy(update={"resources": res})})
    return msg.model_copy(update={"spec": spec})


def test_sharing_jobs_are_admitted_with_their_shares_and_charged_them() -> None:
    qs = _state()
    records: dict[str, JobRecord] = {}

    def keep(outs: list) -> None:  # type: ignore[type-arg]
        for rec in of_type(outs, JobRecorded):
            records[rec.job_id] = rec.record

    for i, (job_id, res) in enumerate([("mig", {"mig_profile": "1g.10gb", "mig_slices": 2}),
                                       ("h1", {"gpu_fraction": 0.5}), ("h2", {"gpu_fraction": 0.25})]):
        keep(on_input(qs, _sharing(job_id, i, **res), uuid.uuid4().hex, NOW))  # type: ignore[arg-type]
    out = run_cycle(qs, NOW, CFG)
    keep([*out.records, *out.decisions, *out.statuses])
    admitted = {a.job_id: a for a in of_type(out.decisions, JobAdmitted)}
    assert set(admitted) == {"mig", "h1", "h2"}
    [mig] = admitted["mig"].placement.nodes
    assert (mig.node, mig.mig_profile, mig.mig_slices, mig.gpu_fraction) == (NODE, "1g.10gb", 2, None)
    [h1] = admitted["h1"].placement.nodes
    [h2] = admitted["h2"].placement.nodes
    assert (h1.gpu_fraction, h1.gpu_slots, h2.gpu_fraction, h2.gpu_slots) == (0.5, [0], 0.25, [0])
    assert qs.sched.queue_usage("team-a")["gpu:a100"] == Fraction(2, 7) + Fraction(3, 4)
    assert qs.sched.free_gpus(NODE) == 0  # the shared GPU holds fractions
    shown = {s.job_id: (s.gpus, s.gpu_share) for s in of_type(out.statuses, JobStatusChanged)}
    assert shown == {"mig": (0, round(2 / 7, 4)), "h1": (0, 0.5), "h2": (0, 0.25)}  # not "0 GPUs"
    assert [gpus_text(job_from_status(s)) for s in of_type(out.statuses, JobStatusChanged)
            if s.job_id == "mig"] == ["0.29 shared"]
    for job_id, adm in admitted.items():
        keep(on_input(qs, RunStarted(**run_fields(job_id, adm.attempt), pods_running=1, pods_total=1),
                      uuid.uuid4().hex, NOW))

    fresh = _state()
    rebuild(fresh, [(r, None) for r in records.values()])
    assert fresh.sched.queue_usage("team-a") == qs.sched.queue_usage("team-a")
    assert fresh.sched.cap.shared[NODE] == qs.sched.cap.shared[NODE] == (Fraction(3, 4),)
    assert fresh.sched.cap.mig_free[NODE] == qs.sched.cap.mig_free[NODE] == {"1g.10gb": 5}
    assert fresh.sched.free_gpus(NODE) == 0
