"""Benchmark 5 (``muster bench shards``): the queue manager does not shard by pool yet. The command
asks for a two-pool shard the way an operator would, reports the refusal, and runs the throughput
scenarios with the single shard there is."""

from __future__ import annotations

from bench.controlplane.stack import private_broker
from bench.controlplane.throughput import throughput
from services.queue_manager.main import build as build_queue_manager
from services.runtime.options import ServeOptions


async def main(*, quick: bool, bootstrap: str | None) -> str:
    async with private_broker(bootstrap) as broker:
        try:
            build_queue_manager(ServeOptions(kafka=broker.settings, pools=("pool-a", "pool-b")))
            refusal = "the queue manager accepted --pool: compare shards by hand"
        except ValueError as exc:
            refusal = f"sharding refused by the queue manager: {exc}"
        table = await throughput(broker, quick=quick)
    table.title = "shards: 1 shard only -- " + table.title
    table.notes.insert(0, refusal + "; 2 and 4 shards are not measured")
    return table.render()
