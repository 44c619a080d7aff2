"""A live terminal dashboard of Muster's jobs, read straight from the status topic (``StatusConsumer``).

    python examples/dashboards/live_status.py --bootstrap 127.0.0.1:9092          # open cluster (muster up)
    set -a; . .muster/kafka-clients/dashboard-local.env; set +a                     # authenticated cluster:
    python examples/dashboards/live_status.py --group dashboard-local.board         # its read-only principal

Per queue: jobs by state and the GPUs running; below, the latest active jobs. Started without a group it
reads the compacted topic from the beginning (every job's latest status), then follows live; with a group it
resumes where that group left off. ``--for SECONDS`` prints the board once after that long and exits (for
scripts and tests).

Why a terminal board with Rich: the people who watch a GPU queue live in terminals and ssh sessions, Rich is
already one of Muster's dependencies, and the browser view exists (the gateway's ``/ui``; Grafana dashboards
of the services' metrics are in ``deploy/``). A notebook takes ``Board.rows()`` as a table (see
``notebook_snippet.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from muster.client import JobForgotten, JobStatus, KafkaSettings, StatusConsumer, StatusEvent
from schemas.status import TERMINAL_STATES, JobStatusChanged

STATES = ("pending", "admitted", "running", "suspended", "succeeded", "failed", "cancelled", "rejected")


@dataclass
class Board:
    """Every job's latest status, folded from the topic's events (repeats and reordering across jobs allowed)."""

    jobs: dict[str, JobStatusChanged] = field(default_factory=dict)

    def fold(self, event: StatusEvent) -> None:
        if isinstance(event, JobStatus):
            earlier = self.jobs.get(event.status.job_id)
            if earlier is None or event.status.updated_at >= earlier.updated_at:
                self.jobs[event.status.job_id] = event.status
        elif isinstance(event, JobForgotten):
            self.jobs.pop(event.job_id, None)

    def queues(self) -> dict[str, tuple[Counter[str], int]]:
        """Per queue: jobs by state, and the whole GPUs its running jobs hold."""
        out: dict[str, tuple[Counter[str], int]] = {}
        for job in self.jobs.values():
            states, gpus = out.get(job.queue, (Counter(), 0))
            states[job.state] += 1
            out[job.queue] = (states, gpus + (job.gpus if job.state == "running" else 0))
        return dict(sorted(out.items()))

    def rows(self) -> list[dict[str, Any]]:
        """One plain row per job (for a notebook's data frame)."""
        return [{"job_id": j.job_id, "tenant": j.tenant, "queue": j.queue, "name": j.name, "state": j.state,
                 "gpus": j.gpus, "reason": j.reason, "cluster": j.cluster, "submitted_at": j.submitted_at,
                 "updated_at": j.updated_at} for j in self.jobs.values()]

    def render(self, active_rows: int = 15) -> Group:
        per_queue = Table(title="Muster queues (from muster.status.v1)")
        per_queue.add_column("queue")
        for state in STATES:
            per_queue.add_column(state, justify="right")
        per_queue.add_column("GPUs running", justify="right")
        for queue, (states, gpus) in self.queues().items():
            per_queue.add_row(queue, *(str(states.get(s, 0)) for s in STATES), str(gpus))
        active = sorted((j for j in self.jobs.values() if j.state not in TERMINAL_STATES),
                        key=lambda j: j.updated_at, reverse=True)[:active_rows]
        jobs = Table(title=f"Active jobs (latest {active_rows})")
        for column in ("job", "queue", "state", "GPUs", "reason"):
            jobs.add_column(column)
        for j in active:
            jobs.add_row(j.job_id, j.queue, j.state, str(j.gpus), j.reason)
        return Group(per_queue, jobs)


async def follow(consumer: StatusConsumer, board: Board, live: Live | None) -> None:
    async for event in consumer:
        board.fold(event)
        if live is not None:
            live.update(board.render())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="Kafka bootstrap of an open cluster (else MUSTER_KAFKA_* settings)")
    parser.add_argument("--group", help="a consumer group to resume from (dashboard-<name>.* when authenticated)")
    parser.add_argument("--for", dest="seconds", type=float, help="print the board once after this long, then exit")
    args = parser.parse_args()
    options: dict[str, Any] = {"bootstrap": args.bootstrap} if args.bootstrap else {"settings": KafkaSettings()}
    board = Board()
    console = Console()
    async with StatusConsumer(group=args.group, **options) as consumer:
        if args.seconds is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(follow(consumer, board, None), args.seconds)
            console.print(board.render())
            return
        with Live(board.render(), console=console, refresh_per_second=2) as live:
            await follow(consumer, board, live)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
