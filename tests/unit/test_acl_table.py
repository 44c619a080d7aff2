"""The ACL table (``services.runtime.kafka.acls``): each principal may do what its service needs, and no more."""

from __future__ import annotations

import pytest

from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DECISIONS_TOPIC,
    DISPATCHES_TOPIC,
    INTENTS_TOPIC,
    JOBS_TOPIC,
    RUNS_TOPIC,
    STATUS_TOPIC,
    TOPICS,
    USAGE_TOPIC,
    dlq_topic,
    tenant_intents_topic,
)
from services.runtime.broker.security import BrokerSecurity
from services.runtime.kafka import acls
from services.runtime.kafka.acls import Operation, ResourceType, acl_table, allowed, principals, tenant_principal
from services.runtime.kafka.principals import KafkaCredentials

TENANTS = ("team-a", "team-b")
TABLE = acl_table(TENANTS)
R, W, C, D = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def may(principal: str, operation: Operation, name: str, resource: ResourceType = TOPIC) -> bool:
    return allowed(TABLE, principal, operation, resource, name)


def writers(topic: str) -> set[str]:
    everyone = principals(TENANTS)
    return {p for p in everyone if may(p, W, topic)}


def readers(topic: str) -> set[str]:
    return {p for p in principals(TENANTS) if may(p, R, topic)}


def test_every_registry_topic_has_its_one_producer_and_nobody_else() -> None:
    producer = {INTENTS_TOPIC: acls.GATEWAY, CAPACITY_TOPIC: acls.NODE_WATCHER, DECISIONS_TOPIC: acls.QUEUE_MANAGER,
                DISPATCHES_TOPIC: acls.DISPATCHER, RUNS_TOPIC: acls.NODE_WATCHER, STATUS_TOPIC: acls.QUEUE_MANAGER,
                USAGE_TOPIC: acls.QUOTA_ACCOUNTANT, JOBS_TOPIC: acls.QUEUE_MANAGER, CONFIG_TOPIC: acls.GATEWAY}
    assert set(producer) == set(TOPICS)
    for topic, principal in producer.items():
        assert writers(topic) == {principal}, topic
        assert acls.SERVICE_PRINCIPALS[TOPICS[topic].producer.replace("_", "-")] == principal


def test_a_tenant_writes_and_reads_only_its_own_intents() -> None:
    a, b = tenant_principal("team-a"), tenant_principal("team-b")
    assert writers(tenant_intents_topic("team-a")) == {a}
    assert readers(tenant_intents_topic("team-a")) == {a, acls.QUEUE_MANAGER}
    assert not may(a, W, tenant_intents_topic("team-b")) and not may(a, R, tenant_intents_topic("team-b"))
    assert not may(a, W, INTENTS_TOPIC) and not may(a, R, INTENTS_TOPIC)
    assert may(a, R, dlq_topic(tenant_intents_topic("team-a")))  # why its own intents were refused
    assert not may(a, R, dlq_topic(tenant_intents_topic("team-b")))
    for topic in TOPICS:  # no shared topic at all: statuses, specs and usage of others stay out of sight
        assert not may(a, R, topic) and not may(b, W, topic)
    assert may(a, R, "tenant-team-a.pipeline", GROUP) and not may(a, R, "tenant-team-b.pipeline", GROUP)
    assert not may(a, R, "tenant-team-ab.x", GROUP)  # a longer tenant name is another tenant


def test_the_queue_manager_reads_every_intents_topic_and_dead_letters_them() -> None:
    qm = acls.QUEUE_MANAGER
    for topic in (INTENTS_TOPIC, tenant_intents_topic("team-a"), tenant_intents_topic("later-tenant")):
        assert may(qm, R, topic)
    for topic in (INTENTS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC, *(tenant_intents_topic(t) for t in TENANTS)):
        assert may(qm, W, dlq_topic(topic))
    assert not may(qm, W, INTENTS_TOPIC) and not may(qm, W, tenant_intents_topic("team-a"))
    assert may(qm, R, "muster-queue-manager", GROUP) and may(qm, R, "muster-queue-manager.gpu-a", GROUP)


