"""The user's named gateway contexts, as kubectl keeps clusters: ``~/.config/muster/config.yaml``.

::

    current-context: local
    contexts:
      local: {url: http://127.0.0.1:8000, token: ...}       # written by `muster up`
      prod:  {url: https://muster.example.com, token-file: ~/.secrets/muster-token}

``MUSTER_CONFIG`` names another file; ``XDG_CONFIG_HOME`` moves the default folder. The file is written
readable by its owner only (it holds tokens). ``muster config`` lists, adds, selects and removes
contexts; ``--context`` / ``MUSTER_CONTEXT`` pick one for a single command. Reading and resolving them
is the client's (``muster.client.config``), which every program using ``muster.client`` shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from muster.client import config as client_config
from muster.client.errors import ConfigurationError
from services.cli.output import emit, is_machine, output_option
from services.runtime.credentials import write_private


class ContextError(click.ClickException):
    """A context file or entry that cannot be used; the message says how to fix it."""


def user_config_path() -> Path:
    return client_config.user_config_path()


def read_config(path: Path) -> dict[str, Any]:
    try:
        return client_config.read_config(path)
    except ConfigurationError as exc:
        raise ContextError(str(exc)) from None


def write_config(path: Path, data: dict[str, Any]) -> None:
    write_private(path, yaml.safe_dump(data, sort_keys=False))


def remember(name: str, url: str, token: str, *, make_current: bool = True, path: Path | None = None) -> Path:
    """Add or replace a context (as ``muster up`` does for the system it starts); returns the file."""
    target = path or user_config_path()
    data = read_config(target)
    data["contexts"][name] = {"url": url, "token": token}
    if make_current or not data.get("current-context"):
        data["current-context"] = name
    write_config(target, data)
    return target


# ---------------------------------------------------------------------- muster config


@click.group("config")
def config() -> None:
    """Named gateway contexts (url and token) in ~/.config/muster/config.yaml."""


def _token_source(entry: object) -> str:
    """Where a context's token comes from, never the token: ``token-file <path>``, ``inline`` or ``none``."""
    if not isinstance(entry, dict):
        return "none"
    if entry.get("token-file"):
        return f"token-file {entry['token-file']}"
    return "inline" if entry.get("token") else "none"


@config.command("get-contexts")
@output_option
def get_contexts(output: str) -> None:
    """List the contexts; * marks the current one. Tokens are never shown (wide says where each comes from)."""
    path = user_config_path()
    data = read_config(path)
    current = data.get("current-context")
    entries = sorted(data["contexts"].items())
    if is_machine(output):
        emit({"file": str(path), "current-context": current, "contexts": [
            {"name": name, "url": entry.get("url") if isinstance(entry, dict) else None, "current": name == current,
             "token": _token_source(entry)} for name, entry in entries]}, output)
        return
    if not entries:
        click.echo(f"no contexts in {path}")
        return
    for name, entry in entries:
        url = entry.get("url", "?") if isinstance(entry, dict) else "?"
        line = f"{'*' if name == current else ' '} {name}\t{url}"
        click.echo(f"{line}\t{_token_source(entry)}" if output == "wide" else line)


@config.command("current-context")
def current_context() -> None:
    """Print the current context's name."""
    current = read_config(user_config_path()).get("current-context")
    if not current:
        raise ContextError("no current context: `muster config use-context NAME`")
    click.echo(current)


@config.command("use-context")
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context."""
    path = user_config_path()
    data = read_config(path)
    if name not in data["contexts"]:
        raise ContextError(f"no context {name!r} in {path}")
    data["current-context"] = name
    write_config(path, data)
    click.echo(f"current context: {name}")


@config.command("set-context")
@click.argument("name")
@click.option("--url", required=True, help="the gateway, e.g. https://muster.example.com")
@click.option("--token", default=None, help="a bearer token (stored in the file, readable by you only)")
@click.option("--token-file", default=None, type=click.Path(dir_okay=False), help="read the token from this file")
@click.option("--use", "make_current", is_flag=True, help="also make it the current context")
def set_context(name: str, url: str, token: str | None, token_file: str | None, make_current: bool) -> None:
    """Add or replace a context."""
    if (token is None) == (token_file is None):
        raise click.UsageError("give exactly one of --token and --token-file")
    path = user_config_path()
    data = read_config(path)
    entry: dict[str, str] = {"url": url.rstrip("/")}
    if token is not None:
        entry["token"] = token
    else:
        entry["token-file"] = str(token_file)
    data["contexts"][name] = entry
    if make_current or not data.get("current-context"):
        data["current-context"] = name
    write_config(path, data)
    click.echo(f"context {name} written to {path}")


@config.command("delete-context")
@click.argument("name")
def delete_context(name: str) -> None:
    """Remove a context."""
    path = user_config_path()
    data = read_config(path)
    if data["contexts"].pop(name, None) is None:
        raise ContextError(f"no context {name!r} in {path}")
    if data.get("current-context") == name:
        data.pop("current-context")
    write_config(path, data)
    click.echo(f"context {name} deleted")
