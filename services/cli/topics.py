"""``muster topics``: create Muster's topics (idempotently) and list the registry."""

from __future__ import annotations

import asyncio

import click

from schemas.topics import TOPICS, dlq_topic, tenant_intents_topic
from services.cli.output import emit, is_machine, output_option


@click.group()
def topics() -> None:
    """Muster's Kafka topics (the registry in schemas/topics.py)."""


@topics.command("list")
@output_option
def list_topics(output: str) -> None:
    """Print the registry: name, partitions, cleanup policy, producer, message types; wide adds the key,
    external producers, the dead-letter topic and the topic's configuration."""
    if is_machine(output):
        emit([spec.document() for spec in TOPICS.values()], output)
        return
    for spec in TOPICS.values():
        line = (f"{spec.name:24} {spec.partitions:3}  {spec.cleanup_policy:8} {spec.producer:17} "
                f"{', '.join(spec.message_types)}")
        if output == "wide":
            external = "  (external producers too)" if spec.external_producers else ""
            settings = ", ".join(f"{k}={v}" for k, v in spec.config.items()) or "-"
            line += f"\n    key: {spec.key}{external}\n    dlq: {spec.dlq}\n    config: {settings}"
        click.echo(line)


@topics.command("create")
@click.option("--bootstrap", envvar="MUSTER_KAFKA_BOOTSTRAP", required=True,
              help="broker addresses host:port[,host:port...]")
@click.option("--replication-factor", type=int, default=None,
              help="copies of each partition; default: the number of brokers, at most 3")
@click.option("--min-insync-replicas", type=int, default=None,
              help="fewest in-sync copies a write (acks=all) needs; default: 2 from replication factor 3 on, "
                   "else 1")
@click.option("--allow-unsafe", is_flag=True, envvar="MUSTER_TOPICS_ALLOW_UNSAFE",
              help="accept a setting below replication factor 3 / min.insync.replicas 2 (a development "
                   "cluster of one or two brokers)")
@click.option("--tenant", "tenants", multiple=True, metavar="NAME",
              help="also create this tenant's own intents topic muster.intents.<NAME>.v1 (repeatable)")
@click.option("--acls", is_flag=True,
              help="also create the ACL table (services/runtime/kafka/acls.py) for the services and the "
                   "--tenant tenants; needs a super user's MUSTER_KAFKA_* credentials and a broker with an "
                   "authorizer")
def create(bootstrap: str, replication_factor: int | None, min_insync_replicas: int | None,
           allow_unsafe: bool, tenants: tuple[str, ...], acls: bool) -> None:
    """Create every registry topic and its .dlq if missing (safe to run again; existing topics are left
    as they are).

    Production needs replication factor 3 and min.insync.replicas 2, so that one broker can fail or be
    restarted without losing an acknowledged record or stopping writes: anything less is refused unless
    --allow-unsafe is given, and so is a cluster of fewer than three brokers. Existing topics below the
    chosen setting are reported.

    On a cluster with ACLs each tenant writes its own intents topic only (``--tenant``, with ``--acls``);
    the SCRAM users of the principals are the cluster administrator's to create (``muster up --auth``
    does all of it for the embedded cluster).
    """
    from services.runtime.kafka import replication as rep
    from services.runtime.kafka.settings import KafkaSettings
    from services.runtime.kafka.topics import cluster_size, ensure_registry_topics, topic_replication

    settings = KafkaSettings(bootstrap=bootstrap)
    brokers = asyncio.run(cluster_size(settings))
    try:
        replication = rep.choose(brokers, factor=replication_factor, min_insync=min_insync_replicas,
                                 allow_unsafe=allow_unsafe)
    except rep.ReplicationError as exc:
        raise click.ClickException(str(exc)) from exc
    if not replication.safe:
        click.echo(f"warning: {replication} is not safe for production: "
                   + "; ".join(replication.unsafe_reasons()), err=True)
    created = asyncio.run(ensure_registry_topics(settings, replication=replication))
    if tenants:
        from services.runtime.kafka.provision import ensure_tenant_topics

        created += asyncio.run(ensure_tenant_topics(settings, tenants, replication=replication))
    click.echo(f"{brokers} broker{'s' if brokers != 1 else ''}, {replication}: created {len(created)} topics"
               + (f": {', '.join(sorted(created))}" if created else " (all existed)"))
    if acls:
        from services.runtime.kafka.acl_admin import AclError, create_acls, wait_acls
        from services.runtime.kafka.acls import acl_table

        table = acl_table(tenants)
        try:
            asyncio.run(create_acls(settings, table))
            asyncio.run(wait_acls(settings, table))
        except AclError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"ACLs: {len(table)} (the services and {len(tenants)} tenant{'s' if len(tenants) != 1 else ''})")
    names = [name for spec in TOPICS.values() for name in (spec.name, dlq_topic(spec.name))]
    names += [name for t in tenants for name in (tenant_intents_topic(t), dlq_topic(tenant_intents_topic(t)))]
    existing = asyncio.run(topic_replication(settings, [n for n in names if n not in created]))
    below = {name: have for name, have in existing.items()
             if have.factor < replication.factor or have.min_insync < replication.min_insync}
    for name, have in sorted(below.items()):
        click.echo(f"warning: existing topic {name} has {have} (below {replication}); raise it with "
                   "kafka-reassign-partitions and kafka-configs", err=True)
