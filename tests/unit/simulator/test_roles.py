"""Jobs of several roles in the simulator: admitted, charged, placed and preempted with every role, and
replayed from the log with the roles they ran with."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from schemas.config import MusterConfig
from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest, RoleSpec, WorkloadObject
from services.core.model import Role
from services.simulator.cli import sim
from services.simulator.engine import SimOptions, Simulator, simulate
from services.simulator.policies import policy_config
from services.simulator.replay import reconstruct, workload_roles
from services.simulator.report import build_report
from services.simulator.workload import (
    JobRoles,
    WorkloadJob,
    format_roles,
    parse_roles,
    read_workload_csv,
    write_workload_csv,
)
from services.spec.cluster_file import parse_cluster_yaml
from services.spec.core_types import job_from_submit
from tests.builders.jobspecs import job_spec
from tests.unit.simulator.builders import job, workload
from tests.unit.simulator.log_builders import Log, at


def cluster(nodes: int = 1, cpu: int = 16, quota: int = 64) -> MusterConfig:
    """``nodes`` nodes of 8 A100s and ``cpu`` cores; queue research with ``quota`` A100s, no cohort."""
    return parse_cluster_yaml(
        "clusters:\n  - name: c\n    node_groups:\n"
        f"      - {{name: g, count: {nodes}, gpus_per_node: 8, gpu_type: a100, cpu: {cpu}}}\n"
        f"queues:\n  - name: research\n    quotas:\n      gpu:a100: {{nominal: {quota}}}\n"
    )


def roles(main: tuple[str, int, int, int], *companions: tuple[str, int, int, int]) -> JobRoles:
    """Roles from ``(name, pods, gpus per pod, cores per pod)``, the main role first."""
    name, pods, gpus, cores = main
    return JobRoles(main=name, replicas=pods, gpus_per_pod=gpus, cpu_m=cores * 1000, companions=tuple(
        Role(name=n, replicas=p, gpus_per_pod=g, cpu_m=c * 1000) for n, p, g, c in companions))


def role_job(job_id: str, submit: float, duration: float, shape: JobRoles, **kw: Any) -> WorkloadJob:
    return job(job_id, submit, duration, shape.gpus, roles=shape, **kw)


# ---------------------------------------------------------------- the simulator


@dataclass(frozen=True)
class Case:
    name: str
    config: MusterConfig
    jobs: tuple[WorkloadJob, ...]
    starts: dict[str, float]
    ends: dict[str, float]
    gpu_seconds: dict[str, float]


CASES = [
    Case("launchers without GPUs that fit beside each other by CPU: both start at once",
         cluster(cpu=32),
         (role_job("a", 0, 100, roles(("worker", 1, 4, 4), ("launcher", 1, 0, 10))),
          role_job("b", 0, 50, roles(("worker", 1, 4, 4), ("launcher", 1, 0, 10)))),
         starts={"a": 0.0, "b": 0.0}, ends={"a": 100.0, "b": 50.0}, gpu_seconds={"a": 400.0, "b": 200.0}),
    Case("a launcher without GPUs that finds no CPU left: the job waits although its GPUs are free",
         cluster(cpu=16),
         (role_job("a", 0, 100, roles(("worker", 1, 4, 4), ("launcher", 1, 0, 10))),
          role_job("b", 0, 50, roles(("worker", 1, 4, 4), ("launcher", 1, 0, 10)))),
         starts={"a": 0.0, "b": 100.0}, ends={"a": 100.0, "b": 150.0}, gpu_seconds={"a": 400.0, "b": 200.0}),
    Case("the main role alone fits in the quota: starts at once",
         cluster(nodes=2, quota=8),
         (job("other", 0, 100, 4), role_job("rl", 0, 50, roles(("learner", 1, 4, 0)))),
         starts={"other": 0.0, "rl": 0.0}, ends={"other": 100.0, "rl": 50.0},
         gpu_seconds={"other": 400.0, "rl": 200.0}),
    Case("a companion with GPUs over the quota: the job waits until the quota has room for every role",
         cluster(nodes=2, quota=8),
         (job("other", 0, 100, 4), role_job("rl", 0, 50, roles(("learner", 1, 4, 0), ("actors", 2, 1, 0)))),
         starts={"other": 0.0, "rl": 100.0}, ends={"other": 100.0, "rl": 150.0},
         gpu_seconds={"other": 400.0, "rl": 300.0}),
    Case("a companion with GPUs holds them for the whole run: GPU-seconds count every role, the work the main's",
         cluster(nodes=3),
         (role_job("big", 0, 100, roles(("worker", 2, 8, 0), ("ps", 1, 4, 0), ("launcher", 1, 0, 2))),),
         starts={"big": 0.0}, ends={"big": 100.0}, gpu_seconds={"big": 20 * 100.0}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_role_is_admitted_charged_and_counted(case: Case) -> None:
    result = simulate(workload(*case.jobs), case.config, policy_config("fifo"))
    recs = result.records
    assert {k: r.first_start for k, r in recs.items()} == case.starts
    assert {k: r.end for k, r in recs.items()} == case.ends
    assert {k: r.gpu_seconds for k, r in recs.items()} == pytest.approx(case.gpu_seconds)
    held = 0
    for _, _, delta in sorted(result.timeline, key=lambda e: e[0]):
        held += delta
        assert 0 <= held <= result.capacity_gpus
    assert held == 0


def test_the_core_job_carries_the_roles() -> None:
    shape = roles(("worker", 2, 8, 6), ("launcher", 1, 0, 2))
    sim = Simulator(workload(role_job("mpi", 0, 10, shape, min_gpus=8)), cluster(nodes=2), policy_config("muster"))
    core = sim.run().records["mpi"].job
    assert (core.role, core.replicas, core.gpus_per_pod, core.cpu_m) == ("worker", 2, 8, 6000)
    assert core.companions == (Role("launcher", replicas=1, gpus_per_pod=0, cpu_m=2000),)
    assert core.min_replicas == 1  # min_gpus 8: one worker pod and the launcher
    assert core.total_gpus == 16


def test_a_preempted_job_of_several_roles_stops_whole_and_holds_every_role_until_it_stops() -> None:
    low = role_job("low", 0, 1000, roles(("worker", 1, 6, 0), ("ps", 1, 2, 0)), checkpointable=True)
    wl = workload(low, job("high", 400, 100, 8, priority=100))
    opts = SimOptions(checkpoint_s=30.0, grace_period_s=60.0)
    result = simulate(wl, cluster(), policy_config("muster"), options=opts)
    rec, high = result.records["low"], result.records["high"]
    assert rec.preemptions == 1 and high.first_start == 430.0 and high.end == 530.0
    # 6,000 GPU-seconds of the worker's work: 430 s done until it stopped (30 s to checkpoint), 570 s after 530;
    # every role's 8 GPUs held all along
    assert rec.end == 530.0 + 570.0
    assert rec.gpu_seconds == pytest.approx(8 * 430.0 + 8 * 570.0)
    assert rec.rate == 0 and sum(d for _, _, d in result.timeline) == 0


def test_an_elastic_main_role_grows_beside_its_companion() -> None:
    # other holds one of two nodes 0-100; the trainer starts with one of its two workers and its 0-GPU
    # coordinator at 10, then grows: 1,600 GPU-seconds of work, 720 done by 100, 880 at 16 GPUs -> 155
    shape = roles(("trainer", 2, 8, 0), ("coordinator", 1, 0, 1))
    wl = workload(job("other", 0, 100, 8), role_job("elastic", 10, 100, shape, min_gpus=8))
    result = simulate(wl, cluster(nodes=2), policy_config("muster"))
    rec = result.records["elastic"]
    assert rec.first_start == 10.0 and rec.end == 155.0
    assert rec.gpu_seconds == pytest.approx(1600.0)
    assert rec.job.min_replicas == 1


def test_the_report_counts_the_jobs_of_several_roles() -> None:
    wl = workload(job("plain", 0, 10, 8), role_job("one", 0, 10, roles(("main", 1, 8, 0))),
                  role_job("two", 0, 10, roles(("worker", 1, 8, 0), ("launcher", 1, 0, 1))))
    report = build_report(simulate(wl, cluster(nodes=3), policy_config("fifo")))
    assert report["jobs_several_roles"] == 1
    assert report["jobs_completed"] == 3
    assert report["per_queue"]["research"]["gpu_hours"] == pytest.approx(3 * 80 / 3600)


def test_a_workload_of_one_role_reports_none() -> None:
    report = build_report(simulate(workload(job("a", 0, 10, 8)), cluster(), policy_config("fifo")))
    assert report["jobs_several_roles"] == 0


# ---------------------------------------------------------------- the workload and its CSV


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"num_gpus": 8}, "num_gpus 8 is not its roles' 10 GPUs"),
        ({"min_gpus": 2}, "min_gpus of a job of several roles"),
        ({"min_gpus": 11}, "min_gpus of a job of several roles"),
    ],
)
def test_a_job_whose_gpus_are_not_its_roles_is_refused(kw: dict[str, int], message: str) -> None:
    shape = roles(("worker", 1, 8, 0), ("ps", 1, 2, 0))
    with pytest.raises(ValueError, match=message):
        WorkloadJob(**{"job_id": "j", "submit_time": 0.0, "duration": 1.0, "num_gpus": 10, "queue": "q",
                       "roles": shape, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "companions",
    [(Role("worker"),), (Role(""),), (Role("ps", replicas=0),), (Role("ps", gpus_per_pod=-1),)],
    ids=["same name as the main role", "no name", "no pods", "negative GPUs"],
)
def test_roles_that_cannot_be_are_refused(companions: tuple[Role, ...]) -> None:
    with pytest.raises(ValueError, match="roles"):
        JobRoles(main="worker", replicas=1, gpus_per_pod=8, companions=companions)


def test_roles_round_trip_through_the_csv(tmp_path: Path) -> None:
    shape = JobRoles(main="worker", replicas=16, gpus_per_pod=8, companions=(
        Role("launcher", replicas=1, gpus_per_pod=0, cpu_m=2000, memory_mb=4096),))
    assert format_roles(shape) == "worker:16:8;launcher:1:0:2000:4096"
    assert parse_roles(format_roles(shape)) == shape
    original = workload(role_job("mpi", 0, 60, shape, min_gpus=64), job("plain", 1, 30, 2))
    path = tmp_path / "w.csv"
    write_workload_csv(original, path)
    assert path.read_text(encoding="utf-8").splitlines()[0].endswith(",fails,roles")
    assert read_workload_csv(path).jobs == original.jobs


def test_a_workload_of_one_role_writes_no_roles_column(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    write_workload_csv(workload(job("plain", 0, 30, 2)), path)
    assert path.read_text(encoding="utf-8").splitlines()[0].endswith(",fails")


@pytest.mark.parametrize(
    ("cell", "message"),
    [("worker:2", "not name:pods:gpus_per_pod"), ("worker:two:8", "not a whole number"),
     ("worker:1:8;worker:1:0", "a name of its own"), ("worker:1:4", "num_gpus 8 is not its roles' 4")],
)
def test_a_bad_roles_cell_is_refused_with_its_line(tmp_path: Path, cell: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"job_id,submit_time,duration,num_gpus,queue,roles\na,0,1,8,q,{cell}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"line 2: .*{message}"):
        read_workload_csv(path)


# ---------------------------------------------------------------- the what-if replay


def _template(gpus: int, cpu: str) -> PodTemplate:
    return PodTemplate(image="img", resources=ResourceRequest(gpus=gpus, gpu_type="a100" if gpus else None, cpu=cpu,
                                                              memory="4Gi"))


def _mpi_spec(name: str, queue: str, workers: int = 2, low: int | None = None) -> JobSpec:
    return job_spec(
        name, queue,
        roles=[RoleSpec(name="launcher", replicas=1, template=_template(0, "2")),
               RoleSpec(name="worker", replicas=workers, min_replicas=low, template=_template(8, "16")),
               RoleSpec(name="ps", replicas=1, template=_template(1, "4"))],
        workload=WorkloadObject(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name=name),
    )


def _ran(spec: JobSpec, admitted: float, ended: float) -> tuple[Log, SubmitJob]:
    """A log where job ``mpi`` of ``spec`` was submitted at 0, admitted whole and started at ``admitted``
    and succeeded at ``ended``."""
    log = Log().cluster(nodes=3, quota=24)
    msg = SubmitJob(job_id="mpi", tenant="team-a", user="u", spec=spec, submitted_at=at(0))
    log.specs["mpi"], log.submitted["mpi"] = spec, 0.0
    log.add(msg, 0)
    plan = PlacementPlan(cluster="east", nodes=[NodePods(node=f"east-a100-{i}", pods=r.replicas, role=r.name)
                                                for i, r in enumerate(spec.roles)])
    log.add(JobAdmitted(job_id="mpi", attempt=0, tenant="team-a", queue=spec.queue, namespace=spec.queue,
                        priority=100, replicas=spec.main_replicas, placement=plan, spec=spec), admitted)
    return log.start("mpi", admitted).succeed("mpi", ended), msg


@pytest.mark.parametrize("low", [None, 1], ids=["fixed", "elastic workers"])
def test_a_replayed_job_of_several_roles_has_the_roles_it_ran_with(low: int | None) -> None:
    log, msg = _ran(_mpi_spec("mpi", "team-a", low=low), admitted=5, ended=105)
    recon = reconstruct(log.envelopes, as_of=at(1000))
    assert recon.jobs["mpi"].gpus == 17 and recon.jobs["mpi"].gpu_seconds == pytest.approx(17 * 100.0)
    (wjob,) = recon.workload.jobs
    assert wjob.roles == JobRoles(main="worker", replicas=2, gpus_per_pod=8, cpu_m=16_000, memory_mb=4096,
                                  companions=(Role("launcher", 1, 0, 2000, 4096), Role("ps", 1, 1, 4000, 4096)))
    assert (wjob.num_gpus, wjob.gpu_type, wjob.duration) == (17, "a100", 100.0)
    assert wjob.min_gpus == (None if low is None else 9)
    assert recon.counts()["several_roles"] == 1
    # the core job the replay schedules is the one the queue manager scheduled
    real = job_from_submit(msg, priority=0, submit_time=0.0)
    replayed = Simulator(recon.workload, recon.cluster, policy_config("muster")).run().records["mpi"]
    assert replayed.job.companions == tuple(replace(c, topology=None) for c in real.companions)
    for field in ("role", "replicas", "gpus_per_pod", "min_replicas", "cpu_m", "memory_mb", "gpu_type", "total_gpus"):
        assert getattr(replayed.job, field) == getattr(real, field), field
    assert replayed.end is not None and replayed.gpu_seconds == pytest.approx(17 * 100.0)


def test_a_replayed_job_of_one_role_has_no_roles() -> None:
    log = Log().cluster().submit("j", "team-a", 0, pods=2).admit("j", 0).start("j", 0).succeed("j", 50)
    recon = reconstruct(log.envelopes, as_of=at(1000))
    (wjob,) = recon.workload.jobs
    assert wjob.roles is None and wjob.num_gpus == 16
    assert "several_roles" not in recon.counts()


def test_workload_roles_of_a_spec_given_as_replicas_and_template() -> None:
    assert workload_roles(Log().submit("j", "team-a", 0).specs["j"]) is None
    shape = workload_roles(_mpi_spec("mpi", "team-a", workers=4))
    assert shape is not None and shape.several and shape.gpus == 33 and shape.main == "worker"


def test_muster_sim_reads_roles_from_a_workload_csv_and_says_how_many_jobs_had_several(tmp_path: Path) -> None:
    csv, report = tmp_path / "w.csv", tmp_path / "r.json"
    csv.write_text("job_id,submit_time,duration,num_gpus,queue,roles\n"
                   "mpi,0,100,8,research,worker:1:6;ps:1:2\n"
                   "plain,0,100,8,research,\n", encoding="utf-8")
    config = tmp_path / "cluster.yaml"
    config.write_text("clusters:\n  - name: c\n    node_groups:\n"
                      "      - {name: g, count: 1, gpus_per_node: 8, gpu_type: a100}\n"
                      "queues:\n  - name: research\n    quotas:\n      gpu:a100: {nominal: 8}\n", encoding="utf-8")
    out = CliRunner().invoke(sim, ["--workload", str(csv), "--cluster", str(config), "--policy", "fifo",
                                   "--report", str(report), "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "fifo: jobs 2/2 completed (1 of several roles)," in out.output
    data = json.loads(report.read_text())
    assert data["jobs_several_roles"] == 1
    assert data["makespan_s"] == 200.0  # one 8-GPU node: the two 8-GPU jobs run one after the other
    assert data["per_queue"]["research"]["gpu_hours"] == pytest.approx(2 * 800 / 3600)
