"""Kueue's scenario through the whole of Muster on Kubernetes: submissions onto the intents topic, the queue
manager (its own process), the dispatcher creating each admitted job's Kubernetes Job, the cluster running its
pods for the workload's ``runtimeMs``, and the node watcher reporting them back (``muster bench kueue --kube
real``: on kubesim and on a real control plane, one after the other).

A workload here is what it is in Kueue's scenario: one pod asking ``request`` of the resource (``podCount`` pods
with a TAS config), not the gang of one-GPU pods the decision-only run places. So each node must hold the
largest request: the nodes have ``max(8, largest request)`` GPUs, and together exactly the nominal quotas
(rounded up to whole nodes). The pods carry kubesim's duration annotation, which kubesim's kubelet and the real
control plane's KWOK stages both honour, so a pod runs ``runtimeMs`` from the moment it starts.

The figures are read from Muster's own topics by a consumer following them from their end (not from the
benchmark's bookkeeping): an admission at its ``JobAdmitted``'s time, a finish at its ``RunSucceeded``'s, an
eviction at the dispatcher's ``JobStopped``. A workload holds its quota from its admission until its run ended
or it was stopped, as in the decision-only run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from bench.peers.kueue_figures import Figures, muster_figures
from bench.peers.kueue_scenario import GPUS_PER_NODE, Arrival, Scenario, ScenarioLayout, priority_class
from bench.system import kube
from bench.system.machine import process_cpu_seconds
from bench.system.measure import Timeline
from bench.system.observe import counting
from bench.system.stack import SUBMITTER, Broker, ChildProcess, QueueManagerProcess, private_broker, publish
from bench.system.workload import GPU_TYPE, TENANT, Fleet
from schemas.codec import DecodeError, decode
from schemas.config import ClusterConfig, MusterConfig, NodeGroupConfig, TopologyConfig
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected
from schemas.envelope import make_envelope
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest
from schemas.kube import GPU_RESOURCE, QUEUE
from schemas.kube import GPU_TYPE as GPU_TYPE_LABEL
from schemas.runs import JobDispatched, JobStopped, RunStarted, RunSucceeded
from schemas.topics import CONFIG_TOPIC, DECISIONS_TOPIC, DISPATCHES_TOPIC, INTENTS_TOPIC, RUNS_TOPIC, TOPICS
from services.core import SchedulerConfig
from services.kubesim.kubelet import DURATION_ANNOTATION
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.kube import KubeRest, build_api_client, ensure_namespace
from services.runtime.options import ClusterAccess
from services.spec.kinds.pods import pod_group
from services.spec.workload_spec import spec_from_workload

log = logging.getLogger(__name__)

IMAGE = "registry.example/bench:1"
#: how a workload reaches Kubernetes (``--objects``): a ``batch/v1`` Job of its pods, or its pods alone
OBJECTS = ("jobs", "pods")
#: Muster's run stops waiting this long after the last submission (and reports how far it got)
DRAIN_S = 1_200.0
#: how often the wait for the last finish looks at the figures read so far
CHECK_S = 0.5
BACKENDS = ("sim", "real")
CLUSTER_PROCESSES = {"kubesim": "kubesim", "real control plane": "control plane (etcd, API server, controllers, "
                                                                 "scheduler, KWOK)"}


def node_gpus(scenario: Scenario) -> int:
    """GPUs per node: the largest pod's request fits on one node, and never fewer than 8."""
    return max([GPUS_PER_NODE, *(t.request for t in scenario.templates())])


