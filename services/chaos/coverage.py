"""Coverage: did the run exercise what it claims? The invariant checks (``checks``, ``ledger``,
``cluster_checks``) loop over what was read and pass when nothing was; these fail instead when the log
or the run's own record is missing what the run was meant to produce: a placement for every admitted
job, a pod for every job that ran, every planned fault carried out (the process killed and seen
healthy again), preemptions and cancels when the workload asked for them, a status history with no
record compacted away, and every dead letter, each named with its reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from schemas.decisions import JobAdmitted
from schemas.status import JobStatusChanged
from services.chaos.eventlog import DeadLetter, LoggedEvent
from services.chaos.faults import BROKER, BROKER_KILL, KILL, OUTAGE, WATCHES, Fault
from services.chaos.pods import PodLife
from services.chaos.report import FaultCounts, Violation
from services.chaos.workload import PRIORITIES, PlannedJob

#: a job whose status reached one of these was admitted (it needs a placement on the decisions topic)
ADMITTED_STATES = frozenset({"admitted", "running", "preempting", "succeeded"})
#: a job whose status reached one of these had pods running (it needs a pod in the cluster's record)
RAN_STATES = frozenset({"running", "succeeded"})


def check_placements(submitted: list[str], histories: dict[str, list[JobStatusChanged]],
                     events: list[LoggedEvent]) -> list[Violation]:
    """Every job whose status says it was admitted has a ``JobAdmitted`` (its placement) in the log, and a
    run that submitted jobs recorded at least one placement."""
    placed = {e.envelope.payload.job_id for e in events if isinstance(e.envelope.payload, JobAdmitted)}
    found = [Violation("no_placement", job, "status says admitted (states "
                       f"{sorted({s.state for s in histories[job]})}) but no JobAdmitted was read")
             for job in submitted if job not in placed and _reached(histories.get(job), ADMITTED_STATES)]
    if submitted and not placed:
        found.append(Violation("no_placement", None, f"{len(submitted)} jobs submitted and no placement "
                               "(JobAdmitted) read: the run admitted nothing"))
    return found


def check_pods(submitted: list[str], histories: dict[str, list[JobStatusChanged]], events: list[LoggedEvent],
               pods: Iterable[PodLife]) -> list[Violation]:
    """Every job whose status says it ran (running or succeeded) has a pod in the simulated cluster's record
    that ran, and a run with placements recorded at least one pod. (An admission cancelled before its pods
    were created has none, so the rule per job is for jobs that ran.)"""
    ran = {p.job_id for p in pods if p.ran is not None}
    found = [Violation("no_pod", job, "status says it ran (states "
                       f"{sorted({s.state for s in histories[job]})}) but no pod of it was seen running")
             for job in submitted if job not in ran and _reached(histories.get(job), RAN_STATES)]
    placed = {e.envelope.payload.job_id for e in events if isinstance(e.envelope.payload, JobAdmitted)}
    if placed and not ran:
        found.append(Violation("no_pod", None, f"{len(placed)} jobs placed and no pod was seen running: the "
                               "run exercised no pod"))
    return found


def _reached(history: list[JobStatusChanged] | None, states: frozenset[str]) -> bool:
    return any(s.state in states for s in history or [])


def check_faults(planned: list[Fault], counts: FaultCounts) -> list[Violation]:
    """Every planned fault was carried out: each service kill hit a live process that died of SIGKILL and
    came back healthy, each broker kill was followed by a failover and a restart, and the broker
    restarts, API outages and dropped watches happened as many times as planned."""
    found: list[Violation] = []
    kills = Counter(f.target for f in planned if f.kind == KILL)
    for target in sorted(set(kills) | set(counts.kills) | set(counts.processes_killed)):
        want = kills.get(target, 0)
        performed = {"killed with SIGKILL": counts.processes_killed.get(target, 0),
                     "seen healthy again": counts.processes_restarted.get(target, 0)}
        for what, count in performed.items():
            if count != want:
                found.append(Violation("faults_not_performed", None, f"{target}: {want} kills planned, "
                                       f"{count} processes {what}"))
    roles = Counter(f.target for f in planned if f.kind == BROKER_KILL)
    for role in sorted(set(roles) | set(counts.broker_kills)):
        want = roles.get(role, 0)
        steps = {"killed": counts.broker_kills.get(role, 0),
                 "failed over": len(counts.broker_failover_s.get(role, [])),
                 "restarted": counts.brokers_restarted_after_kill.get(role, 0)}
        for what, count in steps.items():
            if count != want:
                found.append(Violation("faults_not_performed", None, f"broker kills ({role}): {want} planned, "
                                       f"{count} {what}"))
    for kind, done, name in ((BROKER, counts.broker_restarts, "broker restarts"),
                             (OUTAGE, counts.api_outages, "API outages"),
                             (WATCHES, counts.watch_drops, "watch drops")):
        want = sum(1 for f in planned if f.kind == kind)
        if done != want:
            found.append(Violation("faults_not_performed", None, f"{name}: {want} planned, {done} performed"))
    return found


#: arrivals into a full cluster (see ``contended_arrivals``) from which a workload asks for preemptions
CONTENDED_ARRIVALS = 3


def _gpus(job: PlannedJob) -> int:
    return int(job.spec["replicas"]) * int(job.spec["template"]["resources"]["gpus"])


def _runs_until(job: PlannedJob) -> float:
    """When the job would end if it started on submission: its run time, or its cancel if sooner."""
    run = float(job.spec["runtime_estimate_s"])
    return job.at_s + (run if job.cancel_after_s is None else min(run, job.cancel_after_s))


def contended_arrivals(workload: list[PlannedJob], cluster_gpus: int) -> int:
    """How many submissions arrive when the jobs submitted before them, were each started on submission
    and run for its run time (or until its cancel), would fill the cluster beyond the new job's room,
    with a job of a lower priority class among them: the moments the workload plans for a preemption."""
    rank = {name: i for i, name in enumerate(PRIORITIES)}
    ordered = sorted(workload, key=lambda job: job.at_s)
    longest = max((_runs_until(job) - job.at_s for job in ordered), default=0.0)
    contended, first = 0, 0
    for i, job in enumerate(ordered):
        while ordered[first].at_s + longest < job.at_s:  # ended before this one, whatever it was
            first += 1
        earlier = [k for k in ordered[first:i] if _runs_until(k) > job.at_s]
        mine = rank.get(str(job.spec.get("priority_class")), 0)
        if (sum(map(_gpus, earlier)) + _gpus(job) > cluster_gpus
                and any(rank.get(str(k.spec.get("priority_class")), 0) < mine for k in earlier)):
            contended += 1
    return contended


def asks_for_preemption(workload: list[PlannedJob], cluster_gpus: int) -> bool:
    """Whether the workload asks for preemptions: at least ``CONTENDED_ARRIVALS`` higher-priority jobs
    arrive into a cluster that lower-priority ones would fill (``contended_arrivals``)."""
    return contended_arrivals(workload, cluster_gpus) >= CONTENDED_ARRIVALS




def cancels_on_open_jobs(workload: list[PlannedJob]) -> int:
    """Planned cancels that must find their job open: sent sooner after the submission than the job's run
    time (waiting in the queue only delays its end). A later cancel may rightly find the job ended."""
    return sum(1 for job in workload
               if job.cancel_after_s is not None and job.cancel_after_s < float(job.spec["runtime_estimate_s"]))


def check_cancels(planned: int, on_open_jobs: int, requested: int, accepted: int,
                  final: dict[str, str]) -> list[Violation]:
    """Every planned cancel was sent; and when some of them must have found their job open
    (``cancels_on_open_jobs``), at least one job ended cancelled."""
    found: list[Violation] = []
    if requested != planned:
        found.append(Violation("cancels_missing", None, f"{planned} cancels planned, {requested} sent"))
    if on_open_jobs and not any(state == "cancelled" for state in final.values()):
        found.append(Violation("cancels_missing", None, f"{on_open_jobs} cancels planned before their job could "
                               f"end ({accepted} of {requested} sent were accepted) and no job ended cancelled"))
    return found


def check_history_kept(offsets: dict[tuple[str, int], list[int]], topics: Iterable[str]) -> list[Violation]:
    """Every partition of ``topics`` was read without a gap from offset 0: no record of the run's history was
    removed by compaction or retention (the producers are idempotent, not transactional, so offsets are
    dense)."""
    found: list[Violation] = []
    wanted = set(topics)
    for (topic, partition), read in sorted(offsets.items()):
        if topic not in wanted:
            continue
        ordered = sorted(read)
        missing = (ordered[-1] + 1) - len(set(ordered)) if ordered else 0
        if missing:
            found.append(Violation("history_compacted", None, f"{topic}[{partition}]: {missing} of "
                                   f"{ordered[-1] + 1} records missing (first read offset {ordered[0]})"))
    return found


def dead_letter_reasons(dead: list[DeadLetter]) -> dict[str, int]:
    """Dead letters by ``<source topic>: <reason>`` (``?`` when a header is missing)."""
    return dict(Counter(f"{d.source or '?'}: {d.reason or '?'}" for d in dead))


def check_dead_letters(dead: list[DeadLetter]) -> list[Violation]:
    """Nothing in a chaos run writes a record a service may refuse, so every dead letter is a finding: one
    per source topic and reason, with the count and the first letter's place and detail."""
    groups: dict[tuple[str, str], list[DeadLetter]] = {}
    for letter in dead:
        groups.setdefault((letter.source or "?", letter.reason or "?"), []).append(letter)
    return [Violation("dead_letter", None, f"{len(letters)} dead letters from {source} (reason {reason}); first at "
                      f"{letters[0].topic}[{letters[0].partition}]@{letters[0].offset}: "
                      f"{letters[0].detail[:200] or 'no detail'}")
            for (source, reason), letters in sorted(groups.items())]
