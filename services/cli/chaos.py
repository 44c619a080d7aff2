"""``muster chaos``: the whole system under a seeded workload and seeded faults, then invariant checks."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import click

from services.simulator.progress import TerminalProgress, progress_wanted


def _styled(message: str) -> str:
    return click.style("» ", fg="cyan") + message


def _step(message: str) -> None:
    click.echo(_styled(message), err=True)


@click.command()
@click.option("--quick", is_flag=True, help="about 30 jobs, 5 kills and one broker restart (~2 minutes)")
@click.option("--seed", type=int, default=1, show_default=True, help="seed of the workload and the faults")
@click.option("--jobs", type=click.IntRange(1, 100_000), default=300, show_default=True)
@click.option("--kills", type=click.IntRange(0, 10_000), default=20, show_default=True,
              help="kill -9 of a random service, this many times")
@click.option("--nodes", type=click.IntRange(1, 1_000), default=4, show_default=True,
              help="8-GPU nodes in the simulated cluster (quotas scale with it); more nodes, shorter window")
@click.option("--brokers", type=click.IntRange(1, 9), default=1, show_default=True,
              help="Kafka brokers (KRaft, each also a controller; from 3 on the topics have replication factor 3, "
                   "min.insync.replicas 2); a broker restart then stops one of them while the others serve, "
                   "and brokers are killed with SIGKILL too (2 in --quick, else kills/3, at least 2): by turns "
                   "the leader of most partitions and the active controller")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="keep the broker data and service logs here (default: a temporary directory, removed)")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="progress bars with ETA on stderr (only drawn on a terminal)")
def chaos(quick: bool, seed: int, jobs: int, kills: int, nodes: int, brokers: int, state_dir: Path | None,
          progress: bool) -> None:
    """Run every service as its own process on Apache Kafka and a simulated cluster, inject faults, and
    check that every job ended exactly once with nothing lost, duplicated, over-committed or orphaned.

    Prints the findings as JSON on stdout; exits 1 when any invariant was violated or the run did not
    exercise what it planned (coverage: a placement and a pod for the jobs admitted and run, every planned
    kill and restart performed, the preemptions and cancels the workload asked for, no dead letter).
    """
    from services.chaos.harness import run_chaos
    from services.chaos.plan import ChaosPlan

    # killed brokers make the Kafka client log every refused connection; the run reports what matters
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

    plan = ChaosPlan.quick(seed, brokers) if quick else ChaosPlan.sized(seed, jobs, kills, nodes, brokers)
    with TerminalProgress(progress_wanted(progress)) as bars:
        step: Callable[[str], None] = (lambda message: bars.log(_styled(message))) if bars.enabled else _step
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
            report = asyncio.run(run_chaos(plan, state_dir.resolve(), step, bars.update))
        else:
            with tempfile.TemporaryDirectory(prefix="muster-chaos-") as tmp:
                report = asyncio.run(run_chaos(plan, Path(tmp), step, bars.update))
    click.echo(json.dumps(report.as_json(), indent=2))
    if not report.ok:
        _step(click.style(f"{len(report.violations)} violations", fg="red"))
        sys.exit(1)
    _step(click.style("all invariants held", fg="green"))
