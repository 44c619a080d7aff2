"""A whole chaos run: start the system, submit the workload while faults fire, drain, then check."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.kube import GPU_RESOURCE
from schemas.runs import RunFailed
from schemas.status import TERMINAL_STATES
from schemas.topics import STATUS_TOPIC
from services.chaos import checks, coverage
from services.chaos.client import Gateway, GatewayError
from services.chaos.cluster_checks import check_attempt_overlap, check_node_gpus, leftovers
from services.chaos.eventlog import EventLog, read_log
from services.chaos.faults import Fault, FaultInjector, plan_faults
from services.chaos.ledger import Ledger
from services.chaos.plan import ChaosPlan, chaos_config
from services.chaos.pods import PodRecorder
from services.chaos.report import ChaosReport, Violation
from services.chaos.system import ChaosSystem, running_system
from services.chaos.workload import PlannedJob, plan_workload
from services.kubesim.resources import NODES
from services.runtime.kafka.reader import KafkaError

POLL_S = 3.0

Progress = Callable[[str, float, float | None], None]
"""``(description, done, total)``: how far the run is (``muster chaos`` draws it as progress bars)."""


def _quiet(description: str, done: float, total: float | None) -> None:
    return None


class Run:
    """The mutable record of one run: which job ids the submissions got, and what the run saw."""

    def __init__(self, plan: ChaosPlan, system: ChaosSystem, gateway: Gateway, report: ChaosReport,
                 notify: Callable[[str], None], progress: Progress = _quiet, planned: int = 0) -> None:
        self.plan = plan
        self.progress = progress
        self.planned = planned
        self.attempted = 0
        self.system = system
        self.gateway = gateway
        self.report = report
        self.notify = notify
        self.job_ids: dict[int, str] = {}
        self.problems: list[Violation] = []

    async def submit(self, job: PlannedJob, started_at: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, started_at + job.at_s - loop.time()))
        try:
            job_id = await self.gateway.submit(job.spec, job.key)
        except GatewayError as exc:
            self.problems.append(Violation("submit", None, str(exc)))
            return
        finally:
            self.attempted += 1
            self.progress("jobs submitted", self.attempted, self.planned)
        self.job_ids[job.index] = job_id
        if job.cancel_after_s is not None:
            await asyncio.sleep(job.cancel_after_s)
            self.report.cancels_requested += 1
            try:
                if await self.gateway.cancel(job_id) == 202:
                    self.report.cancels_accepted += 1
            except GatewayError as exc:
                self.notify(f"cancel of {job_id} not delivered: {exc}")

    async def drain(self) -> EventLog:
        """Read the log until every submitted job is terminal or the drain timeout passes; the last read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.plan.drain_timeout_s
        while True:
            try:
                log = await read_log(self.system.settings)
            except (KafkaError, TimeoutError) as exc:
                if loop.time() > deadline:
                    raise
                self.notify(f"reading the log failed ({exc!r}); retrying")
                await asyncio.sleep(POLL_S)
                continue
            states = checks.final_states(list(self.job_ids.values()), checks.status_histories(log.events))
            open_jobs = sorted(j for j, s in states.items() if s not in TERMINAL_STATES)
            self.progress("jobs ended", len(self.job_ids) - len(open_jobs), len(self.job_ids))
            if not open_jobs or loop.time() > deadline:
                return log
            self.notify(f"waiting for {len(open_jobs)} jobs to end, e.g. {open_jobs[:3]}")
            await asyncio.sleep(POLL_S)

    async def wait_orphans(self, ended: set[str]) -> list[str]:
        """Active Kubernetes objects of ended jobs still there after the grace period (polled, so it ends
        early); counts the finished objects kept as a record."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.plan.orphan_grace_s
        while True:
            active, finished = leftovers(self.system.sim.store, ended)
            if not active or loop.time() > deadline:
                self.report.finished_objects_kept = len(finished)
                return active
            await asyncio.sleep(0.5)


def node_gpus(system: ChaosSystem) -> dict[str, int]:
    items, _ = system.sim.store.list(NODES)
    return {n["metadata"]["name"]: int((n.get("status") or {}).get("allocatable", {}).get(GPU_RESOURCE, 0))
            for n in items}


def evaluate(run: Run, log: EventLog, recorder: PodRecorder, left: list[str], faults: list[Fault],
             workload: list[PlannedJob]) -> None:
    """Run every check over the final log and the pod history, then the coverage checks (the run did what
    it planned and the log holds what that must have produced); fill the report's counts."""
    report, submitted = run.report, list(run.job_ids.values())
    histories = checks.status_histories(log.events)
    final = checks.final_states(submitted, histories)
    report.final_states = dict(Counter(final.values()))
    report.events_read, report.dead_letters = len(log.events), log.dead_letters
    report.dead_letter_reasons = coverage.dead_letter_reasons(log.dead)
    payloads = [e.envelope.payload for e in log.events]
    report.admissions = len({(p.job_id, p.attempt) for p in payloads if isinstance(p, JobAdmitted)})
    report.preemptions = len({(p.job_id, p.attempt) for p in payloads
                              if isinstance(p, JobPreemptionRequested) and p.reason != "cancelled"})
    report.gang_restarts = len({(p.job_id, p.attempt, p.pod) for p in payloads if isinstance(p, RunFailed)})
    report.add("submissions", run.problems)
    report.add("terminal_once", checks.check_terminal(submitted, histories))
    report.add("no_unknown_jobs", checks.check_unknown_jobs(submitted, histories))
    report.add("one_placement_per_attempt", checks.check_admissions(log.events))
    report.add("attempts_in_order", checks.check_attempt_order(log.events))
    ledger = Ledger.of(run.system.config, node_gpus(run.system))
    report.add("admitted_capacity_and_quota", ledger.replay(log.events))
    report.peak_gpus_admitted = ledger.peak_gpus
    pods = list(recorder.pods.values())
    report.add("pod_capacity", check_node_gpus(pods, node_gpus(run.system)))
    report.add("no_overlapping_attempts", check_attempt_overlap(pods))
    report.add("no_orphans", [Violation("orphan", None, f"{obj} left after its job ended") for obj in left])
    report.add("undecodable", [Violation("undecodable", None, f"{log.undecodable} records could not be decoded")]
               if log.undecodable else [])
    report.add("coverage_placements", coverage.check_placements(submitted, histories, log.events))
    report.add("coverage_pods", coverage.check_pods(submitted, histories, log.events, pods))
    report.add("coverage_faults", coverage.check_faults(faults, report.faults))
    # reported, not checked: the plan assumes each job starts on submission, and a loaded machine shifts the
    # starts (and minimum runtimes protect the victims), so planned contention may never arise
    report.preemptions_asked = coverage.asks_for_preemption(workload, run.plan.nodes * run.plan.gpus_per_node)
    submitted_jobs = [job for job in workload if job.index in run.job_ids]
    report.cancels_planned = sum(1 for job in submitted_jobs if job.cancel_after_s is not None)
    report.cancels_on_open_jobs = coverage.cancels_on_open_jobs(submitted_jobs)
    report.add("coverage_cancels", coverage.check_cancels(report.cancels_planned, report.cancels_on_open_jobs,
                                                          report.cancels_requested, report.cancels_accepted, final))
    report.add("status_history_kept", coverage.check_history_kept(log.offsets, [STATUS_TOPIC]))
    report.add("dead_letters", coverage.check_dead_letters(log.dead))


