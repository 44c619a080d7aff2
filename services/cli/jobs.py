"""The ``muster`` job commands, talking to the gateway: submit, get, list, describe, cancel, suspend,
resume, set-priority, scale, queues, top, and the ``recurring`` group (list, get, suspend, resume, delete)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import click
import yaml
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from muster.client import Client, JobsChanged, MusterError, StreamOpened
from schemas.api import Explanation, JobView, QueueView, RecurringAccepted, RecurringView
from schemas.status import TERMINAL_STATES
from services.spec.durations import human_duration


@contextmanager
def gateway() -> Iterator[Client]:
    """A client from the environment / CLI config (``Client.from_env``); its errors become clean click errors."""
    try:
        with Client.from_env() as client:
            yield client
    except MusterError as exc:
        raise click.ClickException(str(exc)) from None


def _console() -> Console:
    """A terminal's own width; 200 columns when the output goes to a file or a pipe (not 80)."""
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def _stamp(at: datetime) -> str:
    """A time as the API writes it: ISO 8601, ``Z`` for UTC."""
    return at.isoformat().replace("+00:00", "Z")


def _ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    return human_duration((now - at).total_seconds())


def _in(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "unknown"
    seconds = int((at - now).total_seconds())
    if seconds <= 0:
        return f"{at:%Y-%m-%d %H:%M:%S} UTC (now)"
    span = f"{seconds // 60} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
    return f"{at:%Y-%m-%d %H:%M:%S} UTC (in {span})"


def jobs_table(jobs: list[JobView], now: datetime) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("JOB", "QUEUE", "STATE", "ATTEMPT", "GPUS", "POS", "AGE"):
        table.add_column(column, no_wrap=True)
    table.add_column("REASON", overflow="fold")  # wrapped on a narrow terminal, never cut
    for job in jobs:
        position = "-" if job.position is None else str(job.position)
        table.add_row(job.job_id, job.queue, job.state, str(job.attempt), str(job.gpus), position,
                      _ago(job.submitted_at, now), job.reason)
    return table


def describe_text(explained: Explanation, now: datetime) -> str:
    """The human-readable description of one job: what it is, why it is where it is, what happened."""
    job = explained.job
    lines = [
        f"Job:            {job.job_id}  ({job.name})",
        f"Tenant / queue: {job.tenant} / {job.queue}",
        f"State:          {job.state} (attempt {job.attempt})",
        f"Priority class: {job.priority_class}",
        f"Size:           {job.replicas} pods, {job.gpus} GPUs",
    ]
    if job.cluster:
        lines.append(f"Cluster:        {job.cluster}")
    lines.append(f"Submitted:      {_stamp(job.submitted_at)}  ({_ago(job.submitted_at, now)} ago)")
    lines.append("")
    lines.append(f"Why:            {explained.summary}")
    if job.state == "pending":
        position = explained.position
        lines.append(f"Position:       {'unknown' if position is None else position} (0 = next)")
        lines.append(f"Estimated start: {_in(explained.estimated_start, now)}")
    if explained.reason:
        lines.append(f"Reason:         {explained.reason}")
    if explained.message:
        lines.append(f"Message:        {explained.message}")
    lines.append("")
    lines.append("History:")
    for item in explained.history:
        why = " ".join(part for part in (item.reason, item.message) if part)
        lines.append(f"  {_stamp(item.at)}  {item.state:<11} attempt {item.attempt}  {why}".rstrip())
    return "\n".join(lines)


def queues_table(queues: list[QueueView]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("QUEUE", "TENANT", "COHORT", "GPU QUOTA", "IN USE", "BORROWED", "RUNNING"):
        table.add_column(column, no_wrap=True)
    table.add_column("PENDING (GPUS)", no_wrap=True)
    for queue in queues:
        usage = queue.usage
        gpu_quota = ", ".join(f"{res.removeprefix('gpu:')}={q.nominal}" for res, q in sorted(queue.quotas.items())
                              if res.startswith("gpu:")) or "-"
        in_use = (sum(v for k, v in usage.allocated.items() if k.startswith("gpu:")) if usage is not None
                  else queue.gpus_running)
        borrowed = sum(v for k, v in usage.borrowed.items() if k.startswith("gpu:")) if usage is not None else 0
        jobs = queue.jobs
        running = sum(jobs.get(s, 0) for s in ("admitted", "running", "preempting"))
        table.add_row(queue.name, queue.tenant, queue.cohort or "-", gpu_quota, str(in_use),
                      str(borrowed), str(running), f"{jobs.get('pending', 0)} ({queue.gpus_pending})")
    return table


def top_view(client: Client, now: datetime) -> Group:
    """Queues, then the jobs that hold or wait for GPUs."""
    queues = client.queues()
    active = client.list_jobs(limit=1000, active=True).items
    active.sort(key=lambda j: (j.state != "running", j.queue, j.position or 0))
    gpus = sum(q.gpus_running for q in queues)
    title = Text(f"muster top  {now:%H:%M:%S} UTC  {gpus} GPUs allocated, {len(active)} active jobs", style="bold")
    return Group(title, Text(""), queues_table(queues), Text(""), jobs_table(active[:40], now))


def recurring_accepted_text(result: RecurringAccepted, now: datetime) -> str:
    """What ``submit`` prints for a spec with ``schedule``: the recurring job and its next firings."""
    verb = "created" if result.created else ("updated" if result.changed else "unchanged")
    state = " (suspended)" if result.suspended else ""
    lines = [f"recurring job {result.name} {verb}{state}: schedule {result.schedule!r} (UTC)"]
    lines += [f"  next: {_in(at, now)}" for at in result.next_firings]
    return "\n".join(lines)


def recurring_table(items: list[RecurringView], now: datetime) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("NAME", "QUEUE", "SCHEDULE", "STATE", "NEXT FIRING", "LAST JOB"):
        table.add_column(column)
    for item in items:
        upcoming = item.next_firings
        recent = item.recent_firings
        last = f"{recent[0].job_id} ({recent[0].state})" if recent else "-"
        table.add_row(item.name, item.queue, item.schedule, "suspended" if item.suspended else "active",
                      _in(upcoming[0], now) if upcoming else "-", last)
    return table


def recurring_text(item: RecurringView, now: datetime) -> str:
    """One recurring job: schedule, next firings, the jobs recent firings submitted."""
    lines = [
        f"Recurring job:  {item.name}",
        f"Tenant / queue: {item.tenant} / {item.queue}  (defined by {item.user})",
        f"Schedule:       {item.schedule} (UTC){'  SUSPENDED' if item.suspended else ''}",
        f"Created:        {_stamp(item.created_at)}",
        "Next firings:",
    ]
    lines += [f"  {_in(at, now)}" for at in item.next_firings] or ["  none (suspended)"]
    lines.append("Recent firings:")
    lines += [f"  {_stamp(f.fired_at)}  {f.job_id}  {f.state}" for f in item.recent_firings] \
        or ["  none seen yet"]
    return "\n".join(lines)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def _now() -> datetime:
    return datetime.now(UTC)


# ---------------------------------------------------------------------------------------------- commands

_output = click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--idempotency-key", default=None, help="retrying with the same key never submits twice")
def submit(file: Path, idempotency_key: str | None) -> None:
    """Submit the job spec in FILE (YAML or JSON)."""
    try:
        spec = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(spec, dict):
        raise click.ClickException(f"{file}: a job spec is a mapping")
    with gateway() as client:
        result = client.submit(spec, idempotency_key=idempotency_key)
    if isinstance(result, RecurringAccepted):
        click.echo(recurring_accepted_text(result, _now()))
        return
    note = " (already submitted with this key)" if result.duplicate else ""
    click.echo(f"{result.job_id} {result.state}{note}")


def change_line(job: JobView) -> str:
    """One job change as ``muster get|list --watch`` prints it."""
    position = "" if job.position is None else f" position {job.position}"
    why = f" {job.reason}" if job.reason else ""
    return f"{_stamp(job.updated_at)}  {job.job_id}  {job.queue}  {job.state}{position}{why}"


def _watch(client: Client, output: str, *, show: Any, until_finished: str | None = None,
           job_id: str | None = None, queue: str | None = None, tenant: str | None = None) -> None:
    """Follow the live stream: ``show()`` once it is open, then every job change until ``until_finished``
    (a job id) finishes or the stream ends."""
    for event in client.watch(kinds=("job",), job_id=job_id, queue=queue, tenant=tenant):
        if isinstance(event, StreamOpened):
            show()
        elif isinstance(event, JobsChanged):
            for job in event.jobs:
                click.echo(job.model_dump_json() if output == "json" else change_line(job))
                if until_finished is not None and job.job_id == until_finished and job.state in TERMINAL_STATES:
                    return


_watch_option = click.option("-w", "--watch", is_flag=True,
                             help="then print every change as it happens (the gateway's live stream)")


@click.command()
@click.argument("job_id")
@_output
@_watch_option
def get(job_id: str, output: str, watch: bool) -> None:
    """Show one job."""
    with gateway() as client:
        def show() -> None:
            job = client.get(job_id)
            if output == "json":
                _print_json(job.model_dump(mode="json"))
            else:
                _console().print(jobs_table([job], _now()))

        if not watch:
            show()
            return
        with contextlib.suppress(KeyboardInterrupt):
            _watch(client, output, show=show, until_finished=job_id, job_id=job_id)


@click.command("list")
@click.option("--queue", default=None)
@click.option("--state", default=None, help="pending, running, succeeded, ... or submitted")
@click.option("--tenant", default=None, help="administrators: another tenant's jobs")
@click.option("--all", "show_all", is_flag=True, help="include finished jobs")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@_output
@_watch_option
def list_jobs(queue: str | None, state: str | None, tenant: str | None, show_all: bool, limit: int,
              output: str, watch: bool) -> None:
    """List your jobs (unfinished ones unless --all or --state)."""
    active = None if show_all or state is not None else True  # the gateway filters, so --limit counts the shown
    with gateway() as client:
        def show() -> None:
            page = client.list_jobs(queue=queue, state=state, tenant=tenant, limit=limit, active=active)
            jobs, total = page.items, page.total
            if output == "json":
                _print_json([job.model_dump(mode="json") for job in jobs])
            elif not jobs:
                click.echo("no jobs")
            else:
                _console().print(jobs_table(jobs, _now()))
                if total > len(jobs):
                    click.echo(f"{len(jobs)} of {total} shown, newest first (--limit to see more)")

        if not watch:
            show()
            return
        with contextlib.suppress(KeyboardInterrupt):
            _watch(client, output, show=show, queue=queue, tenant=tenant)


@click.command()
@click.argument("job_id")
def describe(job_id: str) -> None:
    """Why a job is where it is: history, reason, queue position, estimated start."""
    with gateway() as client:
        explained = client.describe(job_id)
    click.echo(describe_text(explained, _now()))


@click.command()
@click.argument("job_id")
@click.option("--reason", default="", help="recorded with the cancellation")
def cancel(job_id: str, reason: str) -> None:
    """Cancel a job (a running one is stopped)."""
    with gateway() as client:
        client.cancel(job_id, reason)
    click.echo(f"{job_id} cancellation requested")


@click.command()
@click.argument("job_id")
def suspend(job_id: str) -> None:
    """Suspend a job: it keeps its place in the queue but does not run."""
    with gateway() as client:
        client.suspend(job_id)
    click.echo(f"{job_id} suspension requested")


@click.command()
@click.argument("job_id")
def resume(job_id: str) -> None:
    """Resume a suspended job."""
    with gateway() as client:
        client.resume(job_id)
    click.echo(f"{job_id} resumption requested")


@click.command("set-priority")
@click.argument("job_id")
@click.argument("priority_class")
def set_priority(job_id: str, priority_class: str) -> None:
    """Move a job to another priority class."""
    with gateway() as client:
        client.set_priority(job_id, priority_class)
    click.echo(f"{job_id} priority class change to {priority_class} requested")


@click.command()
@click.argument("job_id")
@click.argument("replicas", type=click.IntRange(1, 4096))
def scale(job_id: str, replicas: int) -> None:
    """Ask for a new gang size of an elastic job."""
    with gateway() as client:
        client.scale(job_id, replicas)
    click.echo(f"{job_id} scale to {replicas} requested")


@click.command()
@_output
def queues(output: str) -> None:
    """Queues with quotas, GPUs in use and waiting work."""
    with gateway() as client:
        items = client.queues()
    if output == "json":
        _print_json([item.model_dump(mode="json") for item in items])
    else:
        _console().print(queues_table(items))


@click.command()
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True, help="seconds")
@click.option("--once", is_flag=True, help="print one view and exit")
def top(interval: float, once: bool) -> None:
    """A live view of queues, GPU use and active jobs (Ctrl-C to leave)."""
    console = _console()
    with gateway() as client:
        if once:
            console.print(top_view(client, _now()))
            return
        try:
            with Live(top_view(client, _now()), console=console, auto_refresh=False, screen=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(top_view(client, _now()), refresh=True)
        except KeyboardInterrupt:
            pass


@click.group(invoke_without_command=True)
@_output
@click.pass_context
def recurring(ctx: click.Context, output: str) -> None:
    """Recurring jobs (specs with `schedule`): lists them; subcommands get, suspend, resume, delete."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(recurring_list, output=output)


@recurring.command("list")
@click.option("--tenant", default=None, help="administrators: another tenant's recurring jobs")
@_output
def recurring_list(output: str, tenant: str | None = None) -> None:
    """List your recurring jobs with their next firing."""
    with gateway() as client:
        items = client.recurring_jobs(tenant)
    if output == "json":
        _print_json([item.model_dump(mode="json") for item in items])
    elif not items:
        click.echo("no recurring jobs")
    else:
        _console().print(recurring_table(items, _now()))


@recurring.command("get")
@click.argument("name")
@_output
def recurring_get(name: str, output: str) -> None:
    """Show one recurring job: next firings and the jobs recent firings submitted."""
    with gateway() as client:
        item = client.recurring(name)
    if output == "json":
        _print_json(item.model_dump(mode="json"))
    else:
        click.echo(recurring_text(item, _now()))


def _recurring_action(name: str, action: Literal["suspend", "resume", "delete"], done: str) -> None:
    with gateway() as client:
        if action == "suspend":
            result = client.suspend_recurring(name)
        elif action == "resume":
            result = client.resume_recurring(name)
        else:
            result = client.delete_recurring(name)
    click.echo(f"recurring job {name} {'' if result.changed else 'already '}{done}")


@recurring.command("suspend")
@click.argument("name")
def recurring_suspend(name: str) -> None:
    """Stop firing NAME (jobs it already submitted are not touched)."""
    _recurring_action(name, "suspend", "suspended")


@recurring.command("resume")
@click.argument("name")
def recurring_resume(name: str) -> None:
    """Fire NAME again (a firing missed while suspended fires only within the starting deadline)."""
    _recurring_action(name, "resume", "resumed")


@recurring.command("delete")
@click.argument("name")
def recurring_delete(name: str) -> None:
    """Delete NAME (jobs it already submitted are not touched)."""
    _recurring_action(name, "delete", "deleted")
