"""``muster bench throughput``: a private broker, then every throughput scenario; with ``--brokers N``, the
cost of replication instead (``replication.py``)."""

from __future__ import annotations

from bench.system import replication
from bench.system.stack import private_broker
from bench.system.throughput import throughput


async def main(*, quick: bool, bootstrap: str | None, debounce_s: float | None = None, brokers: int = 1) -> str:
    if brokers > 1:  # the cost of replication: one broker and the cluster, side by side
        return await replication.main(quick=quick, brokers=brokers, debounce_s=debounce_s)
    async with private_broker(bootstrap) as broker:
        table = await throughput(broker, quick=quick, debounce_s=debounce_s)
    return table.render()
