"""The development credentials ``muster up`` writes: an admin, and per tenant a member and a tenant
administrator, each a token the gateway's tokens file knows only by digest."""

from __future__ import annotations

from pathlib import Path

import yaml

from schemas.config import MusterConfig, QueueConfig, TenantConfig
from services.gateway.auth import TokenTable
from services.runtime.credentials import write_credentials


def test_every_tenant_gets_a_member_and_a_tenant_administrator(tmp_path: Path) -> None:
    cfg = MusterConfig(queues=[QueueConfig(name="q-a", tenant="team-a")],
                       tenants=[TenantConfig(name="team-b", namespace="team-b")])
    paths = write_credentials(tmp_path, cfg, "http://127.0.0.1:1")
    table = TokenTable.load(paths["tokens"])
    plain = yaml.safe_load(paths["tenant_tokens"].read_text(encoding="utf-8"))
    assert "token:" not in paths["tokens"].read_text(encoding="utf-8")  # digests only
    found = {name: table.authenticate(entry["token"]) for name, entry in plain.items()}
    assert {name: (p.tenant, p.role) for name, p in found.items() if p is not None} == {
        "admin": ("team-a", "admin"),
        "team-a": ("team-a", "member"), "team-b": ("team-b", "member"),
        "team-a:tenant-admin": ("team-a", "tenant-admin"), "team-b:tenant-admin": ("team-b", "tenant-admin"),
    }
    for path in paths.values():
        assert path.stat().st_mode & 0o077 == 0
