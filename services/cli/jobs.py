"""The ``muster`` job commands, talking to the gateway: submit, get, list, describe, cancel, suspend,
resume, set-priority, scale, queues, top, and the ``recurring`` group (list, get, suspend, resume, delete).

Every read command takes ``-o text|wide|json|yaml`` (``services.cli.output``); what text and wide print is
in ``services.cli.render``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import click
import yaml
from rich.console import Group
from rich.live import Live
from rich.text import Text

from muster.client import Client, JobsChanged, MusterError, StreamOpened, is_kube_object
from schemas.api import ActionAccepted, RecurringAccepted
from schemas.status import TERMINAL_STATES
from services.cli.completion import (
    complete_active_job_ids,
    complete_job_ids,
    complete_queues,
    complete_recurring,
)
from services.cli.output import console, emit, emit_change, is_machine, output_option
from services.cli.problems import problem_text
from services.cli.render import (
    change_line,
    describe_text,
    jobs_table,
    queues_table,
    recurring_accepted_text,
    recurring_table,
    recurring_text,
)


@contextmanager
def gateway() -> Iterator[Client]:
    """A client from the environment / CLI config (``Client.from_env``); its errors become clean click errors."""
    try:
        with Client.from_env() as client:
            yield client
    except MusterError as exc:
        raise click.ClickException(problem_text(exc)) from None


def _now() -> datetime:
    return datetime.now(UTC)


def top_view(client: Client, now: datetime) -> Group:
    """Queues, then the jobs that hold or wait for GPUs."""
    queues = client.queues()
    active = client.list_jobs(limit=1000, active=True).items
    active.sort(key=lambda j: (j.state != "running", j.queue, j.position or 0))
    gpus = sum(q.gpus_running for q in queues)
    title = Text(f"muster top  {now:%H:%M:%S} UTC  {gpus} GPUs allocated, {len(active)} active jobs", style="bold")
    return Group(title, Text(""), queues_table(queues), Text(""), jobs_table(active[:40], now))


# ---------------------------------------------------------------------------------------------- commands


def _load_yaml(file: Path) -> object:
    try:
        return yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise click.ClickException(f"{file}: not valid YAML: {exc}") from None


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--idempotency-key", default=None, help="retrying with the same key never submits twice")
@click.option("--queue", default=None, shell_complete=complete_queues,
              help="a Kubernetes object in FILE: the queue (default: its muster.dev/queue label)")
@click.option("--related", "related_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a Kubernetes object in FILE: an object its roles are read from (a TrainJob's training "
                   "runtime); repeatable")
def submit(file: Path, idempotency_key: str | None, queue: str | None, related_files: tuple[Path, ...]) -> None:
    """Submit the job spec in FILE (YAML or JSON), or a Kubernetes object of a workload kind.

    FILE may hold a JobSet, TrainJob, RayJob, RayCluster, LeaderWorkerSet, Deployment, StatefulSet or a List of
    Pods (told by its apiVersion and kind): it is submitted through Muster, which reads its roles, queues it and
    creates it, held back, in your tenant's namespace once admitted. Its queue is --queue or its
    muster.dev/queue label."""
    spec = _load_yaml(file)
    if spec is None:
        raise click.ClickException(f"{file} is empty: it should hold a job spec or a Kubernetes object")
    if not isinstance(spec, dict):
        raise click.ClickException(f"{file}: a job spec is a mapping of fields (name, queue, template...), "
                                   f"not a {type(spec).__name__}")
    with gateway() as client:
        if is_kube_object(spec):
            related = [_load_yaml(f) for f in related_files]
            if not all(isinstance(r, dict) for r in related):
                raise click.ClickException("--related: each file holds one Kubernetes object")
            result = client.submit_workload(spec, queue=queue, related=[r for r in related if isinstance(r, dict)],
                                            idempotency_key=idempotency_key)
        elif queue is not None or related_files:
            raise click.ClickException(f"{file}: --queue and --related are for a Kubernetes object; this is a job "
                                       "spec, whose queue is its own `queue`")
        else:
            result = client.submit(spec, idempotency_key=idempotency_key)
    if isinstance(result, RecurringAccepted):
        click.echo(recurring_accepted_text(result, _now()))
        return
    note = " (already submitted with this key)" if result.duplicate else ""
    click.echo(f"{result.job_id} {result.state}{note}")


def _watch(client: Client, output: str, *, show: Callable[[], None], until_finished: str | None = None,
           job_id: str | None = None, queue: str | None = None, tenant: str | None = None) -> None:
    """Follow the live stream: ``show()`` once it is open, then every job change until ``until_finished``
    (a job id) finishes or the stream ends."""
    for event in client.watch(kinds=("job",), job_id=job_id, queue=queue, tenant=tenant):
        if isinstance(event, StreamOpened):
            show()
        elif isinstance(event, JobsChanged):
            for job in event.jobs:
                if is_machine(output):
                    emit_change(job, output)
                else:
                    click.echo(change_line(job, wide=output == "wide"))
                if until_finished is not None and job.job_id == until_finished and job.state in TERMINAL_STATES:
                    return


_watch_option = click.option("-w", "--watch", is_flag=True,
                             help="then print every change as it happens (the gateway's live stream)")


@click.command()
@click.argument("job_id", shell_complete=complete_job_ids)
@output_option
@_watch_option
def get(job_id: str, output: str, watch: bool) -> None:
    """Show one job."""
    with gateway() as client:
        def show() -> None:
            job = client.get(job_id)
            if is_machine(output):
                emit(job, output)
            else:
                console().print(jobs_table([job], _now(), wide=output == "wide"))

        if not watch:
            show()
            return
        with contextlib.suppress(KeyboardInterrupt):
            _watch(client, output, show=show, until_finished=job_id, job_id=job_id)


@click.command("list")
@click.option("--queue", default=None, shell_complete=complete_queues)
@click.option("--state", default=None, help="pending, running, succeeded, ... or submitted")
@click.option("--tenant", default=None, help="administrators: another tenant's jobs")
@click.option("--all", "show_all", is_flag=True, help="include finished jobs")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@output_option
@_watch_option
def list_jobs(queue: str | None, state: str | None, tenant: str | None, show_all: bool, limit: int,
              output: str, watch: bool) -> None:
    """List your jobs (unfinished ones unless --all or --state)."""
    active = None if show_all or state is not None else True  # the gateway filters, so --limit counts the shown
    with gateway() as client:
        def show() -> None:
            page = client.list_jobs(queue=queue, state=state, tenant=tenant, limit=limit, active=active)
            jobs, total = page.items, page.total
            if is_machine(output):
                emit(jobs, output)
            elif not jobs:
                click.echo("no jobs")
            else:
                console().print(jobs_table(jobs, _now(), wide=output == "wide"))
                if total > len(jobs):
                    click.echo(f"{len(jobs)} of {total} shown, newest first (--limit to see more)")

        if not watch:
            show()
            return
        with contextlib.suppress(KeyboardInterrupt):
            _watch(client, output, show=show, queue=queue, tenant=tenant)


@click.command()
@click.argument("job_id", shell_complete=complete_job_ids)
@output_option
def describe(job_id: str, output: str) -> None:
    """Why a job is where it is: history, reason, queue position, estimated start (text and wide alike)."""
    with gateway() as client:
        explained = client.describe(job_id)
    if is_machine(output):
        emit(explained, output)
    else:
        click.echo(describe_text(explained, _now()))


def _told(job_id: str, accepted: ActionAccepted, done: str, already: str, asked: str) -> None:
    """Say what became of a request: done, already so, or not answered yet. A refusal never gets here:
    the client raises it (``Conflict``), and the command exits non-zero with the reason."""
    if accepted.outcome == "applied":
        click.echo(f"{job_id} {done}")
    elif accepted.outcome == "unchanged":
        click.echo(f"{job_id} {already}")
    else:
        click.echo(f"{job_id} {asked} requested; the queue manager has not answered yet "
                   f"(`muster describe {job_id}` shows its answer)")


@click.command()
@click.argument("job_id", shell_complete=complete_active_job_ids)
@click.option("--reason", default="", help="recorded with the cancellation")
def cancel(job_id: str, reason: str) -> None:
    """Cancel a job (a running one is stopped). A job that came from your own Kubernetes object leaves the
    object in place, stopped."""
    with gateway() as client:
        accepted = client.cancel(job_id, reason)
    _told(job_id, accepted, "cancelled", "was already cancelled", "cancellation")


@click.command()
@click.argument("job_id", shell_complete=complete_active_job_ids)
def suspend(job_id: str) -> None:
    """Suspend a waiting job: it keeps its place in the queue but does not run."""
    with gateway() as client:
        accepted = client.suspend(job_id)
    _told(job_id, accepted, "suspended", "was already suspended", "suspension")


@click.command()
@click.argument("job_id", shell_complete=complete_active_job_ids)
def resume(job_id: str) -> None:
    """Resume a suspended job."""
    with gateway() as client:
        accepted = client.resume(job_id)
    _told(job_id, accepted, "resumed: it waits in its queue again", "was not suspended", "resumption")


@click.command("set-priority")
@click.argument("job_id", shell_complete=complete_active_job_ids)
@click.argument("priority_class")
def set_priority(job_id: str, priority_class: str) -> None:
    """Move a job to another priority class."""
    with gateway() as client:
        accepted = client.set_priority(job_id, priority_class)
    _told(job_id, accepted, f"moved to priority class {priority_class}",
          f"already has priority class {priority_class}", f"priority class change to {priority_class}")


@click.command()
@click.argument("job_id", shell_complete=complete_active_job_ids)
@click.argument("replicas", type=click.IntRange(1, 4096))
def scale(job_id: str, replicas: int) -> None:
    """Ask for a new gang size of a waiting job."""
    with gateway() as client:
        accepted = client.scale(job_id, replicas)
    _told(job_id, accepted, f"resized to {replicas} for its next admission", f"already asks for {replicas}",
          f"scale to {replicas}")


@click.command()
@output_option
def queues(output: str) -> None:
    """Queues with quotas, GPUs in use and waiting work."""
    with gateway() as client:
        items = client.queues()
    if is_machine(output):
        emit(items, output)
    else:
        console().print(queues_table(items, wide=output == "wide"))


@click.command()
@click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True, help="seconds")
@click.option("--once", is_flag=True, help="print one view and exit")
def top(interval: float, once: bool) -> None:
    """A live view of queues, GPU use and active jobs (Ctrl-C to leave)."""
    out = console()
    with gateway() as client:
        if once:
            out.print(top_view(client, _now()))
            return
        try:
            with Live(top_view(client, _now()), console=out, auto_refresh=False, screen=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(top_view(client, _now()), refresh=True)
        except KeyboardInterrupt:
            pass


@click.group(invoke_without_command=True)
@output_option
@click.pass_context
def recurring(ctx: click.Context, output: str) -> None:
    """Recurring jobs (specs with `schedule`): lists them; subcommands get, suspend, resume, delete."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(recurring_list, output=output)


