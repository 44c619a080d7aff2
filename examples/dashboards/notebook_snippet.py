"""Muster's jobs in a notebook: read the status topic for a few seconds, then look at a table.

In a notebook cell (top-level ``await`` works in Jupyter)::

    from examples.dashboards.notebook_snippet import snapshot
    rows = await snapshot("127.0.0.1:9092", seconds=5)
    import pandas as pd; df = pd.DataFrame(rows)          # pandas is not one of Muster's dependencies
    df.groupby(["queue", "state"]).size().unstack(fill_value=0)
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from examples.dashboards.live_status import Board, follow
from muster.client import StatusConsumer


async def snapshot(bootstrap: str, seconds: float = 5.0) -> list[dict[str, Any]]:
    """Every job's latest status as plain rows: the compacted topic read from the beginning for ``seconds``."""
    board = Board()
    async with StatusConsumer(bootstrap=bootstrap, start="beginning") as consumer:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(follow(consumer, board, None), seconds)
    return board.rows()
