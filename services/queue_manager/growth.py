"""Capacity that grows, on the live state: the clusters whose node groups can grow, the nodes they have, the
requests for nodes the core decides and the cloud's answers. No I/O here.

- ``ClusterDefined`` (seeded by the gateway) declares the growable groups: the core's ``GrowableGroup`` with the
  nodes of the group observed so far (``muster.dev/node-group`` label on the cluster); nodes observed later
  join as they come. A queue's ``burst_budget`` comes with its ``QueueDefined``.
- A cycle's ``Provision`` becomes ``NodesRequested`` (the dispatcher asks the cluster's autoscaler with a
  ProvisioningRequest named after the job's attempt); the job waits with ``waiting_for_provisioning``.
- ``NodesProvisioned`` (the node watcher saw the request ``Provisioned``) hands the nodes to the core, kept for
  the job; ``ProvisioningFailed``, or no answer ``provision_timeout_s`` after the nodes were expected, gives the
  charge back and the job waits for existing capacity with the reason in its status.
- A node the request made stays out of the core's view until its request is answered, so no other job takes
  it meanwhile; a cycle's ``Release`` becomes ``NodeReleaseRequested`` and the node leaves the core at once
  (its queue is charged what it really cost), kept out of view until the autoscaler removes it.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime

from schemas.decisions import NodeReleaseRequested, NodesRequested
from schemas.envelope import MAX_TEXT
from schemas.runs import NodesProvisioned, ProvisioningFailed
from schemas.topics import DECISIONS_TOPIC
from services.core import SchedulerConfig
from services.core.growth import overdue
from services.core.model import Node, Provision, Release
from services.queue_manager.queue_state import Out, QueueState
from services.runtime.kube.names import job_object_name

log = logging.getLogger(__name__)


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def requested(qs: QueueState, provisions: tuple[Provision, ...], now: float) -> list[Out]:
    """The cycle's requests for nodes: the state charges them, the dispatcher gets one ``NodesRequested`` each."""
    outs: list[Out] = []
    for p in provisions:
        entry = qs.jobs.get(p.job_id)
        where = qs.growth.groups.get(p.group)
        if entry is None or where is None:
            log.error("nodes decided for %s of group %s, which this state does not know", p.job_id, p.group)
            continue
        qs.sched.provision_requested(p, now)
        cluster, group = where
        request = job_object_name(p.job_id, entry.attempt)
        qs.growth.requests[p.job_id] = request
        qs.dirty[p.job_id] = None
        outs.append(Out(DECISIONS_TOPIC, NodesRequested(
            job_id=p.job_id, attempt=entry.attempt, queue=p.queue,
            namespace=qs.config.namespace(entry.submission.tenant), cluster=cluster, group=group.name,
            request=request, nodes=p.nodes, gpus_per_node=group.gpus_per_node, gpu_type=group.gpu_type,
            ready_by=_utc(p.ready_at), gpu_hours=round(p.gpu_hours, 6), money=round(p.money, 6),
            price_per_gpu_hour=qs.sched.growth.groups[p.group].price_per_gpu_hour)))
    return outs


def released(qs: QueueState, releases: tuple[Release, ...], now: float) -> list[Out]:
    """The cycle's nodes to give back: they leave the core now, and the dispatcher marks them for scale-down."""
    outs: list[Out] = []
    for r in releases:
        bought = qs.sched.growth.booked.get(r.node)
        qs.sched.node_released(r.node, now)
        where = qs.growth.groups.get(r.group)
        if where is None:
            continue
        if r.node in qs.nodes:
            qs.growth.releasing.add(r.node)
        outs.append(Out(DECISIONS_TOPIC, NodeReleaseRequested(cluster=where[0], group=where[1].name, node=r.node,
                                                              queue=bought.queue if bought else None)))
    return outs


def expire(qs: QueueState, now: float, config: SchedulerConfig) -> None:
    """Requests unanswered ``provision_timeout_s`` after the nodes were expected count as failed."""
    for job_id in overdue(qs.sched.growth, now, config.provision_timeout_s):
        _failed(qs, job_id, f"no answer within {round(config.provision_timeout_s / 60)} min of the expected time",
                now)


def _failed(qs: QueueState, job_id: str, why: str, now: float) -> None:
    qs.sched.provision_failed(job_id, why[:MAX_TEXT // 2], now)
    qs.growth.requests.pop(job_id, None)
    qs.dirty[job_id] = None
    _show_held_nodes(qs, job_id, now)


def on_provisioning(qs: QueueState, message: NodesProvisioned | ProvisioningFailed, now: float) -> None:
    """The cloud's answer to a job's request (an answer to an earlier attempt's, or a repeat, changes nothing)."""
    entry = qs.jobs.get(message.job_id)
    p = qs.sched.growth.requests.get(message.job_id)
    if entry is None or p is None or entry.attempt != message.attempt:
        return
    if isinstance(message, ProvisioningFailed):
        _failed(qs, message.job_id, f"{message.reason}: {message.message}" if message.message else message.reason,
                now)
        return
    template = qs.sched.growth.groups[p.group].template
    qs.growth.requests.pop(message.job_id, None)
    qs.dirty[message.job_id] = None
    names = list(message.nodes) or _unlabelled(qs, p)
    nodes = [_node_of(qs, name, template) for name in names]
    qs.sched.provisioned(message.job_id, nodes, now, now + qs.policy.provision_booking_s)
    _show_held_nodes(qs, message.job_id, now)


def _unlabelled(qs: QueueState, p: Provision) -> list[str]:
    """The request's nodes when the autoscaler named none (cluster-autoscaler labels no node with its request):
    the group's nodes that joined it since the request was made and hold nothing yet, newest first."""
    book = qs.sched.growth
    asked_at = p.ready_at - book.groups[p.group].provision_delay_s
    fresh = [n for n in book.members.get(p.group, {}) if n not in book.booked and not qs.sched.node_jobs.get(n)
             and book.idle_since.get(n, -1.0) >= asked_at]
    return sorted(fresh, key=lambda n: (-book.idle_since[n], n))[:p.nodes]


def _show_held_nodes(qs: QueueState, job_id: str, now: float) -> None:
    """Nodes held back for a request now answered become capacity like any other (the core knows the provisioned
    ones already; those of a failed request are just nodes of their group)."""
    for name, state in qs.nodes.items():
        if name not in qs.sched.cap.nodes and not qs.growth.held_back(qs.sched, state, now):
            qs.place_node(state)


def _node_of(qs: QueueState, name: str, template: Node) -> Node:
    """A provisioned node as observed, or (not observed yet) as its group's nodes look."""
    state = qs.nodes.get(name)
    if state is not None:
        return qs.core_node(state)
    return dataclasses.replace(template, name=name)
