"""The workload representation every loader produces, and its CSV form.

A workload CSV has the columns ``job_id,submit_time,duration,num_gpus,queue`` and, optionally,
``gpu_type,priority,min_gpus,runtime_estimate,preemptible,checkpointable,after,on_dependency_failure,
fails,roles``. ``submit_time`` and ``duration`` are seconds; ``duration`` is what the job really takes at its
full size and is never shown to the scheduling policy, which sees only ``runtime_estimate``.

Dependencies (a DAG, as ``spec.after`` of a submitted job): ``after`` lists the ids of the workload's jobs
this one waits for, separated by ``;``, each optionally with ``:succeeded`` (the default), ``:finished``
or ``:failed`` (``train;eval:finished``). ``on_dependency_failure`` (``cancel``, the default, or ``fail``)
says how the job ends when a job it waits for ended otherwise; ``fails`` (a boolean) makes a job end
failed after its duration, like ``duration``, unknown to the policy. An unknown id or a cycle is an error
when the file is read.

Roles (a job of several roles, ``JobRoles``): ``roles`` lists the job's roles separated by ``;``, its main
role first, each as ``name:pods:gpus_per_pod`` or ``name:pods:gpus_per_pod:cpu_m:memory_mb``
(``worker:16:8;launcher:1:0:2000:4096``). ``num_gpus`` is then the whole job's GPUs, every role, and
``min_gpus`` those it needs with its main role at its smallest and every companion role. An empty cell is
a job of one role, as every job of a trace is; the column is written only for a workload that has a job
of several roles.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from schemas.jobspec import JobSpec
from services.core.dependencies import On, find_cycle
from services.core.model import ANY_GPU, Role

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "duration", "num_gpus", "queue")
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "gpu_type",
    "priority",
    "min_gpus",
    "runtime_estimate",
    "preemptible",
    "checkpointable",
    "after",
    "on_dependency_failure",
    "fails",
)
ROLES_COLUMN = "roles"
ON_DEPENDENCY_FAILURE = ("cancel", "fail")
_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}


@dataclass(frozen=True, slots=True)
class JobRoles:
    """The roles of a job of several roles: its main role (``main``: ``replicas`` pods of ``gpus_per_pod``
    GPUs, the role that is elastic if any) and the companion roles admitted, charged, placed and preempted
    with it (a launcher, a Ray head, an LWS leader), as the core's ``Job.role`` and ``Job.companions``.

    CPU is in millicores and memory in MiB per pod; 0 is not counted, as for a job of one role."""

    main: str
    replicas: int
    gpus_per_pod: int
    cpu_m: int = 0
    memory_mb: int = 0
    companions: tuple[Role, ...] = ()

    def __post_init__(self) -> None:
        names = [self.main, *(c.name for c in self.companions)]
        if "" in names or len(set(names)) != len(names):
            raise ValueError(f"roles {names}: every role needs a name of its own")
        shapes = [(self.replicas, self.gpus_per_pod, self.cpu_m, self.memory_mb),
                  *((c.replicas, c.gpus_per_pod, c.cpu_m, c.memory_mb) for c in self.companions)]
        if any(pods < 1 or min(rest) < 0 for pods, *rest in shapes):
            raise ValueError(f"roles {names}: a role has at least one pod and no negative GPUs, CPU or memory")

    @property
    def companion_gpus(self) -> int:
        """GPUs of the companion roles (they never grow or shrink)."""
        return sum(c.replicas * c.gpus_per_pod for c in self.companions)

    @property
    def gpus(self) -> int:
        """GPUs of the whole job at full size, every role."""
        return self.replicas * self.gpus_per_pod + self.companion_gpus

    @property
    def several(self) -> bool:
        """Whether the job has companion roles besides its main one."""
        return bool(self.companions)


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    """One job of a workload: when it arrives, how long it really runs, what it asks for.

    A job of one role (``roles`` None, every trace's jobs) is split into pods by the simulator
    (``pod_shape``); a job of several roles gives its roles, and ``num_gpus`` and ``min_gpus`` then count
    every role's GPUs."""

    job_id: str
    submit_time: float
    duration: float
    num_gpus: int
    queue: str
    gpu_type: str = ANY_GPU
    priority: int = 0
    min_gpus: int | None = None  # elastic jobs may run with as few as this many GPUs
    runtime_estimate: float | None = None
    preemptible: bool = True
    checkpointable: bool = False
    after: tuple[tuple[str, On], ...] = ()  # (job id, the outcome waited for)
    on_dependency_failure: str = "cancel"  # or "fail": how the job ends when a dependency cannot hold
    fails: bool = False  # the job ends failed after its duration (the policy is not told)
    roles: JobRoles | None = None  # None: one role, split into pods by the simulator
    #: the job's wire spec, when the workload is rebuilt from Muster's own log (``services.simulator.replay``):
    #: the simulator then builds the core job from it as the queue manager does, with everything the spec asks
    #: (pods and roles, GPU sharing, CPU and memory, topology, node selector, cluster, deadlines, elasticity);
    #: ``num_gpus``, ``min_gpus``, ``gpu_type`` and ``roles`` then only describe it (reports, the CSV form).
    #: A workload file has none.
    spec: JobSpec | None = field(default=None, compare=False)
    user: str = ""  # who submitted it (per-user limits); "" for a trace's jobs
    tenant: str = ""  # "" : its queue's tenant

    def __post_init__(self) -> None:
        roles = self.roles
        if roles is None:
            return
        if self.num_gpus != roles.gpus:
            raise ValueError(f"job {self.job_id!r}: num_gpus {self.num_gpus} is not its roles' {roles.gpus} GPUs")
        if self.min_gpus is not None and not (roles.companion_gpus < self.min_gpus <= self.num_gpus
                                              and roles.gpus_per_pod):
            raise ValueError(f"job {self.job_id!r}: min_gpus of a job of several roles counts its companion roles' "
                             f"{roles.companion_gpus} GPUs and some of its main role's")

    @property
    def main_min_gpus(self) -> int | None:
        """GPUs of the main role at its smallest (``min_gpus`` less the companion roles' GPUs)."""
        if self.min_gpus is None or self.roles is None:
            return self.min_gpus
        return self.min_gpus - self.roles.companion_gpus


@dataclass(frozen=True, slots=True)
class Workload:
    """An arrival-ordered list of jobs with a name for reports."""

    name: str
    jobs: tuple[WorkloadJob, ...]

    @property
    def queues(self) -> list[str]:
        return sorted({j.queue for j in self.jobs})


def _parse_bool(value: str, column: str, line: int) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"line {line}: {column} must be a boolean, got {value!r}")


