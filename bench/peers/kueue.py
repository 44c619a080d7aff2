"""``muster bench kueue``: Kueue v0.17.0's own scheduler performance test and the same scenario through Muster,
one after the other on this machine, in one table.

1. Kueue: its ``runner`` and ``minimalkueue`` (the scheduler and core controllers alone), built from the Go
   module (``kueue_build``), run as its ``make run-performance-scheduler`` does, on envtest whose etcd and
   kube-apiserver are the ones ``muster k8s build`` makes (``KUBEBUILDER_ASSETS``); then its checker against the
   scenario's ``rangespec.yaml`` (the limits Kueue's CI enforces).
2. Muster: the same generator config translated (``kueue_scenario``) into queues, cohorts, priority classes and
   a stream of submissions with the same timing, produced onto the intents topic of a private Kafka broker; the
   queue manager (its own process) decides; a fake cluster answers admissions with the run started at once
   and succeeded ``runtimeMs`` later, as Kueue's runner marks a workload finished ``runtimeMs`` after its
   admission, and answers preemptions with the victim stopped. The figures are computed as Kueue's recorder
   and checker compute them (``kueue_figures``).

``--quick`` runs only Muster's half on a small scenario in Kueue's format (``kueue-smoke.yaml``, no Go build):
the short version CI runs so the translation cannot rot.
"""

from __future__ import annotations

import asyncio
import math
import os
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.peers import kueue_build, kueue_kube
from bench.peers.kueue_figures import Figures, muster_figures, read_kueue
from bench.peers.kueue_scenario import Scenario, ScenarioLayout, load, submission
from bench.peers.kueue_virtual import replay
from bench.system.machine import process_cpu_seconds, spent
from bench.system.measure import Table
from bench.system.observe import counting
from bench.system.stack import private_broker, running_stack
from services.core import SchedulerConfig

SMOKE = Path(__file__).with_name("kueue-smoke.yaml")
SCENARIO = "baseline"
#: Muster's run stops waiting this long after the last submission (and reports how far it got)
DRAIN_S = 600.0


async def run_muster(scenario: Scenario, *, bootstrap: str | None, brokers: int = 1) -> tuple[Figures, list[str]]:
    """The scenario through Kafka and the queue manager; its figures and notes on the run."""
    arrivals = scenario.arrivals()
    runtimes = {a.job_id: a.template.runtime_s for a in arrivals}
    ids = set(runtimes)
    notes: list[str] = []
    async with private_broker(bootstrap, brokers=brokers) as broker, running_stack(
            broker, scenario.fleet(), ScenarioLayout(scenario), runtimes.__getitem__,
            scheduler=SchedulerConfig(min_runtime_s=0.0)) as stack:
        qm_before, broker_before, own_before = stack.cpu_seconds(), broker.cpu_seconds(), _own_cpu()
        started = time.time()
        futures = []
        for arrival in arrivals:
            delay = started + arrival.at_s - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            futures.append(await stack.submit(submission(arrival)))
        await asyncio.gather(*futures)
        timeline = stack.timeline
        cluster = stack.cluster
        done = await cluster.wait_until(counting(
            "workloads finished", lambda: len(ids & (timeline.finished.keys() | cluster.rejected.keys())),
            len(ids), lambda: ids <= timeline.finished.keys() | cluster.rejected.keys()), within=DRAIN_S)
        (qm_cpu,) = spent(qm_before, stack.cpu_seconds())
        broker_cpu = _minus(broker.cpu_seconds(), broker_before)
        own_cpu = _minus(_own_cpu(), own_before)
        if not done:
            notes.append(f"Muster: NOT all finished within {DRAIN_S:.0f} s of the last submission: "
                         f"{len(ids & timeline.finished.keys()):,} of {len(ids):,}")
        if cluster.rejected:
            notes.append(f"Muster: {len(cluster.rejected):,} rejected, e.g. {next(iter(cluster.rejected.items()))}")
    cpu = {"queue manager": qm_cpu, "Kafka broker": broker_cpu, "fake cluster and submitter": own_cpu}
    return muster_figures(scenario, arrivals, timeline, started=started,
                          cpu_s={k: v for k, v in cpu.items() if v is not None}), notes


