"""Invariants over the event log: one terminal state per job, no lost or duplicated admission."""

from __future__ import annotations

import json
from collections import defaultdict

from schemas.decisions import JobAdmitted
from schemas.status import TERMINAL_STATES, JobStatusChanged
from schemas.topics import STATUS_TOPIC
from services.chaos.eventlog import LoggedEvent
from services.chaos.report import Violation


def status_histories(events: list[LoggedEvent]) -> dict[str, list[JobStatusChanged]]:
    """Each job's statuses in the order they were written (one job's statuses share a partition)."""
    by_job: dict[str, list[tuple[int, JobStatusChanged]]] = defaultdict(list)
    for event in events:
        msg = event.envelope.payload
        if event.topic == STATUS_TOPIC and isinstance(msg, JobStatusChanged):
            by_job[msg.job_id].append((event.offset, msg))
    return {job: [m for _, m in sorted(items, key=lambda item: item[0])] for job, items in by_job.items()}


def final_states(submitted: list[str], histories: dict[str, list[JobStatusChanged]]) -> dict[str, str]:
    """The last published state of every submitted job (``lost`` when it has none)."""
    return {job: histories[job][-1].state if histories.get(job) else "lost" for job in submitted}


def check_terminal(submitted: list[str], histories: dict[str, list[JobStatusChanged]]) -> list[Violation]:
    """Every submitted job has a status, ended in a terminal state, and never left it for another state."""
    found: list[Violation] = []
    for job in submitted:
        history = histories.get(job)
        if not history:
            found.append(Violation("lost", job, "no status was ever published for the submitted job"))
            continue
        terminal = [s.state for s in history if s.state in TERMINAL_STATES]
        if history[-1].state not in TERMINAL_STATES:
            found.append(Violation("terminal", job, f"last state {history[-1].state!r} "
                                   f"(attempt {history[-1].attempt}, reason {history[-1].reason!r})"))
        if len(set(terminal)) > 1:
            found.append(Violation("terminal", job, f"more than one terminal state: {sorted(set(terminal))}"))
        first = next((i for i, s in enumerate(history) if s.state in TERMINAL_STATES), None)
        if first is not None:
            after = [s.state for s in history[first + 1:] if s.state != history[first].state]
            if after:
                found.append(Violation("terminal", job, f"left terminal state {history[first].state!r} for {after}"))
    return found


def check_unknown_jobs(submitted: list[str], histories: dict[str, list[JobStatusChanged]]) -> list[Violation]:
    """No job appears that nobody submitted (a duplicated submission would show up here)."""
    known = set(submitted)
    return [Violation("duplicated", job, "status of a job that was never submitted")
            for job in sorted(histories) if job not in known]


def check_admissions(events: list[LoggedEvent]) -> list[Violation]:
    """One placement per (job, attempt): a republished identical decision is allowed, a different one is not."""
    placements: dict[tuple[str, int], set[str]] = defaultdict(set)
    for event in events:
        msg = event.envelope.payload
        if isinstance(msg, JobAdmitted):
            plan = json.dumps(msg.placement.model_dump(mode="json"), sort_keys=True)
            placements[(msg.job_id, msg.attempt)].add(f"{msg.replicas}:{plan}")
    return [Violation("duplicated", job, f"attempt {attempt} admitted with {len(seen)} different placements: "
                      f"{sorted(seen)}")
            for (job, attempt), seen in sorted(placements.items()) if len(seen) > 1]


def check_attempt_order(events: list[LoggedEvent]) -> list[Violation]:
    """Attempts are admitted in increasing order: no admission of an attempt older than one already admitted."""
    newest: dict[str, int] = {}
    found: list[Violation] = []
    for event in sorted(events, key=lambda e: (e.topic, e.partition, e.offset)):
        msg = event.envelope.payload
        if isinstance(msg, JobAdmitted):
            if msg.attempt < newest.get(msg.job_id, -1):
                found.append(Violation("attempts", msg.job_id, f"attempt {msg.attempt} admitted after attempt "
                                       f"{newest[msg.job_id]}"))
            newest[msg.job_id] = max(newest.get(msg.job_id, -1), msg.attempt)
    return found
