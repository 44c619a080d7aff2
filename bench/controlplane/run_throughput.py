"""``muster bench throughput``: a private broker, then every throughput scenario."""

from __future__ import annotations

from bench.controlplane.stack import private_broker
from bench.controlplane.throughput import throughput


async def main(*, quick: bool, bootstrap: str | None, debounce_s: float | None = None) -> str:
    async with private_broker(bootstrap) as broker:
        table = await throughput(broker, quick=quick, debounce_s=debounce_s)
    return table.render()
