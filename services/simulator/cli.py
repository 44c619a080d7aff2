"""``muster sim``: replay a workload through the scheduling core and report how it went."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from schemas.config import MusterConfig
from services.simulator.engine import SimOptions, simulate
from services.simulator.plots import write_plot
from services.simulator.policies import POLICIES, policy_config
from services.simulator.progress import TerminalProgress, progress_wanted
from services.simulator.report import build_report
from services.simulator.sources import parse_size_range, parse_window, resolve
from services.simulator.traces.common import TRACES_ENV, default_traces_dir
from services.simulator.workload import Workload, subset, write_workload_csv
from services.spec.durations import parse_duration

_SUMMARY = ("avg_jct_s", "p99_jct_s", "avg_queue_s", "p99_queue_s", "gpu_allocation", "jain_fairness")


def _summary_line(report: dict[str, Any]) -> str:
    parts = [f"{k}={report[k]:.3f}" if isinstance(report[k], float) else f"{k}={report[k]}" for k in _SUMMARY]
    several = report.get("jobs_several_roles", 0)
    roles = f" ({several} of several roles)" if several else ""
    line = (
        f"{report['policy']}: jobs {report['jobs_completed']}/{report['jobs']} completed{roles}, "
        f"{report['preemptions']} preemptions, {report['cycles']} cycles, {report['wall_s']:.1f}s wall; "
        + " ".join(parts)
    )
    bought = report.get("bought")
    if bought:
        line += (f"; bought {bought['nodes']} nodes for {bought['requests']} jobs: "
                 f"{bought['gpu_hours']:.1f} GPU-hours, {bought['money']:.2f} spent")
    return line


def load_subset(
    workload_spec: str,
    cluster: str | None,
    *,
    seed: int = 0,
    limit: int | None = None,
    window: str | None = None,
    sample: float | None = None,
    traces_dir: Path | None = None,
) -> tuple[Workload, MusterConfig]:
    """The workload and cluster named on the command line, cut down by window, sample and limit."""
    workload, config = resolve(workload_spec, cluster, traces_dir or default_traces_dir())
    workload = subset(workload, window=parse_window(window) if window else None, limit=limit, sample=sample, seed=seed)
    return workload, config


def sim_options(
    *,
    tick: str,
    checkpoint: str,
    restart_cost: str,
    round_: str | None,
    all_checkpointable: bool,
    all_elastic: bool,
    status_depth: int | None,
    explain_size: str | None = None,
) -> SimOptions:
    """The simulation options ``muster sim``'s flags give (the one translation, for a workload replay and a
    replay of the log alike); raises ``ValueError`` for a malformed duration."""
    return SimOptions(
        tick_s=parse_duration(tick),
        checkpoint_s=parse_duration(checkpoint),
        status_depth=status_depth,
        explain_gpus=parse_size_range(explain_size) if explain_size else None,
        restart_cost_s=parse_duration(restart_cost),
        round_s=parse_duration(round_) if round_ else None,
        all_checkpointable=all_checkpointable,
        all_elastic=all_elastic,
    )


@click.command(name="sim")
@click.option(
    "--workload",
    "workload_spec",
    required=True,
    help="CSV path, or a trace: philly[:cohort|partitioned][:SCALE] (e.g. philly:partitioned:0.3), "
    "alibaba[:variant], gavel[:vc].",
)
@click.option("--cluster", type=click.Path(exists=True, dir_okay=False), help="Cluster YAML (a trace has a default).")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    default=("muster",),
    show_default=True,
    type=click.Choice(sorted(POLICIES)),
    help="Repeat to compare policies in one report and one plot.",
)
@click.option("--report", "report_path", required=True, type=click.Path(dir_okay=False), help="Report JSON to write.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="PNG: allocation, delay and JCT CDFs.")
@click.option("--seed", default=0, show_default=True,
              help="Seed of --sample's choice of jobs (the simulation itself makes no random choices).")
@click.option("--limit", type=int, help="Replay only the first N jobs (after --window).")
@click.option("--window", help="Replay jobs submitted in START:END after the first arrival, e.g. 0:14d.")
@click.option("--sample", type=click.FloatRange(0.0, 1.0, min_open=True), help="Keep each job with this probability.")
@click.option("--tick", "tick", default="60", show_default=True, help="Cycle period while jobs are pending.")
@click.option("--checkpoint", "checkpoint", default="30", show_default=True, help="Time to checkpoint on preemption.")
@click.option("--restart-cost", "restart_cost", default="0", show_default=True,
              help="Every (re)start holds the GPUs this long before the job makes progress.")
@click.option("--round", "round_", help="Decide only every ROUND (e.g. 60), as the research simulators do.")
@click.option("--all-checkpointable", is_flag=True,
              help="Treat every job as checkpointable (a preempted job keeps its progress).")
@click.option("--all-elastic", is_flag=True,
              help="Treat every multi-pod job as elastic down to one pod (speed linear in the GPUs it holds).")
@click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=TRACES_ENV,
    help="Folder holding the public traces.",
)
@click.option(
    "--status-depth",
    type=click.IntRange(min=0),
    help="Pending jobs per queue whose status the core computes each cycle (default: the policy's).",
)
@click.option("--write-workload", type=click.Path(dir_okay=False), help="Also write the replayed workload as CSV.")
@click.option("--explain-size", "explain_size", metavar="SIZE",
              help="Break the queueing of the jobs of this size (N, A-B, >N or N+ GPUs) down by the reason the core "
              "gave each cycle: wait_breakdown in the report (reasons come from the statuses the core computes).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress bars with ETA on stderr (only drawn on a terminal).")
def sim(
    workload_spec: str,
    cluster: str | None,
    policies: tuple[str, ...],
    report_path: str,
    plot_path: str | None,
    seed: int,
    limit: int | None,
    window: str | None,
    sample: float | None,
    tick: str,
    checkpoint: str,
    restart_cost: str,
    round_: str | None,
    all_checkpointable: bool,
    all_elastic: bool,
    traces_dir: Path | None,
    status_depth: int | None,
    write_workload: str | None,
    explain_size: str | None,
    progress: bool,
) -> None:
    """Replay a workload through the scheduling core in virtual time and write a report."""
    try:
        options = sim_options(tick=tick, checkpoint=checkpoint, restart_cost=restart_cost, round_=round_,
                              all_checkpointable=all_checkpointable, all_elastic=all_elastic,
                              status_depth=status_depth, explain_size=explain_size)
        workload, config = load_subset(
            workload_spec,
            cluster,
            seed=seed,
            limit=limit,
            window=window,
            sample=sample,
            traces_dir=traces_dir,
        )
    except (ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from exc
    if write_workload:
        write_workload_csv(workload, write_workload)
    unique = tuple(dict.fromkeys(policies))
    results = []
    with TerminalProgress(progress_wanted(progress)) as bars:
        for name in unique:
            def told(done: int, total: int, now: float, name: str = name) -> None:
                bars.update(f"{name}: jobs finished", done, total)

            results.append(simulate(workload, config, policy_config(name), seed=seed, options=options,
                                    policy_name=name, on_progress=told if bars.enabled else None))
            if not bars.enabled:
                click.echo(_summary_line(build_report(results[-1])))
    if bars.enabled:  # on stdout, after the bars (on stderr) are done with the terminal
        for result in results:
            click.echo(_summary_line(build_report(result)))
    reports = [build_report(r) for r in results]
    payload: dict[str, Any] = (
        reports[0]
        if len(reports) == 1
        else {
            "workload": workload.name,
            "seed": seed,
            "policies": list(unique),
            "runs": {r["policy"]: r for r in reports},
        }
    )
    Path(report_path).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if plot_path:
        write_plot(results, plot_path)
