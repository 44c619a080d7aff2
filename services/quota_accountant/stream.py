"""The accountant's Faust app: agents over its inputs, the ledger's tables on changelog topics.

The only module that imports ``faust``. It runs embedded in the service's event loop (``start`` /
``stop`` from the accountant's background task), not under ``faust worker``: the service's runner owns
the loop, the signals (SIGTERM, SIGINT), ``/metrics`` and ``/healthz``, as for every other service.

Names (for ACLs and operations), with ``APP_ID`` = ``muster-quota-accountant``:

- consumer group: ``muster-quota-accountant`` (the app id);
- changelog topics (compacted, created by the app at start unless they exist):
  ``muster-quota-accountant-<table>-changelog`` for ``<table>`` in attempts, settled, allocation, decayed,
  budgets, bought, burst;
- the Faust assignor's leader topic: ``muster-quota-accountant-__assignor-__leader``.

A prefixed ACL on ``muster-quota-accountant`` (topics and group) covers all of them.

Delivery: every input event is acknowledged to Faust by hand (``noack`` streams) only after the
accountant's handler returned, i.e. after the usage messages it caused were acknowledged by the broker
and its table rows were handed to the producer; Faust commits an offset only once every event up to it
is acknowledged, and flushes its producer (the changelog rows) before it commits. A handler that fails
leaves its event unacknowledged, so its offset is never committed, and ends the service.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import tempfile
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import faust
from faust import Stream
from faust.exceptions import AlreadyConfiguredWarning
from faust.types import StreamT

from services.quota_accountant.ledger_rows import TABLES, Change, TableName
from services.runtime.kafka import KafkaSettings

log = logging.getLogger(__name__)

APP_ID = "muster-quota-accountant"
CONSUMER_GROUP = APP_ID
LEADER_TOPIC = f"{APP_ID}-__assignor-__leader"
#: one partition per table: the accountant is a single instance (per-queue aggregates need every input)
TABLE_PARTITIONS = 1

Ack = Callable[[], Awaitable[None]]
"""Acknowledges one input record to Faust (its offset may then be committed)."""
EventHandler = Callable[[str, bytes | None, Ack], Awaitable[None]]
"""Called with (input topic, record value, its ack) for every input record, in order per partition; the
handler calls the ack once the record's outputs are acknowledged, possibly after it returned."""
Rows = Mapping[TableName, Mapping[str, bytes]]
RecoveredHandler = Callable[[Callable[[], Rows]], Awaitable[None]]
"""Called once the tables are recovered (at start and after every rebalance) with a reader of every
table's rows."""


def changelog_topic(table: TableName) -> str:
    return f"{APP_ID}-{table}-changelog"


CHANGELOG_TOPICS: tuple[str, ...] = tuple(changelog_topic(t) for t in TABLES)

#: Faust's consumer logs these when a partition it fetches has records its streams have not taken
FAUST_CONSUMER_LOGGER = "faust.transport.drivers.aiokafka"
_STREAM_IDLE = ("Stream has not started processing", "Stream stopped processing, or is slow for")


class ChangelogIdleFilter(logging.Filter):
    """Faust's consumer checks every assigned partition for records that no stream processed, and logs an
    ERROR with a page of explanations when it finds some. A changelog partition is read only while the tables
    recover and never by a stream: once the accountant writes its tables again, its changelogs have records
    no stream takes, by design, and the check fires every few seconds on a service that works. Those records
    are logged at DEBUG here; the same check on an input topic stays an ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and any(idle in str(record.msg) for idle in _STREAM_IDLE):
            args = record.args if isinstance(record.args, tuple) else ()
            if any(getattr(arg, "topic", None) in CHANGELOG_TOPICS for arg in args):
                record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
                # the logger let it through as an ERROR: as a DEBUG record it goes out only where DEBUG is on
                return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_CHANGELOG_IDLE = ChangelogIdleFilter()


def quiet_changelog_idle_checks() -> None:
    """Install ``ChangelogIdleFilter`` on Faust's consumer logger (once)."""
    consumer_log = logging.getLogger(FAUST_CONSUMER_LOGGER)
    if _CHANGELOG_IDLE not in consumer_log.filters:
        consumer_log.addFilter(_CHANGELOG_IDLE)