def _own_cpu() -> float | None:
    return process_cpu_seconds(os.getpid())


def _minus(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def run_kueue(scenario_dir: str, log: list[str], *, scale: float = 1.0,
              ) -> tuple[Figures, kueue_build.KueueRun, float, Path]:
    """Build what is missing and run Kueue's test (each workloads set's count scaled by ``scale``); its figures,
    the run, CPU seconds of all its processes, and the generator config it ran."""
    from services.kubereal.build import build as build_control_plane

    assets = build_control_plane(lambda _: None).root / "bin"
    kueue, made = kueue_build.build(lambda _: None)
    if made:
        log.append(f"Kueue {kueue_build.VERSION} built from its module in {kueue.seconds:.0f} s (cached after)")
    out = Path(tempfile.mkdtemp(prefix="muster-bench-kueue-"))
    generator = kueue.config(scenario_dir, "generator.yaml")
    if scale != 1.0:
        generator = out / "generator.yaml"
        generator.write_text(scaled_config(kueue.config(scenario_dir, "generator.yaml").read_text(), scale))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = kueue_build.run(kueue, assets, generator, kueue.config(scenario_dir, "rangespec.yaml"), out,
                          extra=kueue_build.SCENARIO_ARGS.get(scenario_dir, ()))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    everything = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if run.returncode != 0 or not run.summary.exists():
        raise RuntimeError(f"Kueue's runner failed ({run.returncode}); its log: {out / 'runner.log'}")
    figures = replace(read_kueue(run.summary, run.cmd_stats), verdict=run.checks)
    log.append(f"Kueue's artifacts (summary, per-workload and per-queue CSVs, logs): {out}")
    return figures, run, everything, generator


async def main(*, quick: bool, bootstrap: str | None, brokers: int = 1, kube: bool = False,
               scale: float = 1.0, scenario_name: str = SCENARIO, objects: str = "jobs") -> str:
    notes: list[str] = []
    if quick:
        scenario = load(SMOKE)
        kueue = None
        everything = None
        title = f"Kueue's scenario format through Muster (--quick: {SMOKE.name}; Kueue itself not run)"
    else:
        kueue, run, everything, generator = await asyncio.to_thread(run_kueue, scenario_name, notes, scale=scale)
        scenario = load(generator)
        title = (f"Kueue {kueue_build.VERSION} ({scenario_name}" + (f" at scale {scale:g}" if scale != 1.0 else "") +
                 ": its runner + minimalkueue on envtest) and Muster, same machine")
        if scale != 1.0:
            notes.append(f"scale {scale:g}: each workloads set's count scaled (same queues, intervals, requests, "
                         "runtimes); Kueue's limits are its CI's for the whole scenario")
        notes.append(f"Kueue's runner took {run.seconds:.0f} s in all (envtest start and stop included)")
    muster, more = await run_muster(scenario, bootstrap=bootstrap, brokers=brokers)
    notes += more
    on_kube: list[kueue_kube.KubeRun] = []
    if kube:
        with tempfile.TemporaryDirectory(prefix="muster-bench-kueue-kube-") as root:
            for which in kueue_kube.BACKENDS:
                done = await kueue_kube.run_on(scenario, which, bootstrap=bootstrap, root=Path(root), brokers=brokers,
                                               objects=objects)
                on_kube.append(done)
                notes += done.notes
    alone = await asyncio.to_thread(replay, scenario)
    workloads = sum(f.count for f in muster.classes.values())
    header = ["figure", "Kueue", "Muster", "Muster / Kueue"]
    for done in on_kube:
        header += [f"Muster on {done.backend}", "/ Kueue"]
    header += ["Kueue's limit", "Muster's decisions alone"]
    table = Table(f"{title}: {len(scenario.cohorts)} cohorts, {len(scenario.queues)} queues, {workloads:,} workloads",
                  header)
    limits = _limits(scenario_dir=scenario_name) if kueue is not None else {}

    def row(figure: str, pick: Callable[[Figures], float | None], show: Callable[[float | None], str],
            limit: str = "", *, ratio: bool = True) -> None:
        k = pick(kueue) if kueue is not None else None
        cells = [figure, show(k)]
        for figures in (muster, *(d.figures for d in on_kube)):
            value = pick(figures)
            cells += [show(value), _ratio(value, k) if ratio else ""]
        table.add(*cells, limit, show(pick(alone)))

    row("wall", lambda f: f.wall_s, _s, limits.get("wall", ""))
    for name in scenario.classes:
        m = muster.classes[name]
        admitted = "/".join(f"{f.classes[name].admitted:,}" for f in (muster, *(d.figures for d in on_kube)))
        row(f"avg time to admission, {name} ({admitted} of {m.count:,})",
            _of_class(name, "avg_admission_s"), _s, limits.get(name, ""))
    for name in scenario.classes:
        row(f"evictions, {name}", _of_class(name, "evictions"), _count, ratio=False)
    for name in muster.usage:
        row(f"usage of nominal quota, {name}", _usage_of(name), _pct, limits.get(f"usage {name}", ""))
    k_cpu = kueue.cpu_s.get("minimalkueue") if kueue else None
    cells = ["CPU, scheduler", _s(k_cpu)]
    for figures in (muster, *(d.figures for d in on_kube)):
        cells += [_s(figures.cpu_s.get("queue manager")), _ratio(figures.cpu_s.get("queue manager"), k_cpu)]
    table.add(*cells, "", "")
    cells = ["CPU, every process", _s(everything)]
    for figures in (muster, *(d.figures for d in on_kube)):
        total = sum(figures.cpu_s.values()) or None
        cells += [_s(total), _ratio(total, everything)]
    table.add(*cells, "", "")
    for done in on_kube:
        if done.latency is not None:
            notes.append(await asyncio.to_thread(latency_note, scenario, done))
    for done in on_kube:
        notes.append(f"CPU on {done.backend}: " + ", ".join(f"{name} {value:,.1f} s"
                                                            for name, value in done.figures.cpu_s.items()))
    if kueue is not None and kueue.verdict is not None:
        failed = [n for n, ok in kueue.verdict.items() if not ok]
        notes.append("Kueue's checker against its rangespec: " + (
            "every check passed" if not failed else f"FAILED {', '.join(failed)}") +
            f" ({len(kueue.verdict)} checks)")
    notes += [f"translation: {d}" for d in scenario.differences]
    notes += [
        "wall: Kueue's is minimalkueue's process (its start included); Muster's from the first submission to the "
        "last finish",
        "CPU, scheduler: minimalkueue / the queue manager; every process: Kueue's runner, minimalkueue, etcd and "
        "kube-apiserver / the queue manager, the Kafka broker, the fake cluster and the submitter",
        placement_note(scenario),
        "Muster: time to admission from the submission's timestamp to the last JobAdmitted; Kueue: from the "
        "workload's first event seen by its runner to its last admission",
        "Muster's decisions alone: the same submissions folded into the queue manager's state at their times "
        "and a cycle every 50 ms on virtual time, jobs starting at once (bench/peers/kueue_virtual.py): what "
        "Muster decides with no system around it; the gap to the Muster column is the system's cost",
        "Muster: the fake cluster starts a job when it reads JobAdmitted and ends it runtimeMs later; the "
        "dispatcher, Kubernetes and the node watcher are not in the loop (as Kueue's runner has no pods)",
    ]
    if on_kube:
        per_node = kueue_kube.node_gpus(scenario)
        notes += [
            "Muster on kubesim / a real control plane: the whole system (queue manager, dispatcher, node watcher) "
            + ("with the Kubernetes Job and its pods of each workload" if objects == "jobs" else
               "with each workload's pods as plain Pods (--objects pods: no Job, no Job controller)") +
            "; a workload is one pod asking its request "
            f"(Kueue's shape) on nodes of {per_node} GPUs holding the nominal quotas; each pod runs runtimeMs once "
            "started and the queue holds its quota from JobAdmitted until the node watcher's RunSucceeded "
            "(pod start and the report back included, which Kueue's runner does not have); CPU, every process: "
            "also the dispatcher, the node watcher and the cluster (kubesim, or etcd, the API server, the "
            "controllers, the scheduler and KWOK)",
        ]
    table.notes += notes
    return table.render()


def latency_note(scenario: Scenario, done: kueue_kube.KubeRun) -> str:
    """Muster's decisions alone on the Kubernetes runs' shape, once with no delay and once with the delays
    ``done`` measured around each run: how much of what its workloads waited the system's latency explains."""
    assert done.latency is not None
    fleet, submit = kueue_kube.virtual_shape(scenario)
    lat = done.latency
    at_once = replay(scenario, fleet=fleet, submit=submit)
    delayed = replay(scenario, fleet=fleet, submit=submit, start_delay_s=lat.start_s, finish_delay_s=lat.finish_s)

    def waits(figures: Figures) -> str:
        return ", ".join(f"{name} {figures.classes[name].avg_admission_s:.1f} s" for name in scenario.classes)

    return (f"Muster's decisions alone on {done.backend}'s shape (one pod per workload on its nodes), average time "
            f"to admission: jobs seen running at once and finished on time: {waits(at_once)}; seen running "
            f"{lat.start_s:.2f} s after admission and finished {lat.finish_s:.2f} s late, as on {done.backend}: "
            f"{waits(delayed)} (the quota a workload holds for the system is queueing for the next)")


def placement_note(scenario: Scenario) -> str:
    """What Muster places, against Kueue's workload, in one line for the table's notes."""
    topo = scenario.topology
    if topo is None:
        return ("Muster: a request of N is a gang of N one-GPU pods placed on nodes that hold exactly the nominal "
                f"quotas ({scenario.nodes} x 8 GPUs); Kueue's workload is one pod with a CPU request, counted "
                "against quota only")
    return (f"TAS: both place each workload's podCount pods on the config's nodes ({topo.blocks} block x "
            f"{topo.racks_per_block} racks x {topo.nodes_per_rack} nodes of {topo.cpu_m // 1000} CPU), Muster "
            "with its own topology request on the workload's level and CPU quotas in millicores")


def _limits(*, scenario_dir: str) -> dict[str, str]:
    """Kueue's rangespec limits, by figure."""
    import yaml

    spec = yaml.safe_load(kueue_build.cached().config(scenario_dir, "rangespec.yaml").read_text()) or {}
    out = {}
    if spec.get("cmd", {}).get("maxWallMs"):
        out["wall"] = f"<= {int(spec['cmd']['maxWallMs']) / 1000:.0f} s"
    for name, ms in (spec.get("wlClassesMaxAvgTimeToAdmissionMs") or {}).items():
        out[name] = f"<= {int(ms) / 1000:g} s"
    for name, pct in (spec.get("clusterQueueClassesMinUsage") or {}).items():
        out[f"usage {name}"] = f">= {pct}%"
    return out


def _s(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.1f} s"


def scaled_config(text: str, scale: float) -> str:
    """Kueue's generator config ``text`` with each workloads set's ``count`` scaled by ``scale`` (at least 1,
    rounded as ``kueue_scenario.scaled`` rounds), for both systems to run the same smaller scenario."""
    import yaml

    data = yaml.safe_load(text)
    for cohort_set in data.get("cohorts") or ():
        for queue_set in cohort_set.get("queuesSets") or ():
            for workloads_set in queue_set.get("workloadsSets") or ():
                workloads_set["count"] = max(1, round(int(workloads_set["count"]) * scale))
    return str(yaml.safe_dump(data, sort_keys=False))


def _of_class(name: str, figure: str) -> Callable[[Figures], float | None]:
    """A class's ``figure`` (an attribute of ``ClassFigures``) of a run's figures (None: the class is missing)."""
    def pick(figures: Figures) -> float | None:
        found = figures.classes.get(name)
        return None if found is None else float(getattr(found, figure))
    return pick


def _usage_of(queue_class: str) -> Callable[[Figures], float | None]:
    return lambda figures: figures.usage.get(queue_class)


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _ratio(muster: float | None, kueue: float | None) -> str:
    if muster is None or kueue is None or math.isnan(muster) or math.isnan(kueue) or kueue == 0:
        return "-"
    return f"{muster / kueue:.2f}"
