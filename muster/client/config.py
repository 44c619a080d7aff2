"""Where a client connects: named contexts in the user's ``~/.config/muster/config.yaml`` (as kubectl keeps
clusters), the environment, and the ``.muster/cli.yaml`` that ``muster up`` writes.

::

    current-context: local
    contexts:
      local: {url: http://127.0.0.1:8000, token: ...}       # written by `muster up`
      prod:  {url: https://muster.example.com, token-file: ~/.secrets/muster-token}

``MUSTER_CONFIG`` names another file; ``XDG_CONFIG_HOME`` moves the default folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from muster.client.errors import ConfigurationError

#: the project file ``muster up`` writes (``url``, ``token``), looked up from the current directory upwards
CLI_CONFIG = Path(".muster") / "cli.yaml"


@dataclass(frozen=True)
class Context:
    name: str
    url: str
    token: str

    def __repr__(self) -> str:  # never show the token
        return f"Context(name={self.name!r}, url={self.url!r})"


@dataclass(frozen=True)
class ClientSettings:
    url: str
    token: str

    def __repr__(self) -> str:  # never show the token
        return f"ClientSettings(url={self.url!r})"


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("MUSTER_CONFIG"):
        return Path(env["MUSTER_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "muster" / "config.yaml"


def read_config(path: Path) -> dict[str, Any]:
    """The contexts file as a mapping (``{"contexts": {}}`` when there is none)."""
    if not path.is_file():
        return {"contexts": {}}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
        raise ConfigurationError(f"{path}: expected a mapping with `contexts` (name -> url, token)")
    data.setdefault("contexts", {})
    return data


def resolve_context(name: str | None, environ: Mapping[str, str] | None = None) -> Context | None:
    """The named context, else the current one; None when the file selects none (and none was named)."""
    path = user_config_path(environ)
    data = read_config(path)
    chosen = name or data.get("current-context")
    if not chosen:
        return None
    entry = data["contexts"].get(chosen)
    if not isinstance(entry, dict):
        known = ", ".join(sorted(data["contexts"])) or "none"
        raise ConfigurationError(f"no context {chosen!r} in {path} (known: {known}); "
                                 "see `muster config get-contexts`")
    url = entry.get("url")
    token = entry.get("token")
    if token is None and entry.get("token-file"):
        token_file = Path(str(entry["token-file"])).expanduser()
        if not token_file.is_file():
            raise ConfigurationError(f"context {chosen!r}: token-file {token_file} does not exist")
        token = token_file.read_text(encoding="utf-8").strip()
    if not url or not token:
        raise ConfigurationError(f"context {chosen!r} in {path} needs `url` and `token` (or `token-file`)")
    return Context(str(chosen), str(url).rstrip("/"), str(token))


def _find_project_file(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / CLI_CONFIG
        if candidate.is_file():
            return candidate
    return None


def load_settings(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> ClientSettings:
    """Connection settings; first match wins: ``MUSTER_URL`` and ``MUSTER_TOKEN``; the context named by
    ``MUSTER_CONTEXT``; the file at ``MUSTER_CLI_CONFIG``, else ``.muster/cli.yaml`` from ``cwd`` upwards;
    the current context of the user's contexts file."""
    env = os.environ if environ is None else environ
    url, token = env.get("MUSTER_URL"), env.get("MUSTER_TOKEN")
    named = env.get("MUSTER_CONTEXT")
    if (url is None or token is None) and named:
        chosen = resolve_context(named, env)
        if chosen is not None:
            url, token = url or chosen.url, token or chosen.token
    path = Path(env["MUSTER_CLI_CONFIG"]) if env.get("MUSTER_CLI_CONFIG") else _find_project_file(cwd or Path.cwd())
    if (url is None or token is None) and path is not None and path.is_file():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ConfigurationError(f"{path}: expected a mapping with url and token")
        url = url or data.get("url")
        token = token or data.get("token")
    if url is None or token is None:
        current = resolve_context(None, env)
        if current is not None:
            url, token = url or current.url, token or current.token
    if not url:
        raise ConfigurationError("no gateway address: set MUSTER_URL, pick a context (`muster config get-contexts`) "
                                 "or run `muster up` (it writes .muster/cli.yaml and the context `local`)")
    if not token:
        raise ConfigurationError("no API token: set MUSTER_TOKEN or add `token` to .muster/cli.yaml")
    return ClientSettings(str(url).rstrip("/"), str(token))


def context_settings(name: str | None = None, environ: Mapping[str, str] | None = None) -> ClientSettings:
    """The settings of the named context, else of the current one; unlike ``load_settings`` nothing else
    is consulted."""
    chosen = resolve_context(name, environ)
    if chosen is None:
        raise ConfigurationError(f"no current context in {user_config_path(environ)}: name one, or "
                                 "`muster config use-context NAME`")
    return ClientSettings(chosen.url, chosen.token)
