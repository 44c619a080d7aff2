"""The system under test: a disk-backed Apache Kafka, one simulated cluster in this process, and every
service as its own ``muster serve`` child process, started with the pieces ``muster up`` uses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from schemas.config import MusterConfig
from schemas.topics import STATUS_TOPIC, TOPICS
from services.chaos.plan import ChaosPlan
from services.kubesim import KubeSim
from services.runtime.broker import KafkaBroker, KafkaCluster
from services.runtime.credentials import write_credentials
from services.runtime.kafka import KafkaSettings, partition_leaders
from services.runtime.kafka.topics import TopicPlan, create_topics, plans_for
from services.runtime.options import ClusterAccess
from services.runtime.supervise import Child, free_port, service_children

log = logging.getLogger(__name__)

#: a restarted service is expected healthy, and a killed broker's partitions led elsewhere, within these;
#: a slower one is counted (``slow_recoveries``, ``slow_failovers``) and waited for up to ``GIVE_UP_S``:
#: on a starved machine a Python service can take minutes just to import, and that is a finding to report,
#: not a reason to abandon the run and its checks
HEALTHY_WITHIN_S = 120.0
FAILOVER_WITHIN_S = 60.0
GIVE_UP_S = 900.0
#: the admin client's request timeout while it watches leaders move: a request stuck on the dead broker
#: would otherwise add the default 30 s to the measured failover
PROBE_TIMEOUT_MS = 5000


#: ``min.compaction.lag.ms`` of the run's status topic: 30 days, longer than any run, so the cleaner leaves
#: every status record of the run in place and the checks read each job's whole history (the topic stays
#: compacted, as in production, only later than the run)
KEEP_HISTORY_MS = 30 * 24 * 3600 * 1000


def chaos_topic_plans() -> list[TopicPlan]:
    """The registry's topics and dead-letter topics, the status topic keeping every record for the run."""
    return [replace(plan, config={**plan.config, "min.compaction.lag.ms": str(KEEP_HISTORY_MS)})
            if plan.name == STATUS_TOPIC else plan for plan in plans_for(TOPICS.values())]


