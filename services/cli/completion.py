"""Shell completion: click's own mechanism (``_MUSTER_COMPLETE=bash_source muster``, or ``muster completion
SHELL``), with job ids, queue names and configuration item names completed from the gateway.

A completion asks the gateway once, for at most ``LIMIT`` items, with a ``TIMEOUT_S`` timeout, and says nothing
at all when it cannot (no gateway configured, unreachable, a refused token): a shell must never hang or print
errors while the user presses Tab.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

import click
from click.shell_completion import CompletionItem, get_completion_class

from muster.client import CONFIG_COLLECTIONS, Client, ConfigKind

#: how long one completion may wait for the gateway, seconds
TIMEOUT_S = 1.5
#: the most jobs a completion lists (newest first)
LIMIT = 200
SHELLS = ("bash", "zsh", "fish")


def _client(ctx: click.Context) -> Client:
    """The gateway client the command would use, honouring ``--context`` given before the subcommand (the
    group's callback, which exports it, does not run while completing)."""
    environ = dict(os.environ)
    context_name = ctx.find_root().params.get("context_name")
    if context_name:
        environ["MUSTER_CONTEXT"] = context_name
    return Client.from_env(environ, timeout=TIMEOUT_S)


def _quietly(ctx: click.Context, read: Callable[[Client], list[CompletionItem]]) -> list[CompletionItem]:
    try:
        with _client(ctx) as client:
            return read(client)
    except Exception:  # completion is best effort: never a traceback in the user's shell
        return []


def _jobs(active: bool | None) -> Callable[[click.Context, click.Parameter, str], list[CompletionItem]]:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        def read(client: Client) -> list[CompletionItem]:
            page = client.list_jobs(limit=LIMIT, active=active)
            return [CompletionItem(job.job_id, help=f"{job.state} {job.name} ({job.queue})")
                    for job in page.items if job.job_id.startswith(incomplete)]

        return _quietly(ctx, read)

    return complete


complete_job_ids = _jobs(None)
"""Any job the caller may see (get, describe)."""
complete_active_job_ids = _jobs(True)
"""Unfinished jobs only (cancel, suspend, resume, set-priority, scale)."""


def complete_queues(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    def read(client: Client) -> list[CompletionItem]:
        return [CompletionItem(q.name, help=f"tenant {q.tenant}")
                for q in client.queues() if q.name.startswith(incomplete)]

    return _quietly(ctx, read)


def complete_recurring(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    def read(client: Client) -> list[CompletionItem]:
        return [CompletionItem(r.name, help=r.schedule) for r in client.recurring_jobs()[:LIMIT]
                if r.name.startswith(incomplete)]

    return _quietly(ctx, read)


def complete_config_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The names of the items of the kind given before (``muster delete KIND <Tab>``)."""
    kind = ctx.params.get("kind")
    if kind not in CONFIG_COLLECTIONS:
        return []

    def read(client: Client) -> list[CompletionItem]:
        document = client.config()
        field = CONFIG_COLLECTIONS[cast(ConfigKind, kind)].replace("-", "_")
        items: list[Any] = getattr(document, field)
        return [CompletionItem(item.name) for item in items if item.name.startswith(incomplete)]

    return _quietly(ctx, read)


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script of SHELL (click's own), to be evaluated by the shell.

    \b
    bash (~/.bashrc):                  eval "$(muster completion bash)"
    zsh (~/.zshrc, after compinit):    eval "$(muster completion zsh)"
    fish (~/.config/fish/config.fish): muster completion fish | source

    Job ids (get, describe, cancel, ...), queue names and configuration item names are completed from the
    gateway of the current context.
    """
    from services.cli.main import cli

    cls = get_completion_class(shell)
    assert cls is not None  # every SHELLS entry is one of click's
    click.echo(cls(cli, {}, "muster", "_MUSTER_COMPLETE").source())