def _optional(row: dict[str, str], column: str) -> str | None:
    value = row.get(column)
    if value is None:
        return None
    value = value.strip()
    return value or None


def _parse_after(value: str, line: int) -> tuple[tuple[str, On], ...]:
    out: list[tuple[str, On]] = []
    for part in value.split(";"):
        part = part.strip()
        if not part:
            continue
        job_id, _, on = part.partition(":")
        try:
            out.append((job_id.strip(), On(on.strip() or "succeeded")))
        except ValueError:
            raise ValueError(f"line {line}: after: {part!r} waits on {on!r}, not succeeded, finished or "
                             "failed") from None
    if len({j for j, _ in out}) != len(out):
        raise ValueError(f"line {line}: after names a job more than once")
    return tuple(out)


def parse_roles(value: str) -> JobRoles:
    """The ``roles`` cell of a workload CSV: ``name:pods:gpus_per_pod[:cpu_m:memory_mb]`` separated by ``;``,
    the main role first."""
    roles: list[Role] = []
    for part in value.split(";"):
        part = part.strip()
        if not part:
            continue
        name, *numbers = (f.strip() for f in part.split(":"))
        if len(numbers) not in (2, 4):
            raise ValueError(f"roles: {part!r} is not name:pods:gpus_per_pod or name:pods:gpus_per_pod:cpu_m:memory_mb")
        try:
            pods, gpus, cpu_m, memory_mb = (int(n) for n in (*numbers, "0", "0")[:4])
        except ValueError:
            raise ValueError(f"roles: {part!r} has a count that is not a whole number") from None
        roles.append(Role(name=name, replicas=pods, gpus_per_pod=gpus, cpu_m=cpu_m, memory_mb=memory_mb))
    if not roles:
        raise ValueError("roles: no role given")
    main = roles[0]
    return JobRoles(main=main.name, replicas=main.replicas, gpus_per_pod=main.gpus_per_pod, cpu_m=main.cpu_m,
                    memory_mb=main.memory_mb, companions=tuple(roles[1:]))


