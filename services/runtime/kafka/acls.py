"""Who may do what on an authenticated Kafka: Muster's principals and the ACL table, in one place.

The broker authenticates every client (SASL/SCRAM-SHA-512) and authorises it with
``StandardAuthorizer`` and ``allow.everyone.if.no.acl.found=false``: a principal may do only what
this table grants. The broker's own principal and the admin are super users (the broker for
replication and the controller quorum; the admin creates topics, users and these ACLs, and runs the
tooling). Every other principal is one service or one tenant:

- ``muster-gateway``: writes ``muster.intents.v1`` (it authenticates HTTP users itself) and
  ``muster.config.v1``; reads status, config, usage, capacity, jobs, dispatches, runs.
- ``muster-queue-manager``: reads every intents topic (prefix ``muster.intents.``), runs, dispatches,
  config, capacity, usage, jobs, status; writes jobs, decisions, status and the dead-letter topics of
  what it consumes; its consumer groups (prefix ``muster-queue-manager``).
- ``muster-dispatcher``: reads decisions, runs; writes dispatches and the dead letters of decisions and
  runs; its consumer groups (prefix ``muster-dispatcher-``).
- ``muster-node-watcher``: writes capacity and runs; reads capacity (what it published before a restart).
- ``muster-quota-accountant``: reads decisions, runs, dispatches, config, capacity, usage; writes usage
  and the dead letters of its inputs; and everything under its own prefix ``muster-quota-accountant``
  (topics it creates itself such as changelogs, consumer groups, transactional ids).
- ``tenant-<t>``: writes and reads ``muster.intents.<t>.v1`` (its own intents topic, nothing else),
  reads its dead letters ``muster.intents.<t>.v1.dlq``; consumer groups ``tenant-<t>.*``. A tenant reads no
  shared topic: statuses, records and usage carry every tenant's jobs, and Kafka authorises whole topics, not
  keys. A tenant's own view of its jobs is the gateway's (its API and live stream filter by tenant).
- ``dashboard-<name>``: a platform-wide reader (a dashboard, a notebook, a status consumer): reads
  ``muster.status.v1``, ``muster.jobs.v1`` and ``muster.usage.v1``, every tenant's, and writes nothing;
  consumer groups ``dashboard-<name>.*``.

No principal but the admin may create topics (except the accountant under its prefix) or touch ACLs.
Idempotent producers need no ``IdempotentWrite`` on the cluster: since Kafka 3.0 (KIP-679) ``Write``
on a topic is enough to get a producer id, and every producing principal has that.

Pure: data and functions over it. ``acl_admin`` sends the bindings to the broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DECISIONS_TOPIC,
    DISPATCHES_TOPIC,
    INTENTS_TOPIC,
    JOBS_TOPIC,
    RUNS_TOPIC,
    STATUS_TOPIC,
    TENANT_INTENTS_PREFIX,
    USAGE_TOPIC,
    dlq_topic,
    tenant_intents_topic,
)

# ---------------------------------------------------------------- principals

BROKER = "broker"  # the nodes themselves (inter-broker and controller listeners)
ADMIN = "muster-admin"  # topic and ACL creation, tooling, tests
GATEWAY = "muster-gateway"
QUEUE_MANAGER = "muster-queue-manager"
DISPATCHER = "muster-dispatcher"
NODE_WATCHER = "muster-node-watcher"
QUOTA_ACCOUNTANT = "muster-quota-accountant"

#: principals with every right (``super.users``)
SUPER_USERS: tuple[str, ...] = (BROKER, ADMIN)
#: service name (as ``muster serve`` spells it) -> its principal
SERVICE_PRINCIPALS: dict[str, str] = {
    "gateway": GATEWAY,
    "queue-manager": QUEUE_MANAGER,
    "dispatcher": DISPATCHER,
    "node-watcher": NODE_WATCHER,
    "quota-accountant": QUOTA_ACCOUNTANT,
}
TENANT_PRINCIPAL_PREFIX = "tenant-"
DASHBOARD_PRINCIPAL_PREFIX = "dashboard-"
#: what a dashboard principal reads: every job's status and record, and the quota accountant's reports
DASHBOARD_READS = (STATUS_TOPIC, JOBS_TOPIC, USAGE_TOPIC)

#: consumer groups of the services (each prefix covers a service's instances and shards)
QUEUE_MANAGER_GROUP_PREFIX = "muster-queue-manager"
DISPATCHER_GROUP_PREFIX = "muster-dispatcher-"
#: the quota accountant's own namespace: topics (changelogs, repartitions), consumer groups and
#: transactional ids whose names start with it (its application id) are its to create and use
QUOTA_ACCOUNTANT_PREFIX = "muster-quota-accountant"


def tenant_principal(tenant: str) -> str:
    """The Kafka user of a tenant's external producers (``tenant-<t>``; tenant names never start a
    service's principal, which all start with ``muster-``)."""
    return f"{TENANT_PRINCIPAL_PREFIX}{tenant}"


