"""Development credentials written by ``muster up``: a gateway tokens file and the CLI's config."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import yaml

from schemas.config import MusterConfig


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner may read (created so, never readable by others meanwhile)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_credentials(state_dir: Path, cfg: MusterConfig, gateway_url: str) -> dict[str, Path]:
    """One admin token, and per tenant a member token (user ``<tenant>``) and a tenant administrator's
    (user ``<tenant>:tenant-admin``, who may change the tenant's queues). The gateway gets only their SHA-256
    digests; the plain tokens go to files readable by the owner alone. Returns the paths written."""
    tenants = sorted({q.tenant for q in cfg.queues} | {t.name for t in cfg.tenants}) or ["default"]
    plain: dict[str, tuple[str, str, str]] = {"admin": ("admin", tenants[0], secrets.token_urlsafe(24))}
    for tenant in tenants:
        plain[tenant] = ("member", tenant, secrets.token_urlsafe(24))
    for tenant in tenants:  # a tenant's name never holds ":", so these names are nobody else's
        plain[f"{tenant}:tenant-admin"] = ("tenant-admin", tenant, secrets.token_urlsafe(24))
    entries = [
        {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "tenant": tenant, "user": name, "role": role}
        for name, (role, tenant, token) in plain.items()
    ]
    paths = {
        "tokens": state_dir / "tokens.yaml",
        "cli": state_dir / "cli.yaml",
        "tenant_tokens": state_dir / "tenant-tokens.yaml",
    }
    write_private(paths["tokens"], yaml.safe_dump(entries, sort_keys=False))
    write_private(paths["cli"], yaml.safe_dump({"url": gateway_url, "token": plain["admin"][2]}, sort_keys=False))
    tenant_cfgs = {name: {"url": gateway_url, "token": token, "tenant": tenant, "role": role}
                   for name, (role, tenant, token) in plain.items()}
    write_private(paths["tenant_tokens"], yaml.safe_dump(tenant_cfgs, sort_keys=False))
    return paths
