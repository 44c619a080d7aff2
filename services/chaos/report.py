"""What a chaos run found: violated invariants and the counts of what it did."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which check, the job concerned (if one), and what was seen."""

    check: str
    job_id: str | None
    detail: str


@dataclass
class FaultCounts:
    kills: dict[str, int] = field(default_factory=dict)
    broker_restarts: int = 0
    api_outages: int = 0
    watch_drops: int = 0
    watches_closed: int = 0
    unexpected_exits: dict[str, int] = field(default_factory=dict)
    failed_starts: dict[str, int] = field(default_factory=dict)  # restarts that exited before healthy
    #: restarts not healthy within the expected bound (system.HEALTHY_WITHIN_S) and waited for longer, and
    #: broker kills whose partitions took longer than system.FAILOVER_WITHIN_S to be led elsewhere
    slow_recoveries: dict[str, int] = field(default_factory=dict)
    slow_failovers: int = 0
    #: kill -9 of a broker of a cluster, by what it was ("leader": of most partitions, "controller": active)
    broker_kills: dict[str, int] = field(default_factory=dict)
    #: seconds from each such kill until every partition of Muster's topics had a live leader again
    broker_failover_s: dict[str, list[float]] = field(default_factory=dict)
    #: seconds from each service kill's restart until the service answered healthy again
    kill_recovery_s: dict[str, list[float]] = field(default_factory=dict)
    #: per service, live processes that a kill ended with SIGKILL (a kill that finds no live process is
    #: not counted here), and the new processes that answered healthy after such a kill
    processes_killed: dict[str, int] = field(default_factory=dict)
    processes_restarted: dict[str, int] = field(default_factory=dict)
    #: per role, killed brokers started again and registered with the cluster
    brokers_restarted_after_kill: dict[str, int] = field(default_factory=dict)


@dataclass
class ChaosReport:
    """The JSON the harness prints; ``ok`` is False when any invariant was violated."""

    seed: int
    jobs_planned: int
    brokers: int = 1
    jobs_submitted: int = 0
    final_states: dict[str, int] = field(default_factory=dict)
    cancels_requested: int = 0
    cancels_accepted: int = 0
    preemptions: int = 0
    gang_restarts: int = 0
    admissions: int = 0
    events_read: int = 0
    dead_letters: int = 0
    #: dead letters by ``<source topic>: <reason>``
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)
    #: whether the workload asked for preemptions (``coverage.asks_for_preemption``)
    preemptions_asked: bool = False
    cancels_planned: int = 0
    #: planned cancels sent sooner than their job's run time: they must find it open
    cancels_on_open_jobs: int = 0
    peak_gpus_admitted: int = 0
    finished_objects_kept: int = 0  # completed Jobs and pods of ended jobs (hold nothing; not orphans)
    gateway_retries: int = 0
    faults: FaultCounts = field(default_factory=FaultCounts)
    wall_time_s: float = 0.0
    drain_time_s: float = 0.0
    checks: dict[str, int] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, check: str, found: list[Violation]) -> None:
        """Record one check's findings (an empty list is a passed check)."""
        self.checks[check] = len(found)
        self.violations.extend(found)

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        body["ok"] = self.ok
        body["faults"]["kills_total"] = sum(self.faults.kills.values())
        return body
