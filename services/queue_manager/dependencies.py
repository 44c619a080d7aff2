"""Jobs that wait for others (``spec.after``): held out of the scheduler until the jobs they wait for
ended as asked (``services.core.dependencies`` judges), then queued like any other job.

A held job is ``pending`` with reason ``waiting_for_dependencies`` and a message naming what it waits
for. It ends when it can never run: a job it waits for ended otherwise (``dependency_failed``: the
job is cancelled or failed, as its spec's ``on_dependency_failure`` says), a job it names stays
unknown for ``UNKNOWN_WAIT_S`` after its submission (``unknown_dependency``: a producer writing the
intents topic directly may send the two jobs out of order), or waiting jobs wait for each other
(``dependency_cycle``). Names are resolved to the tenant's latest job of that name; another tenant's
job is never waited for (it counts as unknown).
"""

from __future__ import annotations

from schemas.decisions import JobRejected
from schemas.envelope import MAX_TEXT
from schemas.topics import DECISIONS_TOPIC
from services.core.dependencies import After, On, find_cycle, verdict
from services.queue_manager.entries import JobEntry
from services.queue_manager.queue_state import Out, QueueState

WAITING = "waiting_for_dependencies"
DEPENDENCY_FAILED = "dependency_failed"
UNKNOWN_DEPENDENCY = "unknown_dependency"
DEPENDENCY_CYCLE = "dependency_cycle"
UNKNOWN_WAIT_S = 600.0


def _resolve(qs: QueueState, entry: JobEntry, name: str) -> str | None:
    """The id ``name`` stands for among the entry's tenant's jobs: itself if it is one, else the latest
    job of that name."""
    tenant = entry.submission.tenant
    known = qs.jobs.get(name)
    if known is not None and known.submission.tenant == tenant:
        return name
    best: JobEntry | None = None
    for other in qs.jobs_named.get(name, {}):
        candidate = qs.jobs.get(other)
        if candidate is None or candidate.submission.tenant != tenant or candidate is entry:
            continue
        if best is None or candidate.submission.submitted_at > best.submission.submitted_at:
            best = candidate
    return None if best is None else best.job_id


def conditions(qs: QueueState, entry: JobEntry) -> list[tuple[str, After]]:
    """``(what the spec names, the condition on the job it resolves to)``; an unresolved name stays as given."""
    out = []
    for dep in entry.spec.after:
        job_id = _resolve(qs, entry, dep.job)
        out.append((dep.job, After(job_id or dep.job, On(dep.on))))
    return out


def queue_or_hold(qs: QueueState, entry: JobEntry, now: float | None) -> list[Out]:
    """Give a pending job to the scheduler once its dependencies allow it; hold it, or end it.
    ``now`` None (recovery): an unknown job is waited for whatever the time."""
    if entry.state != "pending" or entry.terminal:
        return []
    if not entry.spec.after:
        qs.sched.submit(qs.core_job(entry))
        return []
    conds = conditions(qs, entry)
    tenant = entry.submission.tenant
    states = {c.job_id: qs.jobs[c.job_id].state for _, c in conds
              if c.job_id in qs.jobs and qs.jobs[c.job_id].submission.tenant == tenant}
    judged = verdict([c for _, c in conds], states)
    if judged.ready:
        qs.unhold(entry.job_id)
        entry.reason, entry.message = "", ""
        qs.sched.submit(qs.core_job(entry))
        return [qs.record(entry)]
    if judged.broken is not None:
        state = "cancelled" if entry.spec.on_dependency_failure == "cancel" else "failed"
        return _end(qs, entry, now, state, DEPENDENCY_FAILED, f"dependency not met: {judged.broken[1]}")
    waited = 0.0 if now is None else now - entry.submission.submitted_at.timestamp()
    if judged.unknown and waited >= UNKNOWN_WAIT_S:
        names = ", ".join(judged.unknown)
        return _end(qs, entry, now, "rejected", UNKNOWN_DEPENDENCY,
                    f"no job {names} in tenant {tenant!r} {UNKNOWN_WAIT_S:.0f}s after submission")
    qs.hold(entry.job_id, [name for name, c in conds if c.job_id in judged.waiting] +
            [c.job_id for _, c in conds if c.job_id in judged.waiting], unknown=bool(judged.unknown))
    cycle = find_cycle(_held_graph_from(qs, entry.job_id))
    if cycle is not None and entry.job_id in cycle:
        return _end_cycle(qs, cycle, now)
    by_id = {c.job_id: c for _, c in conds}
    text = "waits for " + ", ".join(
        f"{job_id} ({by_id[job_id].on.value}{', not known yet' if job_id in judged.unknown else ''})"
        for job_id in judged.waiting)
    if (entry.reason, entry.message) == (WAITING, text[:MAX_TEXT]):
        return []
    entry.reason, entry.message = WAITING, text
    return [qs.record(entry)]


def _held_graph_from(qs: QueueState, start: str) -> dict[str, list[str]]:
    """``held job -> jobs it waits for``, for the held jobs reachable from ``start``: a cycle through
    ``start`` lies within them, so the rest of the held jobs need not be resolved again."""
    graph: dict[str, list[str]] = {}
    stack = [start]
    while stack:
        job_id = stack.pop()
        if job_id in graph or job_id not in qs.held:
            continue
        graph[job_id] = [c.job_id for _, c in conditions(qs, qs.jobs[job_id])]
        stack.extend(graph[job_id])
    return graph


def settle(qs: QueueState, now: float | None) -> list[Out]:
    """Judge again every held job whose dependencies changed (ended, or appeared): one ending may
    end its dependants in turn, so this runs until nothing more changes."""
    outs: list[Out] = []
    while qs.woken:
        job_id = qs.woken.pop()
        entry = qs.jobs.get(job_id)
        if entry is not None and job_id in qs.held:
            outs += queue_or_hold(qs, entry, now)
    return outs


def expire_unknown(qs: QueueState, now: float) -> list[Out]:
    """End the held jobs that have waited for an unknown job long enough (run with the cycles)."""
    for job_id in list(qs.held_unknown):
        entry = qs.jobs.get(job_id)
        if entry is not None and now - entry.submission.submitted_at.timestamp() >= UNKNOWN_WAIT_S:
            qs.woken.add(job_id)
    return settle(qs, now)


def _end(qs: QueueState, entry: JobEntry, now: float | None, state: str, reason: str, text: str) -> list[Out]:
    at = now if now is not None else entry.submission.submitted_at.timestamp()
    entry.finish(state, at, reason, text)  # type: ignore[arg-type]
    outs = [qs.record(entry)]
    if state == "rejected":
        outs.append(Out(DECISIONS_TOPIC, JobRejected(job_id=entry.job_id, attempt=entry.attempt, reason=reason,
                                                     message=text)))
    return outs


def _end_cycle(qs: QueueState, cycle: list[str], now: float | None) -> list[Out]:
    text = "jobs wait for each other: " + " -> ".join(cycle)
    outs: list[Out] = []
    for job_id in dict.fromkeys(cycle):
        entry = qs.jobs[job_id]
        if not entry.terminal:
            outs += _end(qs, entry, now, "rejected", DEPENDENCY_CYCLE, text)
    return outs