async def run_chaos(plan: ChaosPlan, state_dir: Path, notify: Callable[[str], None],
                    progress: Progress = _quiet) -> ChaosReport:
    """One seeded run; the report says what was done and which invariants broke. ``progress`` is told how many
    jobs were submitted, then how many ended while draining."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    rng = random.Random(plan.seed)
    config = chaos_config(plan)
    workload = plan_workload(plan, rng)
    report = ChaosReport(seed=plan.seed, jobs_planned=len(workload), brokers=plan.brokers)
    recorder = PodRecorder()
    async with running_system(plan, config, state_dir, notify) as system:
        system.sim.store.add_listener(recorder)
        gateway = Gateway(system.gateway_url, system.admin_token)
        run = Run(plan, system, gateway, report, notify, progress, len(workload))
        stop = asyncio.Event()
        keeper = asyncio.create_task(system.keep_alive(stop, notify), name="chaos keep-alive")
        try:
            faults = plan_faults(plan, sorted(system.children), rng)
            notify(f"running {len(workload)} jobs and {len(faults)} faults over {plan.duration_s:g}s")
            started = loop.time()
            injector = FaultInjector(system, report.faults, notify)
            await asyncio.gather(injector.run(faults, started), *(run.submit(job, started) for job in workload))
            report.jobs_submitted = len(run.job_ids)
            drain_began = loop.time()
            log = await run.drain()
            report.drain_time_s = round(loop.time() - drain_began, 1)
            ended = {j for j, s in checks.final_states(list(run.job_ids.values()),
                                                       checks.status_histories(log.events)).items()
                     if s in TERMINAL_STATES}
            left = await run.wait_orphans(ended)
            log = await read_log(system.settings)
            evaluate(run, log, recorder, left, faults, workload)
        finally:
            stop.set()
            await keeper
            report.gateway_retries = gateway.retries
            report.faults.unexpected_exits = dict(system.unexpected_exits)
            report.faults.failed_starts = dict(system.failed_starts)
            report.faults.slow_recoveries = dict(system.slow_recoveries)
            report.faults.slow_failovers = system.slow_failovers
            await gateway.close()
    report.wall_time_s = round(loop.time() - began, 1)
    return report