@dataclass
class ChaosSystem:
    """Handles on everything that runs; ``children`` by service name (``dispatcher/<cluster>`` ...)."""

    state_dir: Path
    config: MusterConfig
    broker: KafkaBroker | KafkaCluster
    settings: KafkaSettings
    sim: KubeSim
    gateway_url: str
    admin_token: str
    children: dict[str, Child] = field(default_factory=dict)
    restarting: set[str] = field(default_factory=set)
    unexpected_exits: dict[str, int] = field(default_factory=dict)
    failed_starts: dict[str, int] = field(default_factory=dict)
    slow_recoveries: dict[str, int] = field(default_factory=dict)
    slow_failovers: int = 0

    async def bring_up(self, name: str) -> None:
        """Start the child and wait until it is healthy. A start that exits (say, while the broker is down)
        is counted and tried again; a child alive but not healthy is waited for. Past ``HEALTHY_WITHIN_S``
        the recovery is counted as slow and still waited for; past ``GIVE_UP_S`` it raises."""
        child = self.children[name]
        loop = asyncio.get_running_loop()
        started = loop.time()
        slow = False
        await child.start()
        while True:
            try:
                await child.wait_healthy(min(HEALTHY_WITHIN_S, max(1.0, started + GIVE_UP_S - loop.time())))
                return
            except RuntimeError:
                if loop.time() - started > GIVE_UP_S:
                    raise
                if not slow and loop.time() - started > HEALTHY_WITHIN_S:
                    slow = True
                    self.slow_recoveries[name] = self.slow_recoveries.get(name, 0) + 1
                    log.warning("%s not healthy %gs after its start; still waiting", name, HEALTHY_WITHIN_S)
                if child.process is not None and child.process.returncode is not None:
                    self.failed_starts[name] = self.failed_starts.get(name, 0) + 1
                    log.info("%s exited while starting; trying again", name)
                    await asyncio.sleep(1.0)
                    await child.start()

    async def kill(self, name: str, downtime_s: float) -> tuple[bool, bool, float]:
        """SIGKILL the child, keep it down for ``downtime_s``, start it again and wait until it is healthy.
        Returns whether a live process was there and died of SIGKILL, whether a new process (another pid)
        answered healthy, and the seconds from the restart until it was healthy."""
        child = self.children[name]
        self.restarting.add(name)
        try:
            killed, old_pid = False, None
            if child.process is not None and child.process.returncode is None:
                old_pid = child.process.pid
                child.process.kill()
                killed = await child.process.wait() == -signal.SIGKILL
            await asyncio.sleep(downtime_s)
            started = time.monotonic()
            await self.bring_up(name)
            new = child.process
            restarted = new is not None and new.returncode is None and new.pid != old_pid
            return killed, restarted, time.monotonic() - started
        finally:
            self.restarting.discard(name)

    async def kill_broker(self, role: str, downtime_s: float) -> tuple[int, float]:
        """SIGKILL one broker of the cluster: the leader of most of Muster's partitions (``role="leader"``)
        or the active controller (``"controller"``); wait until every partition has a live leader again,
        keep the node down for ``downtime_s`` after its kill, then start it and wait until it registered.
        Returns the node and the seconds from the kill until the leaderships had moved."""
        cluster = self.broker
        if not isinstance(cluster, KafkaCluster):
            raise RuntimeError("broker kills need a cluster (--brokers 2 or more)")
        topics = list(TOPICS)
        probe = self.settings.model_copy(update={"request_timeout_ms": PROBE_TIMEOUT_MS})
        victim: int | None = None
        if role == "controller":
            victim = await asyncio.to_thread(cluster.active_controller)
        if victim is None:
            led = (await partition_leaders(probe, topics)).values()
            victim = Counter(leader for leader in led if leader > 0).most_common(1)[0][0]
        killed = time.monotonic()
        await asyncio.to_thread(cluster.kill_node, victim)
        slow = False
        while True:
            leaders = await partition_leaders(probe, topics)
            if all(leader > 0 and leader != victim for leader in leaders.values()):
                break
            waited = time.monotonic() - killed
            if waited > GIVE_UP_S:
                raise RuntimeError(f"partitions still without a live leader {GIVE_UP_S:g}s after "
                                   f"broker {victim} was killed")
            if not slow and waited > FAILOVER_WITHIN_S:
                slow = True
                self.slow_failovers += 1
                log.warning("partitions without a live leader %gs after broker %s was killed; still waiting",
                            FAILOVER_WITHIN_S, victim)
            await asyncio.sleep(0.2)
        failover = time.monotonic() - killed
        await asyncio.sleep(max(0.0, downtime_s - failover))
        await asyncio.to_thread(cluster.start_node, victim)
        return victim, failover

    async def restart_broker(self, downtime_s: float, node: int | None = None) -> None:
        """Stop the broker (controlled shutdown), keep it down, start it on the same log directory and port.
        Of a cluster, only ``node`` when given: the other brokers serve meanwhile."""
        if node is not None and isinstance(self.broker, KafkaCluster):
            await asyncio.to_thread(self.broker.stop_node, node)
            await asyncio.sleep(downtime_s)
            await asyncio.to_thread(self.broker.start_node, node)
            return
        await asyncio.to_thread(self.broker.stop)
        await asyncio.sleep(downtime_s)
        await asyncio.to_thread(self.broker.start)

    async def keep_alive(self, stop: asyncio.Event, notify: Callable[[str], None]) -> None:
        """Restart any child that exits on its own (not one this harness is restarting); counts them."""
        while not stop.is_set():
            for name, child in self.children.items():
                process = child.process
                if name in self.restarting or process is None or process.returncode is None:
                    continue
                self.unexpected_exits[name] = self.unexpected_exits.get(name, 0) + 1
                notify(f"{name} exited on its own with {process.returncode}; restarting (log: {child.log_path})")
                self.restarting.add(name)
                try:
                    await self.bring_up(name)
                finally:
                    self.restarting.discard(name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


def _admin_token(paths: dict[str, Path]) -> str:
    token: str = yaml.safe_load(paths["cli"].read_text(encoding="utf-8"))["token"]
    return token


@contextlib.asynccontextmanager
async def running_system(plan: ChaosPlan, config: MusterConfig, state_dir: Path,
                         notify: Callable[[str], None]) -> AsyncIterator[ChaosSystem]:
    """Start broker, topics, kubesim and the services; stop them all (and the broker) on the way out."""
    broker: KafkaBroker | KafkaCluster = (
        KafkaBroker(log_dir=state_dir / "kafka") if plan.brokers == 1
        else KafkaCluster(plan.brokers, log_dir=state_dir / "kafka")
    )
    notify("starting Apache Kafka" + (f" ({plan.brokers} brokers)" if plan.brokers > 1 else ""))
    await asyncio.to_thread(broker.start)
    children: list[Child] = []
    try:
        settings = KafkaSettings(bootstrap=broker.bootstrap, client_id="muster-chaos", request_timeout_ms=15_000)
        await create_topics(settings, chaos_topic_plans())
        sim = KubeSim(config, profile="zero", seed=plan.seed)
        async with sim.serve(host="127.0.0.1", port=0) as url:
            gateway_url = f"http://127.0.0.1:{free_port()}"
            paths = await asyncio.to_thread(write_credentials, state_dir, config, gateway_url)
            config_file = state_dir / "config.yaml"
            await asyncio.to_thread(config_file.write_text, yaml.safe_dump(config.model_dump(mode="json")),
                                    encoding="utf-8")
            children = service_children(config, state_dir, broker.bootstrap, {sim.cluster_name: ClusterAccess(url)},
                                        config_file,
                                        int(gateway_url.rsplit(":", 1)[1]))
            for child in children:
                child.env["MUSTER_SCHEDULER_MIN_RUNTIME_S"] = f"{plan.min_runtime_s:g}"
            notify(f"broker at {broker.bootstrap}, cluster at {url}; starting {len(children)} services")
            for child in children:
                await child.start()
            for child in children:
                await child.wait_healthy(HEALTHY_WITHIN_S)
            yield ChaosSystem(state_dir, config, broker, settings, sim, gateway_url, _admin_token(paths),
                              {c.name: c for c in children})
    finally:
        await asyncio.gather(*(child.stop() for child in children), return_exceptions=True)
        await asyncio.to_thread(broker.close)