@pytest.mark.parametrize("service", sorted(acls.SERVICE_PRINCIPALS))
def test_no_service_creates_topics_or_writes_intents_but_the_gateway(service: str) -> None:
    principal = acls.SERVICE_PRINCIPALS[service]
    for topic in TOPICS:
        assert not may(principal, C, topic)
    assert may(principal, W, INTENTS_TOPIC) == (service == "gateway")
    for tenant in TENANTS:
        assert not may(principal, W, tenant_intents_topic(tenant))
    assert not any(rule.resource is ResourceType.CLUSTER for rule in TABLE)


def test_the_accountant_owns_its_prefix() -> None:
    qa = acls.QUOTA_ACCOUNTANT
    prefix = acls.QUOTA_ACCOUNTANT_PREFIX
    assert prefix == "muster-quota-accountant"
    for operation in (R, W, C):
        assert may(qa, operation, f"{prefix}-allocation-changelog")
    assert may(qa, R, prefix, GROUP)
    assert may(qa, W, f"{prefix}-tx", ResourceType.TRANSACTIONAL_ID)
    assert not may(qa, C, USAGE_TOPIC) and may(qa, W, USAGE_TOPIC)
    assert not any(may(p, C, f"{prefix}-x") for p in principals(TENANTS) if p != qa)


def test_the_table_is_sorted_unique_and_grows_only_by_tenants() -> None:
    assert sorted(set(TABLE)) == TABLE
    assert len(acl_table(())) + 2 * len(acls.tenant_bindings("x")) == len(TABLE)
    assert {r.principal for r in TABLE} <= set(principals(TENANTS)) - set(acls.SUPER_USERS)


def test_broker_configuration_denies_by_default() -> None:
    security = BrokerSecurity(KafkaCredentials.for_tenants(TENANTS))
    props = security.listeners("127.0.0.1", 9092, 9093)
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:broker;User:muster-admin"
    assert "PLAINTEXT://" not in props["listeners"].replace("SASL_PLAINTEXT://", "")
    assert props["listener.security.protocol.map"] == "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    scram = security.format_arguments()
    assert scram.count("--add-scram") == len(principals(TENANTS))


def test_credentials_are_private_and_completed(tmp_path: object) -> None:
    from pathlib import Path

    from services.runtime.kafka.principals import load_or_create

    path = Path(str(tmp_path)) / "kafka-credentials.yaml"
    first = load_or_create(path, ["team-a"])
    assert path.stat().st_mode & 0o077 == 0
    again = load_or_create(path, ["team-a", "team-c"])
    assert again.password("tenant-team-a") == first.password("tenant-team-a")
    assert "tenant-team-c" in again.passwords and "tenant-team-c" in load_or_create(path, []).passwords
    env = again.tenant("team-a", "h:1").environment()
    assert env["MUSTER_KAFKA_SASL_USERNAME"] == "tenant-team-a"
    assert env["MUSTER_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"


def test_a_dashboard_reads_the_status_record_and_usage_topics_and_writes_nothing() -> None:
    table = acl_table(TENANTS, ("ops",))
    ops = acls.dashboard_principal("ops")
    assert ops == "dashboard-ops" and ops in principals(TENANTS, ("ops",))
    for topic in TOPICS:
        assert allowed(table, ops, R, TOPIC, topic) == (topic in (STATUS_TOPIC, JOBS_TOPIC, USAGE_TOPIC)), topic
        assert not allowed(table, ops, W, TOPIC, topic) and not allowed(table, ops, C, TOPIC, topic)
    for tenant in TENANTS:
        assert not allowed(table, ops, R, TOPIC, tenant_intents_topic(tenant))
    assert allowed(table, ops, R, GROUP, "dashboard-ops.main")
    assert not allowed(table, ops, R, GROUP, "dashboard-opsx.main")
    assert not allowed(table, ops, R, GROUP, "tenant-team-a.x")
    # a dashboard adds its own rules and changes nobody else's
    assert set(table) - set(TABLE) == set(acls.dashboard_bindings("ops"))
    assert {r.principal for r in set(table) - set(TABLE)} == {ops}
