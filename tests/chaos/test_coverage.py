"""The coverage checks of ``muster chaos``: a run that read nothing, performed no planned fault or saw no
preemption or cancel it asked for fails; a run that did what it planned passes. Each check over hand-made
message lists, pod lifetimes and fault counts, in tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from schemas.topics import DECISIONS_TOPIC, STATUS_TOPIC
from services.chaos import checks, coverage
from services.chaos.eventlog import DeadLetter, LoggedEvent
from services.chaos.faults import BROKER, BROKER_KILL, KILL, OUTAGE, WATCHES, Fault
from services.chaos.pods import PodLife
from services.chaos.report import FaultCounts, Violation
from services.chaos.workload import PlannedJob
from tests.chaos.builders import Log, admitted, pod, status


def found(violations: list[Violation]) -> list[tuple[str, str | None]]:
    return [(v.check, v.job_id) for v in violations]


def placements(log: Log, submitted: list[str]) -> list[Violation]:
    return coverage.check_placements(submitted, checks.status_histories(log.events), log.events)


def pods_of(log: Log, submitted: list[str], pods: list[PodLife]) -> list[Violation]:
    return coverage.check_pods(submitted, checks.status_histories(log.events), log.events, pods)


PLACEMENTS: list[tuple[str, Log, list[str], list[tuple[str, str | None]]]] = [
    ("nothing read for a submitted job", Log(), ["a"], [("no_placement", None)]),
    ("nothing submitted, nothing read", Log(), [], []),
    ("admitted with its placement", Log().add(status("a", "admitted")).add(admitted("a")), ["a"], []),
    ("running without a placement", Log().add(status("a", "running")).add(status("b", "admitted")).add(admitted("b")),
     ["a", "b"], [("no_placement", "a")]),
    ("cancelled while pending needs none", Log().add(status("a", "pending")).add(status("a", "cancelled"))
     .add(admitted("b")), ["a", "b"], []),
]


@pytest.mark.parametrize(("case", "log", "submitted", "expected"), PLACEMENTS, ids=[c[0] for c in PLACEMENTS])
def test_placements(case: str, log: Log, submitted: list[str], expected: list[tuple[str, str | None]]) -> None:
    assert found(placements(log, submitted)) == expected


PODS: list[tuple[str, Log, list[str], list[PodLife], list[tuple[str, str | None]]]] = [
    ("placements and no pod at all", Log().add(admitted("a")), ["a"], [], [("no_pod", None)]),
    ("nothing placed, no pod", Log(), ["a"], [], []),
    ("ran without a pod", Log().add(admitted("a")).add(status("a", "running")).add(admitted("b")),
     ["a", "b"], [pod("b", "b-a0", start=0, end=1)], [("no_pod", "a")]),
    ("succeeded with a pod that ran", Log().add(admitted("a")).add(status("a", "succeeded")), ["a"],
     [pod("a", "a-a0", start=0, end=1)], []),
    ("a pod bound but never running", Log().add(admitted("a")).add(status("a", "running")), ["a"],
     [PodLife("team-a", "a-a0-x", "a", 0, "a-a0", 4, node="n1", bound_at=0.0)], [("no_pod", "a"), ("no_pod", None)]),
    ("admitted then cancelled before its pods", Log().add(admitted("a")).add(status("a", "admitted"))
     .add(status("a", "cancelled")).add(admitted("b")).add(status("b", "running")), ["a", "b"],
     [pod("b", "b-a0", start=0)], []),
]


@pytest.mark.parametrize(("case", "log", "submitted", "pods", "expected"), PODS, ids=[c[0] for c in PODS])
def test_pods(case: str, log: Log, submitted: list[str], pods: list[PodLife],
              expected: list[tuple[str, str | None]]) -> None:
    assert found(pods_of(log, submitted, pods)) == expected


def counts(**fields: Any) -> FaultCounts:
    return FaultCounts(**fields)


KILLS = [Fault(1.0, KILL, "gateway"), Fault(2.0, KILL, "gateway"), Fault(3.0, KILL, "scheduler")]
BROKER_FAULTS = [Fault(1.0, BROKER_KILL, "leader"), Fault(2.0, BROKER, "2"), Fault(3.0, OUTAGE, seconds=1.0),
                 Fault(4.0, WATCHES)]
ALL_DONE = counts(kills={"gateway": 2, "scheduler": 1}, processes_killed={"gateway": 2, "scheduler": 1},
                  processes_restarted={"gateway": 2, "scheduler": 1})
FAULTS: list[tuple[str, list[Fault], FaultCounts, int]] = [
    ("nothing planned, nothing done", [], counts(), 0),
    ("every kill killed a process that came back", KILLS, ALL_DONE, 0),
    ("planned kills, nothing done", KILLS, counts(), 4),  # per service: not killed, not restarted
    ("a kill that found no live process", KILLS, counts(kills={"gateway": 2, "scheduler": 1},
                                                        processes_killed={"gateway": 1, "scheduler": 1},
                                                        processes_restarted={"gateway": 2, "scheduler": 1}), 1),
    ("killed but never healthy again", KILLS, counts(processes_killed={"gateway": 2, "scheduler": 1},
                                                     processes_restarted={"gateway": 2}), 1),
    ("broker faults all done", BROKER_FAULTS, counts(broker_kills={"leader": 1}, broker_failover_s={"leader": [6.1]},
                                                     brokers_restarted_after_kill={"leader": 1}, broker_restarts=1,
                                                     api_outages=1, watch_drops=1), 0),
    ("broker faults none done", BROKER_FAULTS, counts(), 6),  # killed, failed over, restarted; 3 kinds
    ("a broker killed that was not planned", [], counts(broker_kills={"controller": 1}), 1),
]


@pytest.mark.parametrize(("case", "planned", "done", "expected"), FAULTS, ids=[c[0] for c in FAULTS])
def test_faults_performed(case: str, planned: list[Fault], done: FaultCounts, expected: int) -> None:
    violations = coverage.check_faults(planned, done)
    assert len(violations) == expected, violations
    assert all(v.check == "faults_not_performed" for v in violations)


def test_fault_findings_say_what_is_missing() -> None:
    [not_killed] = coverage.check_faults(KILLS, counts(processes_killed={"gateway": 2},
                                                       processes_restarted={"gateway": 2, "scheduler": 1}))
    assert not_killed.detail == "scheduler: 1 kills planned, 0 processes killed with SIGKILL"


def job(index: int, at: float, priority: str, gpus: int, *, run_s: float = 10.0,
        cancel_after_s: float | None = None) -> PlannedJob:
    spec = {"priority_class": priority, "replicas": 1, "runtime_estimate_s": run_s,
            "template": {"resources": {"gpus": gpus}}}
    return PlannedJob(index, at, "team-a", "single", spec, cancel_after_s)


FULL_OF_LOW = [job(0, 0.0, "low", 8), job(1, 0.5, "low", 8)]
HIGH_INTO_FULL = [job(i, 1.0 + i, "high", 4) for i in range(2, 5)]
PREEMPTION_ASKED: list[tuple[str, list[PlannedJob], int, bool]] = [
    ("no jobs", [], 16, False),
    ("three high jobs arrive into a cluster full of low ones", [*FULL_OF_LOW, *HIGH_INTO_FULL], 16, True),
    ("room for everyone", [*FULL_OF_LOW, *HIGH_INTO_FULL], 64, False),
    ("one priority only", [job(i, float(i), "low", 8) for i in range(6)], 16, False),
    ("the low jobs ended before", [job(0, 0.0, "low", 8, run_s=0.5), job(1, 0.1, "low", 8, run_s=0.5),
                                   *HIGH_INTO_FULL], 16, False),
    ("the low jobs were cancelled before", [job(0, 0.0, "low", 8, cancel_after_s=0.2),
                                            job(1, 0.5, "low", 8, cancel_after_s=0.2), *HIGH_INTO_FULL], 16, False),
]


@pytest.mark.parametrize(("case", "workload", "gpus", "asked"), PREEMPTION_ASKED, ids=[c[0] for c in PREEMPTION_ASKED])
def test_when_the_workload_asks_for_preemptions(case: str, workload: list[PlannedJob], gpus: int, asked: bool) -> None:
    assert coverage.asks_for_preemption(workload, gpus) is asked


CANCELS: list[tuple[str, tuple[int, int, int, int, dict[str, str]], int]] = [
    ("none planned", (0, 0, 0, 0, {}), 0),
    ("planned, sent, one ended cancelled", (2, 1, 2, 1, {"a": "cancelled", "b": "succeeded"}), 0),
    ("planned, none sent, none cancelled", (2, 1, 0, 0, {"a": "succeeded"}), 2),
    ("sent on open jobs but every job ended otherwise", (2, 2, 2, 0, {"a": "succeeded", "b": "failed"}), 1),
    ("only cancels that may come late, all late", (1, 0, 1, 0, {"a": "succeeded"}), 0),
    ("nothing read", (1, 1, 1, 1, {}), 1),
]


@pytest.mark.parametrize(("case", "args", "expected"), CANCELS, ids=[c[0] for c in CANCELS])
def test_cancels(case: str, args: tuple[int, int, int, int, dict[str, str]], expected: int) -> None:
    violations = coverage.check_cancels(*args)
    assert len(violations) == expected and all(v.check == "cancels_missing" for v in violations)


def test_a_cancel_sent_sooner_than_the_run_time_must_find_its_job_open() -> None:
    workload = [job(0, 0.0, "low", 1, run_s=5.0, cancel_after_s=1.0), job(1, 0.0, "low", 1, run_s=3.9,
                                                                            cancel_after_s=7.59),
                job(2, 0.0, "low", 1, run_s=5.0)]
    assert coverage.cancels_on_open_jobs(workload) == 1


HISTORY: list[tuple[str, dict[tuple[str, int], list[int]], list[str]]] = [
    ("nothing read", {}, []),
    ("dense from 0", {(STATUS_TOPIC, 0): [0, 1, 2], (STATUS_TOPIC, 3): [1, 0]}, []),
    ("a record compacted away", {(STATUS_TOPIC, 0): [0, 2, 3]}, [f"{STATUS_TOPIC}[0]: 1 of 4 records missing"]),
    ("the head removed", {(STATUS_TOPIC, 5): [3, 4]}, [f"{STATUS_TOPIC}[5]: 3 of 5 records missing"]),
    ("another topic is not looked at", {(DECISIONS_TOPIC, 0): [7, 9]}, []),
]


@pytest.mark.parametrize(("case", "offsets", "expected"), HISTORY, ids=[c[0] for c in HISTORY])
def test_status_history_kept(case: str, offsets: dict[tuple[str, int], list[int]], expected: list[str]) -> None:
    violations = coverage.check_history_kept(offsets, [STATUS_TOPIC])
    assert [v.detail.split(" (")[0] for v in violations] == expected
    assert all(v.check == "history_compacted" for v in violations)


def letter(reason: str, source: str = "muster.runs.v1", offset: int = 0) -> DeadLetter:
    return DeadLetter(f"{source}.dlq", 0, offset, source, reason, "bad bytes")


def test_dead_letters_are_counted_and_each_reason_is_a_finding() -> None:
    assert coverage.check_dead_letters([]) == [] and coverage.dead_letter_reasons([]) == {}
    dead = [letter("decode_error"), letter("decode_error", offset=1), letter("handler_error", offset=2),
            letter("", source="")]
    assert coverage.dead_letter_reasons(dead) == {"muster.runs.v1: decode_error": 2,
                                                   "muster.runs.v1: handler_error": 1, "?: ?": 1}
    details = [v.detail for v in coverage.check_dead_letters(dead)]
    assert details == [
        "1 dead letters from ? (reason ?); first at .dlq[0]@0: bad bytes",
        "2 dead letters from muster.runs.v1 (reason decode_error); first at muster.runs.v1.dlq[0]@0: bad bytes",
        "1 dead letters from muster.runs.v1 (reason handler_error); first at muster.runs.v1.dlq[0]@2: bad bytes",
    ]


#: every check of a run, on a run that submitted one job, planned one kill and one cancel, and read nothing:
#: the invariant checks that loop over what was read pass on it; the coverage checks must not
EMPTY: list[tuple[str, Callable[[list[LoggedEvent]], list[Violation]], list[str]]] = [
    ("terminal_once", lambda ev: checks.check_terminal(["a"], checks.status_histories(ev)), ["lost"]),
    ("one_placement_per_attempt", checks.check_admissions, []),
    ("attempts_in_order", checks.check_attempt_order, []),
    ("coverage_placements", lambda ev: coverage.check_placements(["a"], checks.status_histories(ev), ev),
     ["no_placement"]),
    ("coverage_pods", lambda ev: coverage.check_pods(["a"], {}, [], []) + coverage.check_pods(
        ["a"], {}, Log().add(admitted("a")).events, []), ["no_pod"]),
    ("coverage_faults", lambda ev: coverage.check_faults([Fault(1.0, KILL, "gateway")], FaultCounts()),
     ["faults_not_performed", "faults_not_performed"]),
    ("coverage_cancels", lambda ev: coverage.check_cancels(1, 1, 0, 0, checks.final_states(
        ["a"], checks.status_histories(ev))), ["cancels_missing", "cancels_missing"]),
]


@pytest.mark.parametrize(("name", "check", "expected"), EMPTY, ids=[c[0] for c in EMPTY])
def test_an_empty_run(name: str, check: Callable[[list[LoggedEvent]], list[Violation]], expected: list[str]) -> None:
    assert [v.check for v in check([])] == expected
