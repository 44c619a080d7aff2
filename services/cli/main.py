"""The ``muster`` command. Subcommands are imported only when used, so ``muster --help`` stays fast."""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

# name -> "module:attribute" of a click command
SUBCOMMANDS: dict[str, str] = {
    "up": "services.cli.up:up",
    "sim": "services.cli.whatif:sim",
    "kubesim": "services.kubesim.cli:kubesim",
    "topics": "services.cli.topics:topics",
    "log": "services.cli.log:log",
    "serve": "services.cli.serve:serve",
    "submit": "services.cli.jobs:submit",
    "get": "services.cli.jobs:get",
    "list": "services.cli.jobs:list_jobs",
    "describe": "services.cli.jobs:describe",
    "cancel": "services.cli.jobs:cancel",
    "suspend": "services.cli.jobs:suspend",
    "resume": "services.cli.jobs:resume",
    "set-priority": "services.cli.jobs:set_priority",
    "scale": "services.cli.jobs:scale",
    "queues": "services.cli.jobs:queues",
    "top": "services.cli.jobs:top",
    "recurring": "services.cli.jobs:recurring",
    "bench": "services.cli.bench:bench",
    "chaos": "services.cli.chaos:chaos",
    "k8s": "services.kubereal.cli:k8s",
    "config": "services.cli.contexts:config",
    "apply": "services.cli.configure:apply",
    "delete": "services.cli.configure:delete",
    "completion": "services.cli.completion:completion",
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            module_name, attr = self._lazy[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise click.ClickException(f"{self._lazy[cmd_name]} is not a command")
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, lazy=SUBCOMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="muster")
@click.option("--context", "context_name", envvar="MUSTER_CONTEXT", default=None,
              help="the gateway context to use (`muster config get-contexts`)")
def cli(context_name: str | None) -> None:
    """Muster: job-level queueing, quotas, fair share, gang admission and dispatch for GPU clusters."""
    if context_name:
        os.environ["MUSTER_CONTEXT"] = context_name  # read by every command's gateway client


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
