"""Making an authenticated cluster ready for Muster, as its admin: every principal's SCRAM user, the
registry's topics, each tenant's intents topic (``muster.intents.<tenant>.v1``) and the ACL table
(``acls``), enforced by every broker before this returns. Idempotent: run it on every start, and
again when tenants are added."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from schemas.topics import tenant_intents_spec
from services.runtime.kafka.acl_admin import create_acls, upsert_scram_users, wait_acls
from services.runtime.kafka.acls import BROKER, acl_table, principals
from services.runtime.kafka.principals import KafkaCredentials
from services.runtime.kafka.replication import Replication
from services.runtime.kafka.settings import KafkaSettings
from services.runtime.kafka.topics import create_topics, ensure_registry_topics, plans_for


@dataclass(frozen=True)
class Provisioned:
    topics_created: list[str]
    acls: int
    users: int


async def ensure_tenant_topics(settings: KafkaSettings, tenants: Iterable[str], *,
                               replication: Replication | None = None) -> list[str]:
    """Each tenant's intents topic and its dead-letter topic, if missing."""
    specs = [tenant_intents_spec(t) for t in sorted(set(tenants))]
    return await create_topics(settings, plans_for(specs), replication=replication) if specs else []


async def provision(admin: KafkaSettings, credentials: KafkaCredentials, tenants: Iterable[str], *,
                    dashboards: Iterable[str] = (), replication: Replication | None = None) -> Provisioned:
    """SCRAM users, topics and ACLs for ``tenants`` and read-only ``dashboards`` (``admin``: a super user's
    settings)."""
    names = sorted(set(tenants))
    readers = sorted(set(dashboards))
    users = {name: credentials.password(name) for name in principals(names, readers) if name != BROKER}
    await upsert_scram_users(admin, users)  # those formatted in already are set again, to the same password
    created = await ensure_registry_topics(admin, replication=replication)
    created += await ensure_tenant_topics(admin, names, replication=replication)
    table = acl_table(names, readers)
    await create_acls(admin, table)
    await wait_acls(admin, table)
    return Provisioned(created, len(table), len(users))