def format_roles(roles: JobRoles) -> str:
    """The ``roles`` cell ``parse_roles`` reads back unchanged."""
    def one(name: str, pods: int, gpus: int, cpu_m: int, memory_mb: int) -> str:
        return f"{name}:{pods}:{gpus}" + (f":{cpu_m}:{memory_mb}" if cpu_m or memory_mb else "")

    return ";".join([one(roles.main, roles.replicas, roles.gpus_per_pod, roles.cpu_m, roles.memory_mb),
                     *(one(c.name, c.replicas, c.gpus_per_pod, c.cpu_m, c.memory_mb) for c in roles.companions)])


def _job_from_row(row: dict[str, str], line: int) -> WorkloadJob:
    try:
        job = WorkloadJob(
            job_id=row["job_id"].strip(),
            submit_time=float(row["submit_time"]),
            duration=float(row["duration"]),
            num_gpus=int(row["num_gpus"]),
            queue=row["queue"].strip(),
        )
        gpu_type = _optional(row, "gpu_type")
        priority = _optional(row, "priority")
        min_gpus = _optional(row, "min_gpus")
        estimate = _optional(row, "runtime_estimate")
        preemptible = _optional(row, "preemptible")
        checkpointable = _optional(row, "checkpointable")
        after = _optional(row, "after")
        on_failure = _optional(row, "on_dependency_failure") or "cancel"
        fails = _optional(row, "fails")
        roles = _optional(row, ROLES_COLUMN)
        if on_failure not in ON_DEPENDENCY_FAILURE:
            raise ValueError(f"on_dependency_failure must be cancel or fail, got {on_failure!r}")
        job = replace(
            job,
            gpu_type=gpu_type if gpu_type is not None else ANY_GPU,
            priority=int(priority) if priority is not None else 0,
            min_gpus=int(min_gpus) if min_gpus is not None else None,
            runtime_estimate=float(estimate) if estimate is not None else None,
            preemptible=_parse_bool(preemptible, "preemptible", line) if preemptible is not None else True,
            checkpointable=(
                _parse_bool(checkpointable, "checkpointable", line) if checkpointable is not None else False
            ),
            after=_parse_after(after, line) if after is not None else (),
            on_dependency_failure=on_failure,
            fails=_parse_bool(fails, "fails", line) if fails is not None else False,
            roles=parse_roles(roles) if roles is not None else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"line {line}: {exc}") from exc
    if job.duration < 0 or job.num_gpus < 0 or job.submit_time < 0:
        raise ValueError(f"line {line}: submit_time, duration and num_gpus must not be negative")
    if job.min_gpus is not None and not 0 < job.min_gpus <= job.num_gpus:
        raise ValueError(f"line {line}: min_gpus must be between 1 and num_gpus")
    return job


