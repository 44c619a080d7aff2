"""The Kubernetes side of Muster (``muster bench gang|dispatch --kube real``): the dispatcher turning
admission decisions into Indexed Jobs and binding their pods, on kubesim and on a real control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK nodes) in the same run.

- ``gang``: one 512-pod gang (8 GPUs a pod, one pod a node) on 1,000 nodes, from the JobAdmitted
  decision on the topic to every pod Running (read from the API server). KAI-Scheduler reports 48.7 s
  for its 512-pod gang; the goal here is 10 s.
- ``dispatch``: a burst of 4-pod gangs (1 GPU a pod): Jobs created and pods bound per second, from
  the first decision to the last pod bound. Goal: 200 pods/s bound.
- ``reclaim``: every GPU taken by one-GPU low-priority jobs, then a one-GPU high-priority job: from
  its submission to its pod Running, through the whole chain (queue manager, preemption handshake
  with no grace, the victim's pod gone, admission, Job, binding, KWOK). KAI-Scheduler reports 13.9 s;
  the goal is a p95 of 5 s.

In ``gang`` and ``dispatch`` the queue manager is not in the loop (its cost is ``muster bench gang`` /
``throughput`` without ``--kube``): decisions are produced straight onto ``muster.decisions.v1``.
The KWOK nodes start pods at once (its ``fast`` pod stages), as kubesim's ``zero`` profile does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.system.measure import Spread, Table, rate
from bench.system.stack import (
    SUBMITTER,
    Broker,
    ChildProcess,
    QueueManagerProcess,
    child_logging,
    private_broker,
    publish,
    serve_in_child,
    wait_started,
)
from bench.system.workload import GPU_TYPE, QueueLayout, submission
from schemas.config import ClusterConfig, MusterConfig, NodeGroupConfig, TopologyConfig
from schemas.decisions import JobAdmitted, NodePods, PlacementPlan
from schemas.envelope import make_envelope
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest
from schemas.topics import CONFIG_TOPIC, DECISIONS_TOPIC, INTENTS_TOPIC
from services.core import SchedulerConfig
from services.dispatcher.main import DispatcherMain
from services.dispatcher.plans import DispatchSettings
from services.node_watcher.main import NodeWatcherMain
from services.runtime.kafka import EnvelopeProducer
from services.runtime.kube import (
    JOBS,
    PODS,
    KubeObject,
    KubeRest,
    build_api_client,
    ensure_namespace,
)
from services.runtime.options import ClusterAccess, ServeOptions

NAMESPACE = "bench"
QUEUE_MANAGER = "queue_manager"  # the decisions' producer, as the topic registry knows it
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


@dataclass
class Backend:
    """A cluster the services run against: its name, an admin client, and how the services reach it."""

    name: str
    cluster: str
    rest: KubeRest
    access: ClusterAccess
    setup_s: float
    processes: dict[str, int] = field(default_factory=dict)  # the cluster's own processes by name: their pids


def fleet(cluster: str, nodes: int) -> ClusterConfig:
    return ClusterConfig(name=cluster, node_groups=[NodeGroupConfig(
        name=GPU_TYPE, count=nodes, gpus_per_node=8, gpu_type=GPU_TYPE, cpu=96, memory_gb=1024,
        topology=TopologyConfig(zone=f"{cluster}-z", block="b0", racks=max(1, nodes // 80)),
        taints=["nvidia.com/gpu"])])


@contextlib.asynccontextmanager
async def kubesim(cluster: ClusterConfig) -> AsyncIterator[Backend]:
    from services.kubesim import KubeSim

    started = time.perf_counter()
    sim = KubeSim(MusterConfig(clusters=[cluster]), cluster_name=cluster.name, profile="zero")
    async with sim.serve(port=0) as url:
        api = await build_api_client(url, connection_pool_size=64)
        async with api:
            yield Backend("kubesim", cluster.name, KubeRest(api, request_timeout=60.0), ClusterAccess(url),
                          time.perf_counter() - started)


@contextlib.asynccontextmanager
async def real(cluster: ClusterConfig, root: Path) -> AsyncIterator[Backend]:
    from services.kubereal.bootstrap import bootstrap, wait_nodes_ready
    from services.kubereal.build import build
    from services.kubereal.controlplane import ControlPlane

    binaries = await asyncio.to_thread(build, lambda m: None)
    started = time.perf_counter()
    plane = ControlPlane(root / cluster.name, binaries, name=cluster.name, profile="fast")
    await asyncio.to_thread(plane.start)
    try:
        done = await bootstrap(plane, cluster)
        api = await build_api_client(kubeconfig=str(plane.admin_kubeconfig), connection_pool_size=64)
        async with api:
            rest = KubeRest(api, request_timeout=60.0)
            names = [f"{cluster.name}-{GPU_TYPE}-{i}" for i in range(cluster.node_groups[0].count)]
            await wait_nodes_ready(rest, names, timeout_s=300)
            processes = {name: p.popen.pid for name, p in plane.processes.items() if p.popen is not None}
            yield Backend("real control plane", cluster.name, rest, ClusterAccess(plane.url, done.kubeconfigs),
                          time.perf_counter() - started, processes)
    finally:
        await asyncio.to_thread(plane.close)


def _service_main(kind: str, options: ServeOptions, settings: DispatchSettings) -> DispatcherMain | NodeWatcherMain:
    return DispatcherMain(options, settings=settings) if kind == "dispatcher" else NodeWatcherMain(options)


async def _service_ready(main: DispatcherMain | NodeWatcherMain) -> None:
    """Once ``main`` is composed and its consumer has partitions (dispatcher) or its caches are synced (watcher)."""
    await main.composed.wait()
    if isinstance(main, DispatcherMain):
        assert main.runner is not None
        await main.runner.loops[0].wait_assigned()
    else:
        assert main.watcher is not None
        await main.watcher.ready.wait()


def _options(broker: Broker, backend: Backend, kind: str) -> ServeOptions:
    return ServeOptions(kafka=broker.settings, cluster=backend.cluster, instance=backend.cluster,
                        **backend.access.fields(kind))


@contextlib.asynccontextmanager
async def service(broker: Broker, backend: Backend, kind: str,
                  settings: DispatchSettings | None = None) -> AsyncIterator[None]:
    """The ``kind`` ("dispatcher" or "node-watcher") of ``backend``'s cluster, in this process, until the
    block ends; ready as ``_service_ready`` says."""
    main = _service_main(kind, _options(broker, backend, kind), settings or DispatchSettings())
    task = asyncio.create_task(main.run(handle_signals=False), name=kind)
    await wait_started(task, lambda: _service_ready(main))
    try:
        yield
    finally:
        main.stop()
        await task


@contextlib.asynccontextmanager
async def service_process(broker: Broker, backend: Backend, kind: str,
                          settings: DispatchSettings | None = None) -> AsyncIterator[ChildProcess]:
    """The same in a child process of its own, as in a deployment (its CPU apart from this process')."""
    child = ChildProcess(kind.replace("-", " "), _serve_child,
                         (kind, _options(broker, backend, kind), settings or DispatchSettings()))
    try:
        await child.start()
        yield child
    finally:
        await child.stop()


def _serve_child(kind: str, options: ServeOptions, settings: DispatchSettings, ready: Any) -> None:
    """The child process of ``service_process``: serve until SIGTERM, setting ``ready`` once ready."""
    child_logging(kind)

    main = _service_main(kind, options, settings)
    asyncio.run(serve_in_child(main.run(handle_signals=True), kind, lambda: _service_ready(main), ready))


def dispatcher(broker: Broker, backend: Backend,
               settings: DispatchSettings | None = None) -> contextlib.AbstractAsyncContextManager[None]:
    return service(broker, backend, "dispatcher", settings)


def decision(job_id: str, cluster: str, nodes: list[str], pods_per_node: int, gpus: int) -> JobAdmitted:
    plan = PlacementPlan(cluster=cluster, nodes=[NodePods(node=n, pods=pods_per_node) for n in nodes])
    spec = JobSpec(name=job_id, queue="bench", replicas=plan.pods,
                   template=PodTemplate(image="registry.example/train:1", command=["python", "train.py"],
                                        resources=ResourceRequest(gpus=gpus, gpu_type=GPU_TYPE, cpu="1",
                                                                  memory="1Gi")))
    return JobAdmitted(job_id=job_id, attempt=0, tenant="bench", queue="bench", namespace=NAMESPACE, priority=100,
                       replicas=plan.pods, placement=plan, spec=spec)


async def pods_of(rest: KubeRest, selector: str) -> list[KubeObject]:
    pods, _ = await rest.list(PODS, NAMESPACE, label_selector=selector)
    return pods


async def wait_pods(rest: KubeRest, selector: str, count: int, done: Callable[[KubeObject], bool],
                    within: float, poll: float = 0.25) -> float:
    """Poll until ``count`` pods match ``selector`` and ``done``; the time it took (NaN on time-out)."""
    started = time.perf_counter()
    while time.perf_counter() - started < within:
        pods = await pods_of(rest, selector)
        if len(pods) >= count and sum(1 for p in pods if done(p)) >= count:
            return time.perf_counter() - started
        await asyncio.sleep(poll)
    return float("nan")


def running(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def bound(pod: KubeObject) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


async def clear(rest: KubeRest) -> None:
    jobs, _ = await rest.list(JOBS, NAMESPACE)
    for job in jobs:
        await rest.delete(JOBS, job["metadata"]["name"], NAMESPACE, propagation="Background")
    for pod in await pods_of(rest, "muster.dev/job-id"):
        with contextlib.suppress(Exception):
            await rest.delete(PODS, pod["metadata"]["name"], NAMESPACE, grace_period_seconds=0)
    deadline = time.perf_counter() + 120
    for _ in range(240):
        if not await pods_of(rest, "muster.dev/job-id") or time.perf_counter() > deadline:
            return
        await asyncio.sleep(0.5)


async def gang_trials(broker: Broker, backend: Backend, producer: EnvelopeProducer, *, pods: int,
                      trials: int) -> list[float]:
    nodes = [f"{backend.cluster}-{GPU_TYPE}-{i}" for i in range(pods)]
    times: list[float] = []
    async with dispatcher(broker, backend):
        for t in range(trials):
            job_id = f"gang-{backend.cluster}-{t}"
            started = time.perf_counter()
            await (await producer.send(DECISIONS_TOPIC, make_envelope(
                decision(job_id, backend.cluster, nodes, 1, 8), QUEUE_MANAGER)))
            await wait_pods(backend.rest, f"muster.dev/job-id={job_id}", pods, running, within=120, poll=0.1)
            times.append(time.perf_counter() - started)
            await clear(backend.rest)
    return times


async def dispatch_burst(broker: Broker, backend: Backend, producer: EnvelopeProducer, *, jobs: int,
                         nodes: int, concurrency: int) -> tuple[float, float]:
    """Seconds until every Job exists and until every pod is bound, from the first decision produced,
    with the dispatcher handling ``concurrency`` decisions at once."""
    decisions = [decision(f"burst-{backend.cluster}-c{concurrency}-{j}", backend.cluster,
                          [f"{backend.cluster}-{GPU_TYPE}-{(j * 2 + k) % nodes}" for k in range(2)], 2, 1)
                 for j in range(jobs)]
    async with dispatcher(broker, backend, DispatchSettings(concurrent_decisions=concurrency)):
        started = time.perf_counter()
        futures = [await producer.send(DECISIONS_TOPIC, make_envelope(d, QUEUE_MANAGER)) for d in decisions]
        await asyncio.gather(*futures)
        created = float("nan")
        while time.perf_counter() - started < 300:
            items, _ = await backend.rest.list(JOBS, NAMESPACE)
            if len(items) >= jobs:
                created = time.perf_counter() - started
                break
            await asyncio.sleep(1.0)
        # polled once a second: listing every pod more often would load the API server more than the work
        await wait_pods(backend.rest, "muster.dev/job-id", jobs * 4, bound, within=300, poll=1.0)
        pods_bound = time.perf_counter() - started
        await clear(backend.rest)
    return created, pods_bound


RAW_IN_FLIGHT = 48  # the raw baseline's concurrent creations: as many as the dispatcher's decisions and bindings


async def raw_pods(backend: Backend, *, pods: int, nodes: int) -> float:
    """The API server's own ceiling for the same burst: ``pods`` one-GPU pods created with ``nodeName``
    already set (no Job, no Job controller, no binding), ``RAW_IN_FLIGHT`` at once; seconds to the last."""
    slots = asyncio.Semaphore(RAW_IN_FLIGHT)
    await ensure_namespace(backend.rest, NAMESPACE)

    async def one(i: int) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"raw-{i}", "namespace": NAMESPACE,
                            "labels": {"muster.dev/job-id": f"raw-{i // 4}"}},
               "spec": {"nodeName": f"{backend.cluster}-{GPU_TYPE}-{(i // 2) % nodes}",
                        "containers": [{"name": "main", "image": "registry.example/train:1",
                                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
        async with slots:
            await backend.rest.create(PODS, pod)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(pods)))
    took = time.perf_counter() - started
    await clear(backend.rest)
    return took


async def reclaim_trials(broker: Broker, backend: Backend, *, nodes: int, trials: int) -> list[float]:
    """Fill every GPU with one-GPU low-priority jobs, then time each high-priority one to its pod Running."""
    layout = QueueLayout(nominal=nodes * 8)
    fillers = [submission(f"low-{backend.cluster}-{i}", "q-0-0", priority_class="low", runtime_s=3600)
               for i in range(nodes * 8)]
    times: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        submitter = await stack.enter_async_context(
            EnvelopeProducer(broker.settings.with_identity(client_id="bench-pipeline"), linger_ms=2))
        await publish(submitter, CONFIG_TOPIC, layout.messages(), "gateway")
        await stack.enter_async_context(service(broker, backend, "node-watcher"))
        manager = QueueManagerProcess(broker.settings, SchedulerConfig(min_runtime_s=0.0), debounce_s=None)
        stack.push_async_callback(manager.stop)
        await manager.start()
        await stack.enter_async_context(service(broker, backend, "dispatcher"))
        await publish(submitter, INTENTS_TOPIC, fillers, SUBMITTER)
        filled = await wait_pods(backend.rest, "muster.dev/job-id", len(fillers), running, within=600, poll=1.0)
        if math.isnan(filled):
            raise RuntimeError(f"the {len(fillers)} low-priority jobs did not all start on {backend.name}")
        for t in range(trials):
            job = submission(f"high-{backend.cluster}-{t}", "q-0-0", priority_class="high", runtime_s=3600)
            started = time.perf_counter()
            await publish(submitter, INTENTS_TOPIC, [job], SUBMITTER)
            waited = await wait_pods(backend.rest, f"muster.dev/job-id={job.job_id}", 1, running, within=120,
                                     poll=0.05)
            times.append(time.perf_counter() - started if not math.isnan(waited) else waited)
    await clear(backend.rest)
    return times


async def main(*, benchmark: str, quick: bool, bootstrap: str | None, brokers: int = 1) -> str:
    nodes = {"gang": 125 if quick else 1_000, "dispatch": 125 if quick else 1_000,
             "reclaim": 4 if quick else 32}[benchmark]
    pods = 64 if quick else 512
    trials = {"gang": 1 if quick else 3, "dispatch": 1, "reclaim": 3 if quick else 20}[benchmark]
    jobs = 25 if quick else 250
    rows: list[list[str]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="muster-bench-kube-") as root:
        for cluster in ("sim", "real"):
            config = fleet(cluster, nodes)
            # a broker of each cluster's own: the queue manager of one must not see the other's nodes
            async with private_broker(bootstrap, brokers=brokers) as broker, \
                    (kubesim(config) if cluster == "sim" else real(config, Path(root))) as backend:
                notes.append(f"{backend.name}: {nodes:,} nodes ready in {backend.setup_s:.1f} s")
                if benchmark == "reclaim":
                    spread = Spread.of([t for t in await reclaim_trials(broker, backend, nodes=nodes, trials=trials)
                                        if not math.isnan(t)])
                    rows.append([backend.name, f"{spread.count}/{trials}", f"{spread.p50:.2f} s",
                                 f"{spread.p95:.2f} s", f"{spread.worst:.2f} s"])
                    continue
                producer = EnvelopeProducer(broker.settings.with_identity(client_id="muster-bench-decisions"))
                await producer.start()
                try:
                    if benchmark == "gang":
                        times = await gang_trials(broker, backend, producer, pods=pods, trials=trials)
                        spread = Spread.of(times)
                        rows.append([backend.name, f"{spread.p50:.2f} s", f"{spread.worst:.2f} s",
                                     ", ".join(f"{t:.2f}" for t in times)])
                    else:
                        raw_s = await raw_pods(backend, pods=jobs * 4, nodes=nodes)
                        rows.append([backend.name, f"raw API: pods with nodeName, {RAW_IN_FLIGHT} at once", "-", "-",
                                     f"{raw_s:.2f} s", rate(jobs * 4, raw_s)])
                        for concurrency in (1, DispatchSettings().concurrent_decisions):
                            created, bound_s = await dispatch_burst(broker, backend, producer, jobs=jobs,
                                                                    nodes=nodes, concurrency=concurrency)
                            rows.append([backend.name, str(concurrency), f"{created:.2f} s", rate(jobs, created),
                                         f"{bound_s:.2f} s", rate(jobs * 4, bound_s)])
                finally:
                    await producer.stop()
    if benchmark == "gang":
        table = Table(f"gang on Kubernetes: one {pods}-pod gang (8 GPUs a pod, one pod a node) on {nodes:,} nodes, "
                      f"JobAdmitted -> every pod Running, {trials} trial(s)",
                      ["cluster", "p50", "max", "trials (s)"])
        notes.append("goal: <= 10 s on the real control plane (KAI-Scheduler reports 48.7 s for 512 pods)")
    elif benchmark == "dispatch":
        table = Table(f"dispatch on Kubernetes: {jobs} gangs of 4 pods x 1 GPU decided at once on {nodes:,} nodes",
                      ["cluster", "decisions at once", "all Jobs created", "Jobs/s", "all pods bound",
                       "pods bound/s"])
        notes.append("goal: >= 200 pods/s bound on the real control plane")
    else:
        table = Table(f"reclaim on Kubernetes: {nodes * 8} one-GPU low-priority jobs fill {nodes} nodes; a one-GPU "
                      f"high-priority job, submit -> its pod Running (queue manager, handshake with no grace, victim "
                      f"gone, Job, binding)", ["cluster", "trials", "p50", "p95", "max"])
        notes.append("goal: p95 <= 5 s on the real control plane (KAI-Scheduler reports 13.9 s)")
    for row in rows:
        table.add(*row)
    table.notes += notes
    return table.render()
