"""Bearer tokens: the tokens file and the lookup of a token's principal (tenant, user, role)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from schemas.envelope import Name

Role = Literal["admin", "tenant-admin", "member", "viewer"]
#: roles that may only read: every request but GET / HEAD / OPTIONS answers 403 read_only
READ_ONLY_ROLES: frozenset[str] = frozenset({"viewer"})


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a user of a tenant, with a role."""

    tenant: str
    user: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_tenant_admin(self) -> bool:
        """A tenant administrator: a member who may also create, change and delete its own tenant's queues,
        within the tenant's ``queue_quota`` (``services.gateway.tenant_queues``)."""
        return self.role == "tenant-admin"

    @property
    def may_act(self) -> bool:
        """False for read-only roles (a viewer sees its tenant's jobs and queues, and changes nothing)."""
        return self.role not in READ_ONLY_ROLES

    def owns(self, tenant: str) -> bool:
        """True when the principal may see or act on things of ``tenant``."""
        return self.is_admin or self.tenant == tenant


class TokenEntry(BaseModel):
    """One line of the tokens file: ``token_sha256`` (hex), or a plain ``token`` for development."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_sha256: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")] | None = None
    token: Annotated[str, Field(min_length=8, max_length=512)] | None = None
    tenant: Name
    user: Annotated[str, Field(min_length=1, max_length=128)]
    role: Role = "member"

    @model_validator(mode="after")
    def _one_secret(self) -> TokenEntry:
        if (self.token_sha256 is None) == (self.token is None):
            raise ValueError("give exactly one of token_sha256 or token")
        return self

    @property
    def digest(self) -> str:
        if self.token_sha256 is not None:
            return self.token_sha256.lower()
        assert self.token is not None
        return token_digest(self.token)

    def __repr__(self) -> str:  # never show a secret
        return f"TokenEntry(tenant={self.tenant!r}, user={self.user!r}, role={self.role!r})"

    __str__ = __repr__


_ENTRIES = TypeAdapter(list[TokenEntry])


def token_digest(token: str) -> str:
    """The hex SHA-256 of a token, as the tokens file stores it."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenTable:
    """Maps a bearer token to its principal, comparing digests in constant time."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self._entries = [(entry.digest, Principal(entry.tenant, entry.user, entry.role)) for entry in entries]

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def parse(cls, text: str, source: str = "<tokens>") -> TokenTable:
        """YAML: a list of entries, or a mapping with a ``tokens`` list. Errors name the source, never a token."""
        try:
            raw: Any = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{source}: not valid YAML") from exc
        if isinstance(raw, dict):
            raw = raw.get("tokens")
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise ValueError(f"{source}: expected a list of token entries")
        try:
            entries = _ENTRIES.validate_python(raw)
        except ValueError as exc:
            locations = sorted({".".join(str(p) for p in err["loc"]) for err in getattr(exc, "errors", list)()})
            raise ValueError(f"{source}: invalid token entries at {locations or 'top level'}") from None
        return cls(entries)

    @classmethod
    def load(cls, path: str | Path) -> TokenTable:
        return cls.parse(Path(path).read_text(encoding="utf-8"), source=str(path))

    def authenticate(self, token: str) -> Principal | None:
        """The principal of ``token``, or None. Every entry is compared, so timing tells nothing."""
        digest = token_digest(token)
        found: Principal | None = None
        for stored, principal in self._entries:
            if hmac.compare_digest(stored, digest) and found is None:
                found = principal
        return found