def read_workload_csv(path: str | Path) -> Workload:
    """Read a workload CSV; raises ``ValueError`` naming the file and line on bad input."""
    p = Path(path)
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{p}: missing columns {missing}")
        try:
            jobs = [_job_from_row(row, i + 2) for i, row in enumerate(reader)]
        except ValueError as exc:
            raise ValueError(f"{p}: {exc}") from exc
    ids = [j.job_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{p}: duplicate job_id values")
    try:
        check_dependencies(jobs)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from exc
    return Workload(name=p.stem, jobs=sort_jobs(jobs))


def check_dependencies(jobs: Sequence[WorkloadJob]) -> None:
    """``ValueError`` when a job waits for a job the workload has not got, or the jobs wait in a cycle."""
    ids = {j.job_id for j in jobs}
    for job in jobs:
        unknown = [dep for dep, _ in job.after if dep not in ids]
        if unknown:
            raise ValueError(f"job {job.job_id!r} waits for {', '.join(map(repr, unknown))}, which the workload "
                             "has not got (after names job ids of the same file)")
    cycle = find_cycle({j.job_id: [dep for dep, _ in j.after] for j in jobs if j.after})
    if cycle is not None:
        raise ValueError(f"the jobs wait for each other in a cycle: {' -> '.join(cycle)}")


def _fmt(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def write_workload_csv(workload: Workload, path: str | Path) -> None:
    """Write a workload in the CSV form ``read_workload_csv`` reads back unchanged (the ``roles`` column
    only when a job has roles)."""
    with_roles = any(j.roles is not None for j in workload.jobs)
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(REQUIRED_COLUMNS + OPTIONAL_COLUMNS + ((ROLES_COLUMN,) if with_roles else ()))
        for j in workload.jobs:
            roles = ([format_roles(j.roles) if j.roles is not None else ""] if with_roles else [])
            writer.writerow(
                [
                    j.job_id,
                    _fmt(j.submit_time),
                    _fmt(j.duration),
                    j.num_gpus,
                    j.queue,
                    j.gpu_type,
                    j.priority,
                    "" if j.min_gpus is None else j.min_gpus,
                    "" if j.runtime_estimate is None else _fmt(j.runtime_estimate),
                    str(j.preemptible).lower(),
                    str(j.checkpointable).lower(),
                    ";".join(dep if on is On.SUCCEEDED else f"{dep}:{on.value}" for dep, on in j.after),
                    j.on_dependency_failure,
                    str(j.fails).lower(),
                    *roles,
                ]
            )


def sort_jobs(jobs: Iterable[WorkloadJob]) -> tuple[WorkloadJob, ...]:
    """Arrival order; jobs submitted at the same second keep their input order."""
    return tuple(sorted(jobs, key=lambda j: j.submit_time))


def subset(
    workload: Workload,
    *,
    window: tuple[float, float] | None = None,
    limit: int | None = None,
    sample: float | None = None,
    seed: int = 0,
) -> Workload:
    """Jobs submitted in ``window`` (seconds after the first arrival), optionally sampled, first ``limit``.

    Submit times are shifted so the first kept job arrives at 0. Sampling keeps each job with
    probability ``sample`` using ``random.Random(seed)``. A kept job no longer waits for a job left out.
    """
    jobs: Sequence[WorkloadJob] = workload.jobs
    if not jobs:
        return workload
    origin = jobs[0].submit_time
    if window is not None:
        start, end = window
        jobs = [j for j in jobs if start <= j.submit_time - origin < end]
    if sample is not None:
        rng = random.Random(seed)
        jobs = [j for j in jobs if rng.random() < sample]
    if limit is not None:
        jobs = list(jobs)[:limit]
    if not jobs:
        return Workload(workload.name, ())
    shift = jobs[0].submit_time
    kept = {j.job_id for j in jobs}  # a dependency left out counts as met: its condition is dropped
    return Workload(workload.name, tuple(
        replace(j, submit_time=j.submit_time - shift, after=tuple(a for a in j.after if a[0] in kept))
        for j in jobs))


def pod_shape(num_gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """Split a job of ``num_gpus`` GPUs into ``(replicas, gpus_per_pod)`` pods.

    A pod gets the largest divisor of ``num_gpus`` that fits on one node, so the gang asks for
    exactly ``num_gpus`` GPUs: 8 -> 1x8, 16 -> 2x8, 12 -> 2x6, 20 -> 4x5 on 8-GPU nodes. A job
    without GPUs is one pod with none.
    """
    if num_gpus <= 0:
        return 1, 0
    cap = max(1, gpus_per_node)
    if num_gpus <= cap:
        return 1, num_gpus
    per_pod = max(d for d in range(1, cap + 1) if num_gpus % d == 0)
    return num_gpus // per_pod, per_pod


def min_replicas(min_gpus: int | None, gpus_per_pod: int, replicas: int) -> int | None:
    """The elastic lower bound in pods for a job that may run with ``min_gpus`` GPUs."""
    if min_gpus is None or gpus_per_pod == 0:
        return None
    low = max(1, math.ceil(min_gpus / gpus_per_pod))
    return low if low < replicas else None
