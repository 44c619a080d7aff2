"""What the job commands print for people (``-o text``, and ``-o wide`` with more columns): tables of jobs,
queues and recurring jobs, a job's description, a recurring job, one change of a watch."""

from __future__ import annotations

from datetime import datetime

from rich.table import Table

from schemas.api import Explanation, JobView, QueueView, RecurringAccepted, RecurringView
from schemas.config import gpu_type_of, is_gpu_resource
from schemas.status import ActionOutcome
from services.spec.durations import human_duration

_HOLDING = ("admitted", "running", "preempting")


def stamp(at: datetime) -> str:
    """A time as the API writes it: ISO 8601, ``Z`` for UTC."""
    return at.isoformat().replace("+00:00", "Z")


def ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    return human_duration((now - at).total_seconds())


def until(at: datetime | None, now: datetime) -> str:
    """A time to come, absolute and relative: ``2026-11-01 12:00:00 UTC (in 5 min)``."""
    if at is None:
        return "unknown"
    seconds = int((at - now).total_seconds())
    if seconds <= 0:
        return f"{at:%Y-%m-%d %H:%M:%S} UTC (now)"
    span = f"{seconds // 60} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
    return f"{at:%Y-%m-%d %H:%M:%S} UTC (in {span})"


def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, no_wrap=True)
    return table


def jobs_table(jobs: list[JobView], now: datetime, *, wide: bool = False) -> Table:
    """JOB, QUEUE, STATE, ATTEMPT, GPUS, POS, AGE, REASON; wide adds NAME, TENANT, PRIORITY, PODS, CLUSTER,
    ESTIMATED START, UPDATED and MESSAGE."""
    columns = ["JOB", "QUEUE", "STATE", "ATTEMPT", "GPUS", "POS", "AGE"]
    if wide:
        columns[1:1] = ["NAME", "TENANT"]
        columns += ["PRIORITY", "PODS", "CLUSTER", "ESTIMATED START", "UPDATED"]
    table = _table(*columns)
    table.add_column("REASON", overflow="fold")  # wrapped on a narrow terminal, never cut
    if wide:
        table.add_column("MESSAGE", overflow="fold")
    for job in jobs:
        position = place(job.position)
        if not wide:
            table.add_row(job.job_id, job.queue, job.state, str(job.attempt), gpus_text(job), position,
                          ago(job.submitted_at, now), job.reason)
            continue
        start = f"{job.estimated_start:%Y-%m-%d %H:%M:%S}Z" if job.estimated_start is not None else "-"
        table.add_row(job.job_id, job.name, job.tenant, job.queue, job.state, str(job.attempt), gpus_text(job),
                      position, ago(job.submitted_at, now), job.priority_class, str(job.replicas),
                      job.cluster or "-", start, f"{ago(job.updated_at, now)} ago", job.reason, job.message)
    return table


def gpus_text(job: JobView) -> str:
    """A job's GPUs as a person reads them: whole GPUs, or a sharing job's charged share ("0.5 shared")."""
    if job.gpu_share is None:
        return str(job.gpus)
    return f"{job.gpu_share:.2f}".rstrip("0").rstrip(".") + " shared"


def place(position: int | None) -> str:
    """A pending job's place in its queue as people count it, 1 for the next to start (the API's ``position``
    counts from 0, as the jobs ahead of it); ``-`` when it has none."""
    return "-" if position is None else str(position + 1)


def counted(n: int | str, word: str) -> str:
    """``n word``, the word in the plural unless n is one ("1 pod", "2 pods", "0.5 shared GPUs")."""
    return f"{n} {word}" if str(n) == "1" else f"{n} {word}s"


def last_request(answer: ActionOutcome) -> str:
    """The last request about a job and its answer, in one line."""
    what = answer.action.replace("_", " ")
    told = f"{answer.outcome} ({answer.reason}): {answer.message}" if answer.outcome == "refused" else answer.outcome
    return f"{what} by {answer.requested_by} at {stamp(answer.at)}: {told}"