def node_count(scenario: Scenario) -> int:
    """Nodes of ``node_gpus`` GPUs holding the nominal quotas (rounded up to whole nodes)."""
    return -(-scenario.nominal_total // node_gpus(scenario))


def cluster_config(name: str, scenario: Scenario) -> ClusterConfig:
    """Nodes holding the nominal quotas (rounded up to whole nodes), each big enough for the largest pod."""
    per_node = node_gpus(scenario)
    nodes = node_count(scenario)
    return ClusterConfig(name=name, node_groups=[NodeGroupConfig(
        name=GPU_TYPE, count=nodes, gpus_per_node=per_node, gpu_type=GPU_TYPE, cpu=max(96, 4 * per_node),
        memory_gb=1024, topology=TopologyConfig(zone=f"{name}-z", block="b0", racks=max(1, nodes // 32)),
        taints=["nvidia.com/gpu"])])


def pod_submission(arrival: Arrival, *, at_s: float, objects: str = "jobs") -> SubmitJob:
    """The workload as Kueue has it: ``podCount`` pods (one by default) each asking ``request`` GPUs, running
    ``runtimeMs`` once started; submitted at ``at_s`` (this process's clock). ``objects``: ``jobs``, a
    ``batch/v1`` Job of those pods (what the dispatcher makes of a job with a pod template); ``pods``, the
    pods themselves as a group of plain Pods (``v1`` Pod), with no Job and no Job controller."""
    template = arrival.template
    if objects == "pods":
        spec = plain_pods_spec(arrival)
    else:
        spec = JobSpec(name=arrival.job_id, queue=arrival.queue, priority_class=priority_class(template.priority),
                       replicas=template.pods, annotations={DURATION_ANNOTATION: f"{template.runtime_s:g}"},
                       template=PodTemplate(image=IMAGE, resources=ResourceRequest(
                           gpus=template.request, gpu_type=GPU_TYPE, cpu="1", memory="1Gi")))
    return SubmitJob(job_id=arrival.job_id, tenant=TENANT, user="bench", spec=spec,
                     submitted_at=datetime.fromtimestamp(at_s, UTC))


def plain_pods_spec(arrival: Arrival) -> JobSpec:
    """The workload as a group of ``podCount`` plain Pods asking what the Job's pods ask (the same resources,
    GPU type, toleration and duration annotation), its roles read from the pods as the gateway reads a
    submitted Pod group's."""
    template = arrival.template
    resources = {GPU_RESOURCE: str(template.request), "cpu": "1", "memory": "1Gi"}
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {QUEUE: arrival.queue},
                     "annotations": {DURATION_ANNOTATION: f"{template.runtime_s:g}"}},
        "spec": {"restartPolicy": "Never", "nodeSelector": {GPU_TYPE_LABEL: GPU_TYPE},
                 "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "worker", "image": IMAGE,
                                 "resources": {"requests": resources, "limits": resources}}]},
    }
    pods = [{**pod, "metadata": {**pod["metadata"], "name": f"worker-{i}"}} for i in range(template.pods)]
    spec = spec_from_workload(pod_group(pods), queue=arrival.queue, kube_native=False)
    return spec.model_copy(update={"name": arrival.job_id, "priority_class": priority_class(template.priority)})