@recurring.command("list")
@click.option("--tenant", default=None, help="administrators: another tenant's recurring jobs")
@output_option
def recurring_list(output: str, tenant: str | None = None) -> None:
    """List your recurring jobs with their next firing."""
    with gateway() as client:
        items = client.recurring_jobs(tenant)
    if is_machine(output):
        emit(items, output)
    elif not items:
        click.echo("no recurring jobs")
    else:
        console().print(recurring_table(items, _now(), wide=output == "wide"))


@recurring.command("get")
@click.argument("name", shell_complete=complete_recurring)
@output_option
def recurring_get(name: str, output: str) -> None:
    """Show one recurring job: next firings and the jobs recent firings submitted (text and wide alike)."""
    with gateway() as client:
        item = client.recurring(name)
    if is_machine(output):
        emit(item, output)
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
@click.argument("name", shell_complete=complete_recurring)
def recurring_suspend(name: str) -> None:
    """Stop firing NAME (jobs it already submitted are not touched)."""
    _recurring_action(name, "suspend", "suspended")


@recurring.command("resume")
@click.argument("name", shell_complete=complete_recurring)
def recurring_resume(name: str) -> None:
    """Fire NAME again (a firing missed while suspended fires only within the starting deadline)."""
    _recurring_action(name, "resume", "resumed")


@recurring.command("delete")
@click.argument("name", shell_complete=complete_recurring)
def recurring_delete(name: str) -> None:
    """Delete NAME (jobs it already submitted are not touched)."""
    _recurring_action(name, "delete", "deleted")