def broker_urls(bootstrap: str) -> list[str]:
    return [f"kafka://{host.strip()}" for host in bootstrap.split(",") if host.strip()]


def broker_auth(kafka: KafkaSettings) -> dict[str, Any]:
    """``KafkaSettings`` security as Faust app settings (``broker_credentials``), from the same client
    options the aiokafka kit uses: PLAINTEXT, SSL (mutual TLS with a certificate), SASL_PLAINTEXT and
    SASL_SSL with PLAIN or SCRAM."""
    options = kafka.client_options()
    protocol = kafka.security_protocol
    context: ssl.SSLContext | None = options.get("ssl_context")
    if protocol == "PLAINTEXT":
        return {}
    if protocol == "SSL":
        return {"broker_credentials": faust.SSLCredentials(context)}
    credentials = faust.SASLCredentials(
        username=options["sasl_plain_username"], password=options["sasl_plain_password"],
        mechanism=options["sasl_mechanism"], ssl_context=context if protocol == "SASL_SSL" else None,
    )
    return {"broker_credentials": credentials}


class AccountantStreams:
    """The Faust app of one accountant: build, ``start()``, ``write()`` rows, ``stop()``."""

    def __init__(
        self,
        kafka: KafkaSettings,
        input_topics: Sequence[str],
        *,
        on_event: EventHandler,
        on_recovered: RecoveredHandler,
        replication: int = 1,
        min_insync_replicas: int | None = None,
    ) -> None:
        self._on_event = on_event
        self._input_topics = tuple(input_topics)
        self._on_recovered = on_recovered
        self.failure: asyncio.Future[None] | None = None
        # Faust keeps nothing on disk with the memory store, but still creates its data folder (by default
        # "<app id>-data" in the working directory): give it a private one that goes away with the stream
        self._datadir = tempfile.TemporaryDirectory(prefix="muster-quota-accountant-")
        self.app = faust.App(
            APP_ID,
            broker=broker_urls(kafka.bootstrap),
            broker_client_id=kafka.client_id,
            **broker_auth(kafka),
            store="memory://",
            datadir=self._datadir.name,
            autodiscover=False,
            web_enabled=False,
            key_serializer="raw",
            value_serializer="raw",
            topic_replication_factor=replication,
            topic_partitions=TABLE_PARTITIONS,
            producer_acks=-1,
            consumer_auto_offset_reset="earliest",
            broker_session_timeout=10.0,
            broker_heartbeat_interval=3.0,
            table_standby_replicas=0,
        )
        # compacted like Muster's own compacted topics: hourly segments, cleaned at 10% dirty
        configs: dict[str, Any] = {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"}
        if min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(min_insync_replicas)
        self.tables: dict[TableName, Any] = {
            name: self.app.Table(
                name, default=None, partitions=TABLE_PARTITIONS, use_partitioner=True, key_type=bytes,
                value_type=bytes,
                changelog_topic=self.app.topic(
                    changelog_topic(name), key_type=bytes, value_type=bytes, key_serializer="raw",
                    value_serializer="raw", partitions=TABLE_PARTITIONS, compacting=True, deleting=False,
                    config=configs,
                ),
            )
            for name in TABLES
        }
        for topic in input_topics:
            self._add_agent(topic)
        self.app.on_rebalance_complete.connect(self._recovered)  # type: ignore[arg-type]  # mode types it unbound

    def _add_agent(self, topic_name: str) -> None:
        source = self.app.topic(topic_name, key_type=bytes, value_type=bytes, key_serializer="raw",
                                value_serializer="raw")

        async def follow(stream: StreamT[bytes]) -> None:
            manual = cast(Stream[bytes], stream).noack()
            async for event in manual.events():

                async def ack(event: Any = event) -> None:
                    await manual.ack(event)

                try:
                    await self._on_event(topic_name, event.message.value, ack)
                except Exception as exc:  # unacknowledged: never committed; the service ends
                    log.exception("quota accountant failed on %s offset %s", topic_name, event.message.offset)
                    self.fail(exc)
                    await asyncio.Event().wait()  # hold the stream until the app stops

        self.app.agent(source, name=f"{APP_ID}.{topic_name}")(follow)

    def fail(self, exc: BaseException) -> None:
        """End the app's run with ``exc`` (``failure`` raises it)."""
        if self.failure is not None and not self.failure.done():
            self.failure.set_exception(exc)

    def rows(self) -> dict[TableName, dict[str, bytes]]:
        """Every row the tables hold now."""
        return {name: {bytes(k).decode(): bytes(v) for k, v in table.items() if v is not None}
                for name, table in self.tables.items()}

    async def _recovered(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        try:
            await self._on_recovered(self.rows)
        except Exception as exc:
            log.exception("quota accountant could not rebuild its ledger from the tables")
            self.fail(exc)
            raise

    async def write(self, changes: Sequence[Change]) -> None:
        """Set or delete table rows (each goes to its changelog topic through the app's producer), once the
        producer knows every changelog topic's partitions (nothing is awaited between that and the rows)."""
        await self._know_changelogs()
        for change in changes:
            table = self.tables[change.table]
            key = change.key.encode()
            if change.row is None:
                if key in table:
                    del table[key]
            else:
                table[key] = change.row

    def _rewind_never_committed(self) -> None:
        """Work around a gap in Faust's recovery that loses input records.

        During recovery Faust pauses the source partitions on its side only: the Kafka consumer goes on
        fetching them, and Faust drops what it fetched. Afterwards ``perform_seek`` moves each source
        partition back to its committed offset, but only when that offset is above 0; a partition with no
        committed offset (a new group, or a partition that got its first record while the service was
        down) keeps its advanced position, its first records are never processed, and the offsets of
        later ones are committed past them. Here, after Faust's seek, such partitions are moved back to
        their beginning too (what ``auto_offset_reset=earliest`` means); records read twice are folded
        idempotently."""
        consumer: Any = self.app.consumer
        faust_seek = consumer.perform_seek
        inputs = set(self._input_topics)

        async def rewind(thread: Any) -> list[Any]:
            kafka = thread._ensure_consumer()
            tps = [tp for tp in kafka.assignment() if tp.topic in inputs]
            if not tps:
                return []
            beginnings = await kafka.beginning_offsets(tps)
            rewound = []
            for tp in tps:
                if not await kafka.committed(tp):
                    kafka.seek(tp, beginnings[tp])
                    rewound.append(tp)
            return rewound

        async def perform_seek() -> None:
            await faust_seek()
            for tp in await consumer._thread.call_thread(rewind, consumer._thread):
                consumer._read_offset[tp] = None
                log.debug("rewound %s (no committed offset) to its beginning", tp)

        consumer.perform_seek = perform_seek

    async def start(self) -> None:
        quiet_changelog_idle_checks()
        self.failure = asyncio.get_running_loop().create_future()
        self._rewind_never_committed()
        await self.app.start()
        await self._know_changelogs()

    async def _know_changelogs(self) -> None:
        """Wait until the app's producer knows the partitions of every changelog topic.

        Faust declares a table's changelog topic as the table starts, and picks the partition of a row from its
        producer's cached metadata without asking the broker (``Producer.key_partition``). A topic that the
        metadata update right after its creation did not show yet (its partition had no leader yet) stays
        unknown to the producer until the next periodic refresh, minutes later, and the first row written to
        that table fails (``TypeError`` in aiokafka's partitioner): the accountant stopped there. A topic known
        once can be forgotten again: a metadata update in which its partition has no leader for a moment (a
        busy broker, an election) drops it from the cache. So this runs as the app starts and before every
        write, and asks the broker only for a topic the cache does not hold: the producer's own
        ``partitions_for`` waits for the topic's metadata, refreshing it."""
        producer: Any = self.app.producer
        kafka = producer._ensure_producer()  # the aiokafka producer under Faust's (Faust has no public handle)
        for name in CHANGELOG_TOPICS:
            if not kafka._metadata.partitions_for_topic(name):
                await kafka.partitions_for(name)

    async def stop(self) -> None:
        if self.failure is not None and self.failure.done():
            # a failed handler or flush left inputs unacknowledged for good: Faust would wait for their
            # acknowledgement before it stops (``stream_wait_empty``), forever. They are not committed
            # either way; the service ends and reads them again when it starts. (The consumer reads the
            # setting as it stops, so setting it late is what is meant here.)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AlreadyConfiguredWarning)
                self.app.conf.stream_wait_empty = False
        await self.app.stop()
        if self.failure is not None and not self.failure.done():
            self.failure.cancel()
        self._datadir.cleanup()