def describe_text(explained: Explanation, now: datetime) -> str:
    """The human-readable description of one job: what it is, why it is where it is, what happened."""
    job = explained.job
    lines = [
        f"Job:            {job.job_id}  ({job.name})",
        f"Tenant / queue: {job.tenant} / {job.queue}",
        f"State:          {job.state} (attempt {job.attempt})",
        f"Priority class: {job.priority_class}",
        f"Size:           {counted(job.replicas, 'pod')}, {counted(gpus_text(job), 'GPU')}",
    ]
    if job.roles:
        pods = sum(r.replicas for r in job.roles)
        lines[-1] = f"Size:           {counted(pods, 'pod')}, {counted(gpus_text(job), 'GPU')}, one gang of"
        lines += [f"  role {r.name:<18} {r.replicas} x {counted(r.gpus_per_pod, 'GPU')}" for r in job.roles]
    if job.cluster:
        lines.append(f"Cluster:        {job.cluster}")
    lines.append(f"Submitted:      {stamp(job.submitted_at)}  ({ago(job.submitted_at, now)} ago)")
    lines.append(f"Updated:        {stamp(job.updated_at)}  ({ago(job.updated_at, now)} ago)")
    lines.append("")
    lines.append(f"Why:            {explained.summary}")
    if job.state == "pending":
        position = explained.position
        lines.append(f"Position:       {'unknown' if position is None else place(position)} (1 = next)")
        lines.append(f"Estimated start: {until(explained.estimated_start, now)}")
    if explained.reason:
        lines.append(f"Reason:         {explained.reason}")
    if explained.message and explained.message != explained.summary:  # said once, under Why
        lines.append(f"Message:        {explained.message}")
    if job.last_action is not None:
        lines.append(f"Last request:   {last_request(job.last_action)}")
    lines.append("")
    lines.append("History:")
    for item in explained.history:
        why = " ".join(part for part in (item.reason, item.message) if part)
        # waiting again after an attempt ended (preempted, failed and retried, idle): a requeue
        state = "requeued" if item.state == "pending" and item.attempt > 0 else item.state
        lines.append(f"  {stamp(item.at)}  {state:<11} attempt {item.attempt}  {why}".rstrip())
    return "\n".join(lines)


def _gpu_sum(values: dict[str, int] | dict[str, int | float]) -> float:
    """GPUs of all types; a whole number unless jobs share GPUs (a MIG slice or a fraction counts its share)."""
    total = sum(v for k, v in values.items() if is_gpu_resource(k))
    if isinstance(total, int):
        return total
    return round(total) if abs(total - round(total)) < 1e-9 else round(total, 2)


def queues_table(queues: list[QueueView], *, wide: bool = False) -> Table:
    """QUEUE, TENANT, COHORT, GPU QUOTA, IN USE, BORROWED, RUNNING, PENDING (GPUS); wide adds WEIGHT,
    BORROWING LIMIT, every other resource's quota, DECAYED GPU-H and PRIVILEGED."""
    columns = ["QUEUE", "TENANT", "COHORT", "GPU QUOTA"]
    if wide:
        columns += ["BORROWING LIMIT", "OTHER QUOTA", "WEIGHT"]
    columns += ["IN USE", "BORROWED", "RUNNING", "PENDING (GPUS)"]
    if wide:
        columns += ["DECAYED GPU-H", "PRIVILEGED"]
    table = _table(*columns)
    for queue in queues:
        usage = queue.usage
        gpus = sorted((res, q) for res, q in queue.quotas.items() if is_gpu_resource(res))
        gpu_quota = ", ".join(f"{gpu_type_of(res)}={q.nominal}" for res, q in gpus) or "-"
        in_use = _gpu_sum(usage.allocated) if usage is not None else queue.gpus_running
        borrowed = _gpu_sum(usage.borrowed) if usage is not None else 0
        running = sum(queue.jobs.get(s, 0) for s in _HOLDING)
        pending = f"{queue.jobs.get('pending', 0)} ({queue.gpus_pending})"
        row = [queue.name, queue.tenant, queue.cohort or "-", gpu_quota]
        if wide:
            limits = ", ".join(f"{gpu_type_of(res)}={'-' if q.borrowing_limit is None else q.borrowing_limit}"
                               for res, q in gpus) or "-"
            others = ", ".join(f"{res}={q.nominal}" for res, q in sorted(queue.quotas.items())
                               if not is_gpu_resource(res)) or "-"
            row += [limits, others, f"{queue.weight:g}"]
        row += [str(in_use), str(borrowed), str(running), pending]
        if wide:
            decayed = f"{usage.decayed_gpu_seconds / 3600:.1f}" if usage is not None else "-"
            row += [decayed, "yes" if queue.allow_privileged else "no"]
        table.add_row(*row)
    return table