def tenant_group_prefix(tenant: str) -> str:
    """Consumer groups a tenant may use (to read its intents or dead letters with committed offsets)."""
    return f"{tenant_principal(tenant)}."


def dashboard_principal(name: str) -> str:
    """The Kafka user of a read-only, platform-wide status reader (``dashboard-<name>``)."""
    return f"{DASHBOARD_PRINCIPAL_PREFIX}{name}"


def dashboard_group_prefix(name: str) -> str:
    """Consumer groups a dashboard may use (``StatusConsumer(group=...)`` must start with it)."""
    return f"{dashboard_principal(name)}."


# ---------------------------------------------------------------- the table


class ResourceType(IntEnum):
    """Kafka's resource type codes (the wire values of the CreateAcls request)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    """Kafka's ACL operation codes. ``READ`` and ``WRITE`` imply ``DESCRIBE``."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


ALLOW = 3  # Kafka's permission type code for ALLOW (this table grants; it never denies)
ANY_HOST = "*"


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ALLOW rule: ``principal`` may ``operation`` on the resource ``name`` (literal or prefix)."""

    principal: str  # the user name, without ``User:``
    operation: Operation
    resource: ResourceType
    name: str
    pattern: PatternType = PatternType.LITERAL

    @property
    def kafka_principal(self) -> str:
        return f"User:{self.principal}"

    def describe(self) -> str:
        kind = "prefix" if self.pattern is PatternType.PREFIXED else "literal"
        return f"{self.principal}: {self.operation.name} {self.resource.name} {self.name!r} ({kind})"


def _topics(principal: str, operation: Operation, *names: str) -> Iterator[AclBinding]:
    for name in names:
        yield AclBinding(principal, operation, ResourceType.TOPIC, name)


def _prefixed(principal: str, resource: ResourceType, prefix: str, *operations: Operation) -> Iterator[AclBinding]:
    for operation in operations:
        yield AclBinding(principal, operation, resource, prefix, PatternType.PREFIXED)


def _dead_letters(*topics: str) -> tuple[str, ...]:
    return tuple(dlq_topic(t) for t in topics)


QM_CONSUMED = (INTENTS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)
DISPATCHER_CONSUMED = (DECISIONS_TOPIC, RUNS_TOPIC)
ACCOUNTANT_CONSUMED = (DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)


def service_bindings() -> list[AclBinding]:
    """What each service may do (tenants apart: ``tenant_bindings``)."""
    R, W = Operation.READ, Operation.WRITE
    rules: list[AclBinding] = [
        # gateway: the shared intents topic and the configuration; reads its views
        *_topics(GATEWAY, W, INTENTS_TOPIC, CONFIG_TOPIC),
        *_topics(GATEWAY, R, STATUS_TOPIC, CONFIG_TOPIC, USAGE_TOPIC, CAPACITY_TOPIC, JOBS_TOPIC, DISPATCHES_TOPIC,
                 RUNS_TOPIC),
        # queue manager: every intents topic (tenants' included: a prefix, as tenants come and go), its inputs
        # and state; writes its records, decisions, statuses and the dead letters of the shared inputs (a
        # tenant's intents dead letters are granted with the tenant)
        *_prefixed(QUEUE_MANAGER, ResourceType.TOPIC, TENANT_INTENTS_PREFIX, R),
        *_topics(QUEUE_MANAGER, R, RUNS_TOPIC, DISPATCHES_TOPIC, CONFIG_TOPIC, CAPACITY_TOPIC, USAGE_TOPIC,
                 JOBS_TOPIC, STATUS_TOPIC),
        *_topics(QUEUE_MANAGER, W, JOBS_TOPIC, DECISIONS_TOPIC, STATUS_TOPIC, *_dead_letters(*QM_CONSUMED)),
        *_prefixed(QUEUE_MANAGER, ResourceType.GROUP, QUEUE_MANAGER_GROUP_PREFIX, R),
        # dispatcher
        *_topics(DISPATCHER, R, *DISPATCHER_CONSUMED),
        *_topics(DISPATCHER, W, DISPATCHES_TOPIC, *_dead_letters(*DISPATCHER_CONSUMED)),
        *_prefixed(DISPATCHER, ResourceType.GROUP, DISPATCHER_GROUP_PREFIX, R),
        # node watcher
        *_topics(NODE_WATCHER, W, CAPACITY_TOPIC, RUNS_TOPIC),
        *_topics(NODE_WATCHER, R, CAPACITY_TOPIC),
        # quota accountant: its inputs and usage, and its own namespace (a stream processor's changelogs)
        *_topics(QUOTA_ACCOUNTANT, R, *ACCOUNTANT_CONSUMED, CONFIG_TOPIC, CAPACITY_TOPIC, USAGE_TOPIC),
        *_topics(QUOTA_ACCOUNTANT, W, USAGE_TOPIC, *_dead_letters(*ACCOUNTANT_CONSUMED)),
        *_prefixed(QUOTA_ACCOUNTANT, ResourceType.TOPIC, QUOTA_ACCOUNTANT_PREFIX, R, W, Operation.CREATE,
                   Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
        *_prefixed(QUOTA_ACCOUNTANT, ResourceType.GROUP, QUOTA_ACCOUNTANT_PREFIX, R, Operation.DESCRIBE),
        *_prefixed(QUOTA_ACCOUNTANT, ResourceType.TRANSACTIONAL_ID, QUOTA_ACCOUNTANT_PREFIX, W, Operation.DESCRIBE),
    ]
    return rules


def tenant_bindings(tenant: str) -> list[AclBinding]:
    """What a tenant's principal may do (its own intents topic and its dead letters, nothing else), and the
    queue manager's right to dead-letter that tenant's refused intents."""
    principal, topic = tenant_principal(tenant), tenant_intents_topic(tenant)
    return [
        AclBinding(principal, Operation.WRITE, ResourceType.TOPIC, topic),
        AclBinding(principal, Operation.READ, ResourceType.TOPIC, topic),
        AclBinding(principal, Operation.READ, ResourceType.TOPIC, dlq_topic(topic)),
        *_prefixed(principal, ResourceType.GROUP, tenant_group_prefix(tenant), Operation.READ),
        AclBinding(QUEUE_MANAGER, Operation.WRITE, ResourceType.TOPIC, dlq_topic(topic)),
    ]


def dashboard_bindings(name: str) -> list[AclBinding]:
    """What a dashboard principal may do: read the status, record and usage topics and use its groups."""
    principal = dashboard_principal(name)
    return [*_topics(principal, Operation.READ, *DASHBOARD_READS),
            *_prefixed(principal, ResourceType.GROUP, dashboard_group_prefix(name), Operation.READ)]


def acl_table(tenants: Iterable[str], dashboards: Iterable[str] = ()) -> list[AclBinding]:
    """Every ACL of a Muster cluster with these tenants and dashboards, sorted and without repeats."""
    rules = set(service_bindings())
    for tenant in tenants:
        rules.update(tenant_bindings(tenant))
    for name in dashboards:
        rules.update(dashboard_bindings(name))
    return sorted(rules)


def principals(tenants: Iterable[str], dashboards: Iterable[str] = ()) -> list[str]:
    """Every SCRAM user of a Muster cluster: broker, admin, the five services, one per tenant and dashboard."""
    return [*SUPER_USERS, *SERVICE_PRINCIPALS.values(), *(tenant_principal(t) for t in sorted(set(tenants))),
            *(dashboard_principal(d) for d in sorted(set(dashboards)))]


def allowed(bindings: Iterable[AclBinding], principal: str, operation: Operation, resource: ResourceType,
            name: str) -> bool:
    """Whether ``bindings`` let ``principal`` do ``operation`` on ``name``, as Kafka's authorizer decides for
    allow rules (super users aside): a literal or prefix match; ``READ``/``WRITE`` also allow ``DESCRIBE``."""
    implied = {operation}
    if operation is Operation.DESCRIBE:
        implied |= {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    for rule in bindings:
        if rule.principal != principal or rule.resource is not resource or rule.operation not in implied:
            continue
        if rule.name == name if rule.pattern is PatternType.LITERAL else name.startswith(rule.name):
            return True
    return False