@dataclass
class TopicReader:
    """Follows the decisions, dispatches and runs topics from their end and keeps the moments the figures
    need in a ``Timeline`` (each at the time its message says it happened)."""

    settings: KafkaSettings
    timeline: Timeline = field(default_factory=Timeline)
    rejected: dict[str, str] = field(default_factory=dict)
    decisions: int = 0
    #: per job, the moments between its admission and its finish (the first attempt's), for ``hops``
    dispatched: dict[str, float] = field(default_factory=dict)  # the dispatcher's JobDispatched
    started: dict[str, float] = field(default_factory=dict)  # the node watcher's RunStarted
    finish_read: dict[str, float] = field(default_factory=dict)  # this reader's clock when RunSucceeded arrived
    #: per preemptor, each stop it asked for: (when, the victim, the victim's attempt), for ``preemptions``
    asked: dict[str, list[tuple[float, str, int]]] = field(default_factory=dict)
    #: per (job, attempt), when that attempt ended: its JobStopped, or its RunSucceeded when it finished first
    ended: dict[tuple[str, int], float] = field(default_factory=dict)
    succeeded: set[tuple[str, int]] = field(default_factory=set)  # the attempts that ended by finishing

    async def run(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer(**self.settings.with_identity(client_id="bench-kueue-reader").client_options(),
                                    enable_auto_commit=False, isolation_level="read_committed")
        await consumer.start()
        try:
            partitions = [TopicPartition(topic, p) for topic in (DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC)
                          for p in range(TOPICS[topic].partitions)]
            consumer.assign(partitions)
            await consumer.seek_to_end(*partitions)
            for tp in partitions:
                await consumer.position(tp)
            ready.set()
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=5000)
                for tp, records in batch.items():
                    for record in records:
                        self._on(tp.topic, record.value)
        finally:
            await consumer.stop()

    def _on(self, topic: str, raw: bytes | None) -> None:
        try:
            envelope = decode(raw, topic=topic)
        except DecodeError:
            return
        message, at = envelope.payload, envelope.occurred_at.timestamp()
        if isinstance(message, JobAdmitted):
            self.decisions += 1
            self.timeline.decided.setdefault(message.job_id, at)
            self.timeline.hold(message.job_id, at)
        elif isinstance(message, JobPreemptionRequested):
            if message.preemptor is not None:
                self.asked.setdefault(message.preemptor, []).append((at, message.job_id, message.attempt))
        elif isinstance(message, JobDispatched):
            self.dispatched.setdefault(message.job_id, at)
        elif isinstance(message, RunStarted):
            self.started.setdefault(message.job_id, at)
        elif isinstance(message, RunSucceeded):
            if (message.job_id, message.attempt) not in self.ended:
                self.ended[message.job_id, message.attempt] = at
                self.succeeded.add((message.job_id, message.attempt))
            self.timeline.finished.setdefault(message.job_id, at)
            self.finish_read.setdefault(message.job_id, time.time())
            self.timeline.release(message.job_id, at)
        elif isinstance(message, JobStopped):
            self.ended.setdefault((message.job_id, message.attempt), at)
            self.timeline.stopped.setdefault(message.job_id, at)
            self.timeline.release(message.job_id, at, evicted=True)
        elif isinstance(message, JobRejected):
            self.rejected[message.job_id] = message.reason

    def _ran_once(self, runtimes: dict[str, float]) -> list[str]:
        timeline = self.timeline
        return [j for j in timeline.finished if j not in timeline.evictions and j in runtimes
                and {j} <= self.dispatched.keys() & self.started.keys() & timeline.decided.keys()]

    def latency(self, runtimes: dict[str, float]) -> Latency | None:
        """The system's average delays around a workload's run (None: none ran once from admission to finish)."""
        once = self._ran_once(runtimes)
        if not once:
            return None
        timeline = self.timeline
        return Latency(
            start_s=statistics.fmean(self.started[j] - timeline.decided[j] for j in once),
            finish_s=statistics.fmean(timeline.finished[j] - self.started[j] - runtimes[j] for j in once))

    def hops(self, runtimes: dict[str, float]) -> str:
        """Where a workload's time between its admission and its finish went, averaged over the jobs that ran
        once (never evicted): what the system adds to the quota a workload holds beyond its ``runtimeMs``."""
        timeline = self.timeline
        once = self._ran_once(runtimes)
        if not once:
            return "no workload ran once from admission to finish"

        def avg(pairs: list[float]) -> str:
            return f"{sum(pairs) / len(pairs):.2f} s"

        return (f"from admission to finish, average over {len(once):,} workloads that ran once: admission -> "
                f"JobDispatched {avg([self.dispatched[j] - timeline.decided[j] for j in once])}, -> RunStarted "
                f"{avg([self.started[j] - self.dispatched[j] for j in once])}, -> RunSucceeded beyond runtimeMs "
                f"{avg([timeline.finished[j] - self.started[j] - runtimes[j] for j in once])}, -> read from the "
                f"runs topic {avg([self.finish_read[j] - timeline.finished[j] for j in once])}; quota held "
                f"beyond runtimeMs {avg([timeline.finished[j] - timeline.decided[j] - runtimes[j] for j in once])}")

    def preemptions(self, classes: dict[str, str]) -> str:
        """Where the waits of the workloads that preempted went, per class (``classes``: job -> class): from
        submission to the first stop asked for them, from there to the last of those victims' ends (each
        victim's JobStopped, or its RunSucceeded where it finished first), and from that to the admission."""
        timeline = self.timeline
        rows: dict[str, list[tuple[float, float, float, int]]] = {}
        stops: list[float] = []
        finished_first = 0
        for job, asked in self.asked.items():
            if job not in timeline.submitted or job not in timeline.decided or job not in classes:
                continue
            admitted = timeline.decided[job]  # the first admission: what the stops were asked for
            before = [(at, victim, attempt) for at, victim, attempt in asked if at <= admitted]
            if not before or any((victim, attempt) not in self.ended for _, victim, attempt in before):
                continue
            for at, victim, attempt in before:
                stops.append(self.ended[victim, attempt] - at)
                finished_first += (victim, attempt) in self.succeeded
            first = min(at for at, _, _ in before)
            last = max(self.ended[victim, attempt] for _, victim, attempt in before)
            rows.setdefault(classes[job], []).append(
                (first - timeline.submitted[job], last - first, admitted - last, len(before)))
        if not rows:
            return "no workload was admitted after preempting"

        def avg(values: list[float]) -> str:
            return f"{statistics.fmean(values):.2f} s"

        parts = [f"{name} ({len(r):,}, {statistics.fmean(x[3] for x in r):.1f} victims each): submission -> first "
                 f"stop asked {avg([x[0] for x in r])}, -> last victim ended {avg([x[1] for x in r])}, -> admitted "
                 f"{avg([x[2] for x in r])}" for name, r in sorted(rows.items())]
        return (f"the workloads admitted after preempting, by class: {'; '.join(parts)}; a victim's stop took "
                f"{avg(stops)} on average (p50 {statistics.median(stops):.2f} s), {finished_first:,} of "
                f"{len(stops):,} victims finished before they were stopped")


