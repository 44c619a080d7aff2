"""The dispatcher of one cluster: routes decisions and run observations, recovers its runs from the Jobs."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobScaled, NodeReleaseRequested, NodesRequested
from schemas.envelope import Envelope, Message
from schemas.runs import RunFailed
from schemas.topics import TOPICS
from services.dispatcher import admission, preemption_handshake, provisioning, replacement, restarts, workloads
from services.dispatcher.book import rebuild
from services.dispatcher.context import Context
from services.dispatcher.workloads import WorkloadOps
from services.runtime.kafka import Delivery

log = logging.getLogger(__name__)

#: the messages ``Dispatcher.handle`` acts on, and ignores every other; of the rest of its topics' traffic (most
#: of it: every run's start, progress and finish) it would decode each record only to ignore it
HANDLED: tuple[type[Message], ...] = (JobAdmitted, JobPreemptionRequested, JobScaled, NodesRequested,
                                      NodeReleaseRequested, RunFailed)
ACTS_ON = frozenset(m.TYPE for m in HANDLED)


#: per topic, the types it carries that the dispatcher ignores
_IGNORED = {name: frozenset(spec.message_types) - ACTS_ON for name, spec in TOPICS.items()}


def passes_over(topic: str, key: bytes | None, value: bytes | None) -> bool:
    """Whether the dispatcher would ignore the record anyway, from a look at its raw JSON: a type its topic
    carries and ``handle`` does not act on. A record that does not parse, names no type or one its topic does
    not carry is decoded as usual, so that it is still dead-lettered with its reason."""
    ignored = _IGNORED.get(topic)
    if value is None or not ignored:
        return False
    try:
        data: Any = orjson.loads(value)
        kind = data["type"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return False
    return isinstance(kind, str) and kind in ignored


class Dispatcher:
    """``handle`` is the consumer loop's handler for ``muster.decisions`` and ``muster.runs``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.workload_ops = WorkloadOps(ctx.ops.rest)

    async def recover(self) -> None:
        """Rebuild the runs from the Jobs on the cluster; finish interrupted deletions; resume background work."""
        ctx = self.ctx
        current, leftovers = rebuild(await ctx.ops.list_jobs())
        for leftover in leftovers:
            run = leftover.run
            log.info("deleting leftover Job %s/%s (%s)", run.namespace, run.name, leftover.reason)
            await ctx.ops.delete_job(run.namespace, run.name, leftover.reason)
        for run in current.values():
            ctx.set_run(run)
            if run.preemption is not None:
                preemption_handshake.start(ctx, run)
            elif run.restart_at is not None:
                restarts.schedule(ctx, run)
            elif run.replaces:
                replacement.schedule(ctx, run)
        log.info("cluster %s: recovered %d runs (%d handshakes, %d pending restarts)", ctx.cluster, len(current),
                 sum(1 for r in current.values() if r.preemption is not None),
                 sum(1 for r in current.values() if r.preemption is None and r.restart_at is not None))
        found = await workloads.recover(ctx, self.workload_ops)
        if found:
            log.info("cluster %s: recovered %d workload objects", ctx.cluster, found)

    async def handle(self, envelope: Envelope, delivery: Delivery) -> None:
        payload = envelope.payload
        if not isinstance(payload, HANDLED):
            return
        if isinstance(payload, JobAdmitted):
            if payload.spec.workload is not None:
                await workloads.admit(self.ctx, self.workload_ops, envelope, delivery)
            else:
                await admission.admit(self.ctx, envelope, delivery)
        elif isinstance(payload, JobPreemptionRequested):
            if not await workloads.request_stop(self.ctx, self.workload_ops, envelope, delivery):
                await preemption_handshake.request(self.ctx, envelope, delivery)
        elif isinstance(payload, JobScaled):
            if not await workloads.scale(self.ctx, self.workload_ops, envelope, delivery):
                await admission.scale(self.ctx, envelope, delivery)
        elif isinstance(payload, NodesRequested):
            await provisioning.request_nodes(self.ctx, envelope)
        elif isinstance(payload, NodeReleaseRequested):
            await provisioning.release_node(self.ctx, envelope)
        elif isinstance(payload, RunFailed) and not await workloads.on_failed(self.ctx, envelope, delivery):
            await restarts.on_run_failed(self.ctx, envelope, delivery)

    async def close(self) -> None:
        """Stop background work; handshakes and restarts resume from the Jobs' annotations on the next start."""
        await self.ctx.tasks.close()
