"""The SCRAM credentials of a Muster cluster's Kafka principals (``acls``): generated once per cluster,
kept in one YAML file only its owner may read, and turned into each client's ``KafkaSettings``."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from services.runtime.credentials import write_private
from services.runtime.kafka.acls import ADMIN, SERVICE_PRINCIPALS, dashboard_principal, principals, tenant_principal
from services.runtime.kafka.settings import KafkaSettings

CREDENTIALS_FILE = "kafka-credentials.yaml"
MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class KafkaCredentials:
    """User name -> password of every principal of one cluster (the broker's own included)."""

    passwords: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def generate(cls, names: Iterable[str]) -> KafkaCredentials:
        """Fresh random passwords (hex: nothing to escape in JAAS or SCRAM configuration)."""
        return cls({name: secrets.token_hex(24) for name in names})

    @classmethod
    def for_tenants(cls, tenants: Iterable[str], dashboards: Iterable[str] = ()) -> KafkaCredentials:
        """Fresh credentials of broker, admin, services, ``tenants`` and ``dashboards``."""
        return cls.generate(principals(tenants, dashboards))

    def including(self, names: Iterable[str]) -> KafkaCredentials:
        """These credentials plus fresh ones for the ``names`` that have none."""
        missing = [n for n in names if n not in self.passwords]
        if not missing:
            return self
        return KafkaCredentials({**self.passwords, **KafkaCredentials.generate(missing).passwords})

    def password(self, name: str) -> str:
        try:
            return self.passwords[name]
        except KeyError:
            raise KeyError(f"no Kafka credentials for {name!r}") from None

    def settings(self, name: str, bootstrap: str, **fields: Any) -> KafkaSettings:
        """Client settings that authenticate as ``name`` (SASL_PLAINTEXT, SCRAM-SHA-512)."""
        return KafkaSettings(bootstrap=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=MECHANISM,
                             sasl_username=name, sasl_password=self.password(name), **fields)

    def admin(self, bootstrap: str, **fields: Any) -> KafkaSettings:
        return self.settings(ADMIN, bootstrap, **fields)

    def service(self, service: str, bootstrap: str, **fields: Any) -> KafkaSettings:
        """``service`` as ``muster serve`` names it (``queue-manager``...)."""
        return self.settings(SERVICE_PRINCIPALS[service], bootstrap, **fields)

    def tenant(self, tenant: str, bootstrap: str, **fields: Any) -> KafkaSettings:
        return self.settings(tenant_principal(tenant), bootstrap, **fields)

    def dashboard(self, name: str, bootstrap: str, **fields: Any) -> KafkaSettings:
        """A read-only status reader's settings (``dashboard-<name>``)."""
        return self.settings(dashboard_principal(name), bootstrap, **fields)

    def save(self, path: Path) -> None:
        write_private(path, yaml.safe_dump({"mechanism": MECHANISM, "users": dict(self.passwords)}, sort_keys=True))

    @classmethod
    def load(cls, path: Path) -> KafkaCredentials:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return cls({str(k): str(v) for k, v in (data.get("users") or {}).items()})


def load_or_create(path: Path, tenants: Iterable[str], dashboards: Iterable[str] = ()) -> KafkaCredentials:
    """The credentials saved at ``path``, completed with any principal of ``tenants`` and ``dashboards`` they
    lack (saved again then); new ones when there is no file."""
    wanted = principals(tenants, dashboards)
    if path.is_file():
        current = KafkaCredentials.load(path)
        completed = current.including(wanted)
        if completed is not current:
            completed.save(path)
        return completed
    fresh = KafkaCredentials.generate(wanted)
    fresh.save(path)
    return fresh
