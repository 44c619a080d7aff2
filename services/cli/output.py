"""``-o text|wide|json|yaml`` of the read commands: the option, and the machine-readable forms (JSON, YAML)
of what the API answered. ``text`` and ``wide`` are each command's own rendering (``services.cli.render``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Literal

import click
import yaml
from pydantic import BaseModel
from rich.console import Console

Format = Literal["text", "wide", "json", "yaml"]
FORMATS: tuple[Format, ...] = ("text", "wide", "json", "yaml")

output_option = click.option(
    "-o", "--output", type=click.Choice(FORMATS), default="text", show_default=True,
    help="text; wide: more columns; json or yaml: the API's objects as they are")


def is_machine(output: str) -> bool:
    return output in ("json", "yaml")


def plain(value: BaseModel | Sequence[BaseModel] | Any) -> Any:
    """JSON-able data: a model (or a list of them) as the API writes it, anything else as it is."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def machine_text(value: BaseModel | Sequence[BaseModel] | Any, output: str) -> str:
    data = plain(value)
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n")
    return json.dumps(data, indent=2, sort_keys=True)


def emit(value: BaseModel | Sequence[BaseModel] | Any, output: str) -> None:
    """Print ``value`` as JSON (indented, keys sorted) or YAML (one document, fields in the API's order)."""
    click.echo(machine_text(value, output))


def emit_change(value: BaseModel | Any, output: str) -> None:
    """One change of a watch: a JSON object per line, or a YAML document after a ``---`` line."""
    if output == "yaml":
        click.echo("---")
        click.echo(machine_text(value, "yaml"))
    else:
        click.echo(json.dumps(plain(value), sort_keys=True))


def console() -> Console:
    """A terminal's own width; 200 columns when the output goes to a file or a pipe (not 80)."""
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
