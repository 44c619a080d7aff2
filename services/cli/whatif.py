"""``muster sim``: the simulator's command, plus what-if replays of the live log.

With ``--from-kafka BOOTSTRAP`` (optionally ``--since 7d``) or ``--from-file EXPORT`` (what ``muster log
export`` wrote), ``muster sim`` rebuilds what really happened (``services.simulator.replay``), replays it
through the core as the log tells it (the baseline replay) and, with ``--config-patch FILE``, under the
patched configuration (``services.simulator.whatif``), and prints actual vs replayed per queue. Without
them it is the simulator's own command (``services.simulator.cli``), unchanged. The Kafka read lives
here, above the simulator, which never imports the Kafka kit.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from services.simulator.cli import sim as simulate_command
from services.simulator.cli import sim_options

_REPLAY_OPTIONS = ("from_kafka", "from_file", "since", "config_patch", "output")
_REPLAY_TICK_S = "5"  # the queue manager decides within seconds of a change, not once a minute


def _replay(ctx: click.Context, params: dict[str, Any]) -> None:
    from services.cli.log import live_export
    from services.queue_manager.settings import scheduler_config_from_env
    from services.simulator.logfile import read_export
    from services.simulator.replay import reconstruct
    from services.simulator.whatif import PatchError, load_patch, render_text, what_if, write_plot
    from services.simulator.workload import write_workload_csv

    if params["from_kafka"] and params["from_file"]:
        raise click.UsageError("give --from-kafka or --from-file, not both")
    if params["workload_spec"]:
        raise click.UsageError("--workload replays a workload file; --from-kafka / --from-file replay the log")
    for name in ("policies", "limit", "window", "sample", "cluster", "status_depth", "explain_size"):
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
            flag = {"policies": "--policy", "status_depth": "--status-depth",
                    "explain_size": "--explain-size"}.get(name, f"--{name}")
            raise click.UsageError(f"{flag} does not apply to a replay of the log (the patch's scheduler: section "
                                   "changes the policy)")
    tick = params["tick"]
    if ctx.get_parameter_source("tick") is click.core.ParameterSource.DEFAULT:
        tick = _REPLAY_TICK_S
    try:
        options = sim_options(tick=tick, checkpoint=params["checkpoint"], restart_cost=params["restart_cost"],
                              round_=params["round_"], all_checkpointable=params["all_checkpointable"],
                              all_elastic=params["all_elastic"], status_depth=None)
        scheduler = scheduler_config_from_env()
        patch = load_patch(params["config_patch"]) if params["config_patch"] else None
        if params["from_file"]:
            if params["since"]:
                raise click.UsageError("--since applies to --from-kafka; an export has its window already")
            log = read_export(params["from_file"])
        else:
            log = live_export(params["from_kafka"], params["since"])
        recon = reconstruct(log.envelopes, as_of=log.as_of, since=log.since,
                            default_runtime_s=scheduler.default_runtime_estimate_s)
        if recon.stop_s is not None and ctx.get_parameter_source("checkpoint") is click.core.ParameterSource.DEFAULT:
            # a preempted job stops as long after the request as the log's preemptions took (checkpoint, grace)
            options = dataclasses.replace(options, checkpoint_s=recon.stop_s, grace_period_s=recon.stop_s)
            recon = dataclasses.replace(recon, notes=(*recon.notes, (
                f"a preempted job stops {recon.stop_s:.0f} s after the request in the replays: the median of the "
                "log's preemptions (--checkpoint sets it)")))
        result = what_if(recon, scheduler, patch, options=options)
    except PatchError as exc:
        raise click.UsageError(f"--config-patch: {exc}") from exc
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if params["write_workload"]:
        write_workload_csv(recon.workload, params["write_workload"])
    report = result.report | {"patch": list(result.changes), "undecodable_records": log.undecodable}
    if params["output"] == "json":
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo(render_text(report, result.changes))
    if params["report_path"]:
        Path(params["report_path"]).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if params["plot_path"]:
        write_plot(report, params["plot_path"])


def _run(**params: Any) -> None:
    ctx = click.get_current_context()
    if params["from_kafka"] or params["from_file"]:
        _replay(ctx, params)
        return
    if params["config_patch"] or params["since"]:
        raise click.UsageError("--config-patch and --since go with --from-kafka or --from-file")
    for name, flag in (("workload_spec", "--workload"), ("report_path", "--report")):
        if not params[name]:
            raise click.UsageError(f"Missing option '{flag}'.")
    assert simulate_command.callback is not None
    simulate_command.callback(**{k: v for k, v in params.items() if k not in _REPLAY_OPTIONS})


def _own_params() -> list[click.Parameter]:
    params = []
    for param in simulate_command.params:
        mine = copy.copy(param)
        if isinstance(mine, click.Option) and mine.name in ("workload_spec", "report_path"):
            mine.required = False
            if mine.name == "report_path":
                mine.help = "Report JSON to write (required with --workload)."
            else:
                mine.help = (mine.help or "") + " Required unless --from-kafka or --from-file."
        if isinstance(mine, click.Option) and mine.name == "tick":
            mine.help = f"{mine.help} A replay of the log takes {_REPLAY_TICK_S} s unless given."
        if isinstance(mine, click.Option) and mine.name == "checkpoint":
            mine.help = (f"{mine.help} A replay of the log takes the median time its preemptions took from "
                         "request to stop, unless given.")
        params.append(mine)
    extra = [
        click.Option(["--from-kafka", "from_kafka"], metavar="BOOTSTRAP",
                     help="Replay what happened on this Muster's Kafka (host:port): actual vs replayed per queue."),
        click.Option(["--from-file", "from_file"], type=click.Path(exists=True, dir_okay=False),
                     help="Replay a `muster log export` file instead of reading Kafka."),
        click.Option(["--since"], help="With --from-kafka: the window's start, a duration before now (7d, 36h) or "
                     "an ISO 8601 time (default: the whole log)."),
        click.Option(["--config-patch", "config_patch"], type=click.Path(exists=True, dir_okay=False),
                     help="YAML merge patch of the configuration (queues, cohorts, node groups, scheduler flags) "
                     "for the what-if replay."),
        click.Option(["-o", "--output"], type=click.Choice(["text", "json"]), default="text", show_default=True,
                     help="With --from-kafka / --from-file: a table or the JSON report on stdout."),
    ]
    return [*params, *extra]


sim = click.Command(
    name="sim",
    callback=_run,
    params=_own_params(),
    help=(simulate_command.help or "") + "\n\nWith --from-kafka or --from-file: replay what really happened "
    "(the baseline replay) and, with --config-patch, a what-if, against the actual figures per queue "
    "(see docs/cli.md, \"What-if replay\").",
    short_help="Replay a workload, or the live log, through the scheduling core.",
)