@dataclass(frozen=True)
class Latency:
    """What the system around the decisions adds to a workload's run, on average: from its ``JobAdmitted`` to
    its ``RunStarted`` (``start_s``), and from ``runtimeMs`` after that to its ``RunSucceeded`` (``finish_s``).
    Both hold the workload's quota."""

    start_s: float
    finish_s: float


def virtual_shape(scenario: Scenario) -> tuple[Fleet, Callable[[Arrival, datetime], SubmitJob]]:
    """The Kubernetes runs' nodes and submissions for ``kueue_virtual.replay``: Muster's decisions alone on the
    same shape (one pod per workload asking its request, on ``cluster_config``'s nodes)."""
    fleet = Fleet(nodes=node_count(scenario), gpus_per_node=node_gpus(scenario))
    return fleet, lambda arrival, at: pod_submission(arrival, at_s=at.timestamp())


@dataclass(frozen=True)
class KubeRun:
    figures: Figures
    notes: list[str]
    backend: str
    latency: Latency | None = None


@contextlib.asynccontextmanager
async def _backend(which: str, config: ClusterConfig, root: Path) -> AsyncIterator[kube.Backend]:
    async with (kubesim_process(config, root) if which == "sim" else kube.real(config, root)) as backend:
        yield backend


@contextlib.asynccontextmanager
async def kubesim_process(config: ClusterConfig, root: Path) -> AsyncIterator[kube.Backend]:
    """kubesim serving ``config`` in a process of its own (``python -m services.kubesim``, as an operator runs
    it): the cluster does not share the dispatcher's and the node watcher's event loop and core, as a real
    control plane does not."""
    started = time.perf_counter()
    cluster_file = root / f"{config.name}.yaml"
    cluster_file.write_text(yaml.safe_dump(MusterConfig(clusters=[config]).model_dump(mode="json")))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.kubesim", "--cluster", str(cluster_file), "--port", "0", "--profile", "zero",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=str(Path(__file__).parents[2]))
    assert process.stdout is not None
    try:
        url = None
        async with asyncio.timeout(kube.START_TIMEOUT_S):
            while url is None:
                line = (await process.stdout.readline()).decode()
                if not line:
                    raise RuntimeError(f"kubesim exited while starting ({await process.wait()})")
                found = re.search(r"listening on (http://\S+)", line)
                url = found.group(1) if found else None
        drain = asyncio.create_task(_drain(process.stdout), name="kubesim output")
        api = await build_api_client(url, connection_pool_size=64)
        async with api:
            yield kube.Backend("kubesim", config.name, KubeRest(api, request_timeout=60.0), ClusterAccess(url),
                               time.perf_counter() - started, {"kubesim": process.pid})
        drain.cancel()
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(kube.STOP_TIMEOUT_S):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


