"""The seeded fault schedule and its execution: killed services, broker restarts, API outages, dropped watches."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

from services.chaos.plan import ChaosPlan
from services.chaos.report import FaultCounts
from services.chaos.system import ChaosSystem

KILL, BROKER, BROKER_KILL, OUTAGE, WATCHES = "kill", "broker_restart", "broker_kill", "api_outage", "drop_watches"
BROKER_ROLES = ("leader", "controller")


@dataclass(frozen=True)
class Fault:
    """One fault at ``at_s`` seconds into the run; ``target`` names the service of a kill."""

    at_s: float
    kind: str
    target: str = ""
    seconds: float = 0.0


def plan_faults(plan: ChaosPlan, services: list[str], rng: random.Random) -> list[Fault]:
    """Faults spread over the run's window (none in its first and last tenth), in time order."""
    start, end = plan.duration_s * 0.1, plan.duration_s * 0.9

    def when() -> float:
        return round(rng.uniform(start, end), 3)

    faults = [Fault(when(), KILL, rng.choice(services), round(rng.uniform(0.2, 3.0), 2)) for _ in range(plan.kills)]
    faults += [Fault(when(), BROKER, _broker_node(plan, rng), round(rng.uniform(2.0, 6.0), 2))
               for _ in range(plan.broker_restarts)]
    faults += [Fault(when(), BROKER_KILL, BROKER_ROLES[i % 2], round(rng.uniform(1.0, 5.0), 2))
               for i in range(plan.broker_kills)]
    faults += [Fault(when(), OUTAGE, seconds=round(rng.uniform(1.0, 5.0), 2)) for _ in range(plan.outages)]
    faults += [Fault(when(), WATCHES) for _ in range(plan.watch_drops)]
    return sorted(faults, key=lambda f: f.at_s)


def _broker_node(plan: ChaosPlan, rng: random.Random) -> str:
    """The node a broker restart stops: one of a cluster's (by the seed); the one broker otherwise (no draw,
    so a single broker's schedule of a seed stays what it was)."""
    return str(rng.randint(1, plan.brokers)) if plan.brokers > 1 else ""


class FaultInjector:
    """Runs a schedule against a system. A kill of a service that is still coming back from an earlier
    fault waits for it, so every kill hits a running process; the broker restarts one at a time."""

    def __init__(self, system: ChaosSystem, counts: FaultCounts, notify: Callable[[str], None]) -> None:
        self._system = system
        self._counts = counts
        self._notify = notify
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self, faults: list[Fault], started_at: float) -> None:
        """Fire each fault at its time; returns once every fault has been carried out."""
        loop = asyncio.get_running_loop()
        for fault in faults:
            await asyncio.sleep(max(0.0, started_at + fault.at_s - loop.time()))
            self._tasks.append(asyncio.create_task(self._fire(fault), name=f"chaos {fault.kind} {fault.target}"))
        await asyncio.gather(*self._tasks)

    async def _fire(self, fault: Fault) -> None:
        sim = self._system.sim
        if fault.kind == OUTAGE:
            self._notify(f"kubernetes API answers 500 for {fault.seconds:g}s")
            sim.fail_api(500, fault.seconds)
            self._counts.api_outages += 1
        elif fault.kind == WATCHES:
            closed = sim.drop_watches()
            self._notify(f"dropped {closed} watches")
            self._counts.watch_drops += 1
            self._counts.watches_closed += closed
        elif fault.kind == BROKER:
            async with self._lock("broker"):
                which = f"broker {fault.target}" if fault.target else "broker"
                self._notify(f"{which} stop; restart in {fault.seconds:g}s")
                await self._system.restart_broker(fault.seconds, int(fault.target) if fault.target else None)
                self._counts.broker_restarts += 1
                self._notify("broker back")
        elif fault.kind == BROKER_KILL:
            async with self._lock("broker"):  # one broker down at a time: the quorum and min.insync hold
                node, failover = await self._system.kill_broker(fault.target, fault.seconds)
                self._notify(f"kill -9 broker {node} ({fault.target}); leaders moved in {failover:.1f}s; "
                             f"restart in {fault.seconds:g}s")
                self._counts.broker_kills[fault.target] = self._counts.broker_kills.get(fault.target, 0) + 1
                self._counts.broker_failover_s.setdefault(fault.target, []).append(round(failover, 2))
                self._counts.brokers_restarted_after_kill[fault.target] = (
                    self._counts.brokers_restarted_after_kill.get(fault.target, 0) + 1)
                self._notify(f"broker {node} back")
        elif fault.kind == KILL:
            async with self._lock(fault.target):
                self._notify(f"kill -9 {fault.target}; restart in {fault.seconds:g}s")
                killed, restarted, recovery = await self._system.kill(fault.target, fault.seconds)
                self._counts.kills[fault.target] = self._counts.kills.get(fault.target, 0) + 1
                if killed:
                    self._counts.processes_killed[fault.target] = self._counts.processes_killed.get(fault.target, 0) + 1
                if restarted:
                    self._counts.processes_restarted[fault.target] = (
                        self._counts.processes_restarted.get(fault.target, 0) + 1)
                self._counts.kill_recovery_s.setdefault(fault.target, []).append(round(recovery, 2))
        else:
            raise ValueError(f"unknown fault {fault.kind!r}")

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())
