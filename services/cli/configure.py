"""``muster apply -f FILE`` and ``muster delete KIND NAME``: the configuration (queues, cohorts, priority
classes, tenants, GPU types, pools) through the gateway's ``/v1/config`` API, which only administrators may
change; a tenant administrator may change its own tenant's queues (within the tenant's ``queue_quota``). The
file format is in ``services.cli.manifests``; examples are in ``examples/config/``."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import click

from muster.client import Client, ConfigKind, Conflict, Forbidden, MusterError, NotFound, Unauthorized
from services.cli.completion import complete_config_names
from services.cli.jobs import gateway
from services.cli.manifests import (
    ORDER,
    Manifest,
    ManifestError,
    current_items,
    parse_manifests,
    plan,
    refers_to,
)


def _admin_refusal(exc: Forbidden | Unauthorized, what: str) -> click.ClickException:
    if isinstance(exc, Forbidden) and exc.error == "admin_required":
        return click.ClickException(
            f"{what} needs an administrator's token (or a tenant administrator's, for its own tenant's queues): "
            f"the gateway refused this one ({exc}). Use such a token "
            "(MUSTER_TOKEN, or a context made with `muster config set-context ... --token`)")
    if isinstance(exc, Forbidden):  # a tenant administrator's change its role does not allow
        return click.ClickException(f"{what}: refused ({exc})")
    return click.ClickException(f"{what}: the gateway did not accept the token ({exc})")


@contextmanager
def _admin_call(what: str) -> Iterator[None]:
    try:
        yield
    except (Forbidden, Unauthorized) as exc:
        raise _admin_refusal(exc, what) from None


def _read(path: str) -> tuple[str, str]:
    if path == "-":
        return "stdin", sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return path, handle.read()
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}") from None


#: how long ``apply`` waits for the gateway to show an item that later items of the file refer to
VISIBLE_WITHIN_S = 15.0


@click.command()
@click.option("-f", "--filename", "path", required=True, metavar="FILE",
              help="YAML with one or more kind-tagged items (`-` reads stdin)")
@click.option("--dry-run", is_flag=True, help="print what would change and change nothing")
def apply(path: str, dry_run: bool) -> None:
    """Create or update the configuration items in FILE (administrators; tenant administrators: their
    tenant's queues).

    Each YAML document is one item: `kind: Queue | Cohort | PriorityClass | Tenant | GpuType | Pool` and the
    item's fields. Every item is validated first; nothing is sent when one is invalid. Cohorts and tenants go
    before the queues that name them. Applying the same file again changes nothing and says `unchanged`.
    """
    source, text = _read(path)
    try:
        items = parse_manifests(text)
    except ManifestError as exc:
        raise click.ClickException(f"{source}: nothing applied:\n  " + "\n  ".join(exc.problems)) from None
    with gateway() as client:
        steps = plan(items, current_items(client.config()))
        if dry_run:
            for m, what, fields in steps:
                click.echo(f"{m.ref} {what if what == 'unchanged' else 'would be ' + what} (dry run)")
                for line in fields:
                    click.echo(f"  {line}")
            return
        with _admin_call("muster apply"):
            for index, (m, what, _) in enumerate(steps):
                try:
                    change = client.define(m.kind, m.item)
                    if change.changed and any(m.ref in refers_to(later) for later, _, _ in steps[index + 1:]):
                        _wait_visible(client, m)
                except Forbidden as exc:
                    if exc.error == "admin_required":
                        raise
                    raise click.ClickException(f"{m.ref}: {exc}") from None
                except Unauthorized:
                    raise
                except MusterError as exc:
                    raise click.ClickException(f"{m.ref}: {exc}") from None
                click.echo(f"{m.ref} {what if change.changed else 'unchanged'}")


def _wait_visible(client: Client, m: Manifest) -> None:
    """Until the gateway's configuration (read back from the config topic) holds ``m``: it checks the
    references of the items sent after it against that."""
    deadline = time.monotonic() + VISIBLE_WITHIN_S
    while current_items(client.config()).get(m.ref) != m.item:
        if time.monotonic() > deadline:
            raise click.ClickException(f"{m.ref} was accepted but the gateway did not show it within "
                                       f"{VISIBLE_WITHIN_S:g} s; apply the file again")
        time.sleep(0.1)


@click.command()
@click.argument("kind", type=click.Choice(ORDER))
@click.argument("name", shell_complete=complete_config_names)
def delete(kind: str, name: str) -> None:
    """Delete the configuration item NAME of KIND (administrators; tenant administrators: their tenant's
    queues).

    Refused while other items refer to it (a cohort's queues, a tenant's queues, a queue's recurring jobs),
    and while unfinished jobs are in the queue or of the priority class: cancel them or let them finish first.
    """
    with gateway() as client, _admin_call("muster delete"):
        try:
            client.undefine(cast(ConfigKind, kind), name)
        except NotFound:
            raise click.ClickException(f"no {kind} named {name!r}") from None
        except Conflict as exc:
            raise click.ClickException(f"{kind}/{name} not deleted: {exc.detail}") from None
    click.echo(f"{kind}/{name} deleted")
