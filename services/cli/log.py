"""``muster log export``: the topics a what-if replay needs, written to a JSON-lines file; and the live read
that ``muster sim --from-kafka`` shares with it.

The window's topics (intents, decisions, runs, dispatches) are read from ``--since`` on (the offsets of
that time, ``offsets_for_times``), the compacted ones (capacity, config, status) whole, each up to the end
offsets it had when the read started; then the read stops.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from services.simulator.logfile import REPLAY_TOPICS, WINDOW_TOPICS, LogExport, write_export
from services.spec.durations import parse_duration


def parse_since(text: str | None, now: datetime) -> datetime | None:
    """``7d``, ``36h``, ``90m`` (that long before ``now``) or an ISO 8601 time; None for the whole log."""
    if text is None or not text.strip():
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        try:
            return now - timedelta(seconds=parse_duration(text))
        except ValueError:
            raise ValueError(f"--since: expected a duration (7d, 36h) or an ISO 8601 time, got {text!r}") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def read_live(bootstrap: str, since: datetime | None, *, within_s: float = 120.0) -> tuple[list[bytes], datetime]:
    """The record values of the replay's topics and the time the read started (the window's end)."""
    from schemas.topics import TOPICS
    from services.runtime.kafka.reader import read_to_end
    from services.runtime.kafka.settings import KafkaSettings

    settings = KafkaSettings(bootstrap=bootstrap, client_id="muster-log-export")
    as_of = datetime.now(UTC)
    from_ms = {t: int(since.timestamp() * 1000) for t in WINDOW_TOPICS} if since else None
    records = await read_to_end(settings, {t: TOPICS[t].partitions for t in REPLAY_TOPICS},
                                within_s=within_s, from_ms=from_ms)
    return [r.value for r in records if r.value is not None], as_of


def live_export(bootstrap: str, since_text: str | None) -> LogExport:
    """Read the live log into memory, as ``--from-file`` would read its export."""
    from schemas.codec import DecodeError, decode

    since = parse_since(since_text, datetime.now(UTC))
    values, as_of = _read(bootstrap, since)
    envelopes, bad = [], 0
    for value in values:
        try:
            envelopes.append(decode(value))
        except DecodeError:
            bad += 1
    return LogExport(as_of, since, envelopes, bad)


def _read(bootstrap: str, since: datetime | None) -> tuple[list[bytes], datetime]:
    from services.runtime.kafka.reader import KafkaError

    try:
        return asyncio.run(read_live(bootstrap, since))
    except (KafkaError, TimeoutError, OSError) as exc:
        raise click.ClickException(f"cannot read the log from {bootstrap}: {exc or type(exc).__name__}") from exc


@click.group(name="log")
def log() -> None:
    """Muster's event log on Kafka: what happened, for replays."""


@log.command("export")
@click.option("--bootstrap", envvar="MUSTER_KAFKA_BOOTSTRAP", required=True,
              help="broker addresses host:port[,host:port...]")
@click.option("--since", "since_text", help="start of the window: a duration before now (7d, 36h) or an "
              "ISO 8601 time; default: the whole log")
@click.option("-o", "--output", "path", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="the JSON-lines file to write ('-': standard output)")
def export(bootstrap: str, since_text: str | None, path: str) -> None:
    """Write what a what-if replay needs (submissions, decisions, runs, capacity, configuration, job states)
    as JSON lines: a header, then every record's envelope as on the wire. `muster sim --from-file` reads it."""
    try:
        since = parse_since(since_text, datetime.now(UTC))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    values, as_of = _read(bootstrap, since)
    if path == "-":
        count = write_export(sys.stdout.buffer, values, as_of=as_of, since=since)
        sys.stdout.buffer.flush()
    else:
        with Path(path).open("wb") as fh:
            count = write_export(fh, values, as_of=as_of, since=since)
    click.echo(f"{count} records written to {path} (as of {as_of.isoformat(timespec='seconds')})", err=True)