def recurring_accepted_text(result: RecurringAccepted, now: datetime) -> str:
    """What ``submit`` prints for a spec with ``schedule``: the recurring job and its next firings."""
    verb = "created" if result.created else ("updated" if result.changed else "unchanged")
    state = " (suspended)" if result.suspended else ""
    lines = [f"recurring job {result.name} {verb}{state}: schedule {result.schedule!r} (UTC)"]
    lines += [f"  next: {until(at, now)}" for at in result.next_firings]
    return "\n".join(lines)


def recurring_table(items: list[RecurringView], now: datetime, *, wide: bool = False) -> Table:
    """NAME, QUEUE, SCHEDULE, STATE, NEXT FIRING, LAST JOB; wide adds TENANT, USER, CREATED and the
    firings after the next."""
    columns = ["NAME", "QUEUE", "SCHEDULE", "STATE", "NEXT FIRING", "LAST JOB"]
    if wide:
        columns[1:1] = ["TENANT", "USER"]
        columns += ["CREATED", "THEN"]
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    for item in items:
        upcoming = item.next_firings
        recent = item.recent_firings
        last = f"{recent[0].job_id} ({recent[0].state})" if recent else "-"
        state = "suspended" if item.suspended else "active"
        next_firing = until(upcoming[0], now) if upcoming else "-"
        if not wide:
            table.add_row(item.name, item.queue, item.schedule, state, next_firing, last)
            continue
        later = ", ".join(f"{at:%Y-%m-%d %H:%M}Z" for at in upcoming[1:]) or "-"
        table.add_row(item.name, item.tenant, item.user, item.queue, item.schedule, state, next_firing, last,
                      stamp(item.created_at), later)
    return table


def recurring_text(item: RecurringView, now: datetime) -> str:
    """One recurring job: schedule, next firings, the jobs recent firings submitted."""
    lines = [
        f"Recurring job:  {item.name}",
        f"Tenant / queue: {item.tenant} / {item.queue}  (defined by {item.user})",
        f"Schedule:       {item.schedule} (UTC){'  SUSPENDED' if item.suspended else ''}",
        f"Created:        {stamp(item.created_at)}",
        "Next firings:",
    ]
    lines += [f"  {until(at, now)}" for at in item.next_firings] or ["  none (suspended)"]
    lines.append("Recent firings:")
    lines += [f"  {stamp(f.fired_at)}  {f.job_id}  {f.state}" for f in item.recent_firings] or ["  none seen yet"]
    return "\n".join(lines)


def change_line(job: JobView, *, wide: bool = False) -> str:
    """One job change as ``muster get|list --watch`` prints it; wide adds attempt, cluster and message."""
    position = "" if job.position is None else f" position {place(job.position)}"
    why = f" {job.reason}" if job.reason else ""
    line = f"{stamp(job.updated_at)}  {job.job_id}  {job.queue}  {job.state}{position}{why}"
    if wide:
        line += f"  attempt {job.attempt}"
        if job.cluster:
            line += f"  cluster {job.cluster}"
        if job.message:
            line += f"  {job.message}"
    return line
