"""``muster topics``: create Muster's topics (idempotently) and list the registry."""

from __future__ import annotations

import asyncio

import click

from schemas.topics import TOPICS
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
@click.option("--bootstrap", envvar="MUSTER_KAFKA_BOOTSTRAP", required=True, help="broker address host:port")
def create(bootstrap: str) -> None:
    """Create every registry topic and its .dlq if missing (safe to run again)."""
    from services.runtime.kafka.settings import KafkaSettings
    from services.runtime.kafka.topics import ensure_registry_topics

    created = asyncio.run(ensure_registry_topics(KafkaSettings(bootstrap=bootstrap)))
    click.echo(f"created {len(created)} topics" + (f": {', '.join(sorted(created))}" if created else " (all existed)"))