async def _drain(stream: asyncio.StreamReader) -> None:
    """Read a child's output to its end so that it never blocks on a full pipe."""
    while await stream.readline():
        pass


async def run_on(scenario: Scenario, which: str, *, bootstrap: str | None, root: Path, brokers: int = 1,
                 objects: str = "jobs") -> KubeRun:
    """The scenario through Muster on kubesim (``sim``) or a real control plane (``real``), each workload a
    Job of its pods or its pods alone (``objects``, see ``pod_submission``)."""
    arrivals = scenario.arrivals()
    ids = {a.job_id for a in arrivals}
    config = cluster_config(f"kueue-{which}", scenario)
    notes: list[str] = []
    async with private_broker(bootstrap, brokers=brokers) as broker, _backend(which, config, root) as backend:
        group = config.node_groups[0]
        notes.append(f"{backend.name}: {group.count} nodes of {group.gpus_per_node} GPUs ready in "
                     f"{backend.setup_s:.1f} s")
        await ensure_namespace(backend.rest, TENANT)
        reader = TopicReader(broker.settings)
        async with contextlib.AsyncExitStack() as stack:
            submitter = await stack.enter_async_context(
                EnvelopeProducer(broker.settings.with_identity(client_id="bench-pipeline"), linger_ms=2))
            await publish(submitter, CONFIG_TOPIC, ScenarioLayout(scenario).messages(), "gateway")
            watcher = await stack.enter_async_context(kube.service_process(broker, backend, "node-watcher"))
            manager = QueueManagerProcess(broker.settings, SchedulerConfig(min_runtime_s=0.0), debounce_s=None)
            stack.push_async_callback(manager.stop)
            await manager.start()
            dispatcher = await stack.enter_async_context(kube.service_process(broker, backend, "dispatcher"))
            children = [manager, dispatcher, watcher]
            await stack.enter_async_context(_following(reader))
            cluster_before = cluster_cpu(backend)
            before = _cpu(children, broker, backend, cluster_before)
            requests_before = await api_requests(backend)
            started = time.time()
            futures = []
            for arrival in arrivals:
                at = started + arrival.at_s
                delay = at - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                job = pod_submission(arrival, at_s=time.time(), objects=objects)
                reader.timeline.submitted[job.job_id] = job.submitted_at.timestamp()
                futures.append(await submitter.send(INTENTS_TOPIC, make_envelope(
                    job, SUBMITTER, occurred_at=job.submitted_at)))
            await asyncio.gather(*futures)
            timeline = reader.timeline
            done = await _wait(counting(
                f"workloads finished on {backend.name}",
                lambda: len(ids & (timeline.finished.keys() | reader.rejected.keys())), len(ids),
                lambda: ids <= timeline.finished.keys() | reader.rejected.keys()), within=DRAIN_S)
            cluster_after = cluster_cpu(backend)
            after = _cpu(children, broker, backend, cluster_after)
            requests_after = await api_requests(backend)
        if not done:
            notes.append(f"{backend.name}: NOT all finished within {DRAIN_S:.0f} s of the last submission: "
                         f"{len(ids & timeline.finished.keys()):,} of {len(ids):,}")
        if len(cluster_after) > 1:
            notes.append(f"{backend.name}, CPU by process: " + ", ".join(
                f"{name} {cluster_after[name] - cluster_before.get(name, 0.0):,.1f} s"
                for name in sorted(cluster_after, key=lambda n: cluster_before.get(n, 0.0) - cluster_after[n])))
        runtimes = {a.job_id: a.template.runtime_s for a in arrivals}
        notes.append(f"{backend.name}: {reader.hops(runtimes)}")
        notes.append(f"{backend.name}: {reader.preemptions({a.job_id: a.template.class_name for a in arrivals})}")
        latency = reader.latency(runtimes)
        if requests_before is not None and requests_after is not None:
            notes.append(f"{backend.name}: {requests_per_workload(requests_before, requests_after, len(ids))}")
        if reader.rejected:
            notes.append(f"{backend.name}: {len(reader.rejected):,} rejected, e.g. "
                         f"{next(iter(reader.rejected.items()))}")
    cpu = {name: after[name] - before[name] for name in before if name in after}
    return KubeRun(muster_figures(scenario, arrivals, timeline, started=started, cpu_s=cpu), notes, backend.name,
                   latency)


