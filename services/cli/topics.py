"""``muster topics``: create Muster's topics (idempotently) and list the registry."""

from __future__ import annotations

import asyncio

import click

from schemas.topics import TOPICS


@click.group()
def topics() -> None:
    """Muster's Kafka topics (the registry in schemas/topics.py)."""


@topics.command("list")
def list_topics() -> None:
    """Print the registry: name, partitions, cleanup policy, producer, message types."""
    for spec in TOPICS.values():
        click.echo(f"{spec.name:24} {spec.partitions:3}  {spec.cleanup_policy:8} {spec.producer:17} "
                   f"{', '.join(spec.message_types)}")


@topics.command("create")
@click.option("--bootstrap", envvar="MUSTER_KAFKA_BOOTSTRAP", required=True, help="broker address host:port")
def create(bootstrap: str) -> None:
    """Create every registry topic and its .dlq if missing (safe to run again)."""
    from services.runtime.kafka.settings import KafkaSettings
    from services.runtime.kafka.topics import ensure_registry_topics

    created = asyncio.run(ensure_registry_topics(KafkaSettings(bootstrap=bootstrap)))
    click.echo(f"created {len(created)} topics" + (f": {', '.join(sorted(created))}" if created else " (all existed)"))
