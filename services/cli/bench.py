"""``muster bench <name> [--quick]``: benchmarks of Muster's services through a real Kafka broker.

The programs live in ``bench/system`` of the source tree (they are not installed with the
package); the command finds them next to ``services/``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import click

from services.kubereal.build import BuildError
from services.simulator.progress import TerminalProgress, progress_wanted

# name -> module of bench.system whose ``main(quick=..., bootstrap=..., **options)`` runs it
BENCHMARKS: dict[str, str] = {
    "throughput": "bench.system.run_throughput",
    "largescale": "bench.system.largescale",
    "gang": "bench.system.gang",
    "reclaim": "bench.system.reclaim",
    "shards": "bench.system.shards",
    "dispatch": "bench.system.kube",
    "kueue": "bench.peers.kueue",
}
#: benchmarks of the Kubernetes side (``--kube real``): kubesim and a real control plane in one run
KUBE_BENCHMARKS = ("gang", "dispatch", "reclaim", "kueue")
#: benchmarks that record per-job moments for ``--plot`` (``bench.system.observe``)
PLOTTED = ("throughput", "shards", "largescale")


def _load(module: str) -> Any:
    root = Path(__file__).resolve().parents[2]
    if not (root / "bench" / "system").is_dir() or not (root / "bench" / "peers").is_dir():
        raise click.ClickException(f"the benchmark programs are not here: {root / 'bench'} (run from a source tree)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(module)


@click.command("bench")
@click.argument("name", type=click.Choice(sorted(BENCHMARKS)))
@click.option("--quick", is_flag=True, help="A small run for a smoke check (well under a minute).")
@click.option("--bootstrap", default=None, help="Use this Kafka broker instead of starting a private one.")
@click.option("--debounce", type=float, default=None,
              help="throughput only: the queue manager's pause after a change, seconds (default 0.05).")
@click.option("--profile", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a cProfile of the run to this file, and one of each queue-manager process the "
                   "benchmark starts to FILE.<pid>.")
@click.option("--kube", type=click.Choice(["none", "real"]), default="none", show_default=True,
              help="gang, dispatch, reclaim: measure the Kubernetes side on kubesim and on a real control plane "
                   "(built from Go modules on first use) instead of the queue manager against a fake cluster; "
                   "kueue: also run the scenario through the whole of Muster on both")
@click.option("--brokers", type=click.IntRange(1, 9), default=1, show_default=True,
              help="Run on this many private Kafka brokers (topics at replication factor 3 and min.insync.replicas "
                   "2 from three brokers on). throughput: measure one broker and N side by side (the cost of "
                   "replication).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=f"{', '.join(PLOTTED)}: also write a PNG of jobs decided and latency over time, and the "
                   "latency percentiles per scenario")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=1.0, show_default=True,
              help="kueue: run Kueue's scenario and Muster's with each workloads set's count scaled by this")
@click.option("--scenario", type=click.Choice(["baseline", "tas"]), default="baseline", show_default=True,
              help="kueue: which of Kueue's scheduler performance scenarios (configs/<name>): baseline, or tas "
                   "(topology-aware: 640 CPU nodes in racks, workloads asking a rack, against Muster's topology "
                   "placement)")
@click.option("--objects", type=click.Choice(["jobs", "pods"]), default="jobs", show_default=True,
              help="kueue --kube real: each workload reaches Kubernetes as a batch/v1 Job of its pods (jobs) or as "
                   "its pods alone, a group of plain Pods (pods: no Job, no Job controller)")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress bars with ETA on stderr (only drawn on a terminal).")
@click.option("-v", "--verbose", is_flag=True, help="Log the services' INFO messages.")
def bench(name: str, quick: bool, bootstrap: str | None, debounce: float | None, profile: Path | None,
          kube: str, brokers: int, scale: float, scenario: str, objects: str, plot_path: Path | None,
          progress: bool, verbose: bool) -> None:
    """Run the benchmark NAME and print its figures next to a baseline measured in the same run."""
    if bootstrap and brokers != 1:
        raise click.UsageError("--brokers starts private brokers; it cannot be combined with --bootstrap")
    if name == "dispatch" and kube != "real":
        raise click.UsageError("dispatch measures the Kubernetes side: run it with --kube real")
    if kube == "real" and name not in KUBE_BENCHMARKS:
        raise click.UsageError(f"--kube real applies to {', '.join(KUBE_BENCHMARKS)}")
    if plot_path is not None and (name not in PLOTTED or kube == "real"):
        raise click.UsageError(f"--plot applies to {', '.join(PLOTTED)} (the others' tables say it all)")
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:  # a fresh broker's leader elections and new topics make the client log retried errors
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    # kueue's own module adds Muster on kubesim and a real control plane beside its other columns
    module = _load("bench.system.kube" if kube == "real" and name != "kueue" else BENCHMARKS[name])
    from services.runtime.collector import configure_collector

    configure_collector()  # the fake cluster stands in for services that `muster serve` would run so
    options: dict[str, Any] = {"quick": quick, "bootstrap": bootstrap, "brokers": brokers}
    if name == "kueue":
        options["kube"] = kube == "real"
        options["scale"] = scale
        options["scenario_name"] = scenario
        options["objects"] = objects
        if objects != "jobs" and kube != "real":
            raise click.UsageError("--objects says how workloads reach Kubernetes: it applies with --kube real")
        if scenario == "tas" and (kube == "real" or quick):
            raise click.UsageError("--scenario tas runs Kueue and Muster's queue manager (through Kafka and on virtual "
                                   "time); it has no --quick form, and its 640 nodes are not run on Kubernetes "
                                   "(--kube real)")
    elif scale != 1.0 or scenario != "baseline" or objects != "jobs":
        raise click.UsageError("--scale, --scenario and --objects apply to the kueue benchmark only")
    if kube == "real" and name != "kueue":
        options["benchmark"] = name
    if name == "throughput":
        options["debounce_s"] = debounce
    elif debounce is not None:
        raise click.UsageError("--debounce applies to the throughput benchmark only")
    # SIGTERM (a time limit, a CI runner) ends the run like Ctrl-C: the private broker is stopped too
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    machine = _load("bench.system.machine")
    observer = _load("bench.system.observe").OBSERVER
    before = machine.CpuTimes.now()
    try:
        with TerminalProgress(progress_wanted(progress)) as bars:
            observer.reset(name, bars.update if bars.enabled else None)
            if profile is None:
                text = asyncio.run(module.main(**options))
            else:
                import cProfile
                import os

                os.environ["MUSTER_BENCH_QUEUE_MANAGER_PROFILE"] = str(profile)  # read by the spawned processes
                with cProfile.Profile() as profiler:
                    text = asyncio.run(module.main(**options))
                profiler.dump_stats(profile)
    except BuildError as exc:  # `--kube real` and `kueue` build from Go modules first
        raise click.ClickException(str(exc)) from exc
    finally:
        signal.signal(signal.SIGTERM, previous)
    click.echo(text)
    if plot_path is not None:
        if not observer.series:
            raise click.ClickException(f"{name} recorded no scenarios to plot; {plot_path} not written")
        _load("bench.system.plots").write_plot(observer.series, plot_path, f"muster bench {name}")
        click.echo(f"  plot: {plot_path}")
    # the figures move with the rest of the machine: say how busy it was and how much the host took
    click.echo("  " + machine.describe(before, machine.CpuTimes.now()))