#: the API server's request counter, by verb, resource and subresource
REQUESTS_METRIC = "apiserver_request"
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"})


async def api_requests(backend: kube.Backend) -> dict[tuple[str, str], float] | None:
    """The API server's requests so far by (verb, resource[/subresource]), from its ``/metrics``; None where
    the cluster has no such counter (kubesim)."""
    if backend.name == "kubesim":
        return None
    try:
        text = await backend.rest.text("/metrics")
    except Exception as exc:  # the count is a note: the run's figures stand without it
        log.warning("the API server's /metrics could not be read: %s", exc)
        return None
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != REQUESTS_METRIC:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            key = (labels.get("verb", ""), resource)
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def requests_per_workload(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float],
                          workloads: int) -> str:
    """The API server's requests during the run per workload, in all and its writes by verb and resource."""
    spent = {key: after[key] - before.get(key, 0.0) for key in after}
    spent = {key: n for key, n in spent.items() if n > 0}
    n = max(1, workloads)
    writes = {key: v for key, v in spent.items() if key[0] in _WRITES}
    top = sorted(writes.items(), key=lambda kv: -kv[1])[:8]
    return (f"API server requests per workload {sum(spent.values()) / n:.1f}, of which writes "
            f"{sum(writes.values()) / n:.1f} (" + ", ".join(f"{verb} {res} {v / n:.2f}" for (verb, res), v in top) +
            "); watches and reads besides")


@contextlib.asynccontextmanager
async def _following(reader: TopicReader) -> AsyncIterator[None]:
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(reader.run(ready, stop), name="bench kueue topic reader")
    waiter = asyncio.ensure_future(ready.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiter.cancel()
        task.result()
        raise RuntimeError("the topic reader stopped while starting")
    try:
        yield
    finally:
        stop.set()
        await task


async def _wait(condition: Callable[[], bool], *, within: float) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(CHECK_S)
    return True


def _cpu(services: Sequence[ChildProcess], broker: Broker, backend: kube.Backend,
         cluster: dict[str, float]) -> dict[str, float]:
    """CPU seconds used so far by each part: each of Muster's ``services`` (a process each), the broker, this
    process (the submitter and the reader) and the cluster's own processes together (``cluster``, as
    ``cluster_cpu`` read them; left out unless every one of them could be read)."""
    out: dict[str, float] = {}
    for name, value in (*((s.name, s.cpu_seconds()) for s in services), ("Kafka broker", broker.cpu_seconds()),
                        ("submitter and reader", process_cpu_seconds(os.getpid()))):
        if value is not None:
            out[name] = value
    if cluster and len(cluster) == len(backend.processes):
        out[CLUSTER_PROCESSES[backend.name]] = sum(cluster.values())
    return out


def cluster_cpu(backend: kube.Backend) -> dict[str, float]:
    """CPU seconds used so far by each of the cluster's own processes (those that can be read)."""
    return {name: used for name, pid in backend.processes.items()
            if (used := process_cpu_seconds(pid)) is not None}
