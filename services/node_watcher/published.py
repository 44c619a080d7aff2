"""What the capacity topic last said about this cluster's nodes: read once at start to retire vanished nodes."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from schemas.capacity import NodeStateObserved
from schemas.topics import CAPACITY_TOPIC
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.table import CompactedTable

log = logging.getLogger(__name__)


def live_nodes(rows: dict[str, object], cluster: str) -> set[str]:
    """Nodes of ``cluster`` whose latest capacity record is a ``NodeStateObserved`` (not removed). Pure."""
    prefix = f"{cluster}/"
    return {key[len(prefix):] for key, envelope in rows.items()
            if key.startswith(prefix) and isinstance(getattr(envelope, "payload", None), NodeStateObserved)}


async def published_nodes(settings: KafkaSettings, cluster: str, *, within: float = 60.0) -> set[str]:
    """The nodes of ``cluster`` the compacted capacity topic still lists as present."""
    table = CompactedTable(settings, CAPACITY_TOPIC)
    stop = asyncio.Event()
    await table.start()
    follower = asyncio.create_task(table.run(stop), name="capacity snapshot")
    try:
        async with asyncio.timeout(within):
            await table.wait_caught_up()
        return live_nodes(dict(table.items()), cluster)
    finally:
        stop.set()
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await table.close()
