"""The growable node groups as configured (``ClusterDefined``), and the nodes in flight between the cloud and the
core: what the queue state needs to fold capacity and configuration for capacity that grows (``growth``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from schemas.capacity import NodeState
from schemas.config import ClusterConfig, NodeGroupConfig, PoolConfig
from schemas.kube import NODE_GROUP, PROVISIONING_REQUEST
from services.core import SchedulerState
from services.spec.cluster_file import growable_groups


@dataclass
class GrowthView:
    #: core group name -> (cluster, the group's configuration)
    groups: dict[str, tuple[str, NodeGroupConfig]] = field(default_factory=dict)
    #: (cluster, node-group label) -> core group name
    by_label: dict[tuple[str, str], str] = field(default_factory=dict)
    #: job -> the name of its request for nodes not answered yet (the nodes the cloud labels with it wait)
    requests: dict[str, str] = field(default_factory=dict)
    #: nodes given back and still observed: kept out of the core until the autoscaler removes them
    releasing: set[str] = field(default_factory=set)

    def group_of(self, state: NodeState) -> str | None:
        label = state.labels.get(NODE_GROUP)
        return None if label is None else self.by_label.get((state.cluster, label))

    def fold_clusters(self, sched: SchedulerState, clusters: Iterable[ClusterConfig], pools: Iterable[PoolConfig],
                      nodes: Mapping[str, NodeState], now: float) -> None:
        """Declare the growable groups of ``clusters`` (every cluster defined), each with the nodes of it observed
        so far. Groups no longer defined stop growing; their nodes stay as fixed capacity."""
        pools = list(pools)
        book = sched.growth
        self.groups.clear()
        self.by_label.clear()
        for cluster in clusters:
            for grown, group in growable_groups(cluster, pools):
                self.groups[grown.name] = (cluster.name, group)
                self.by_label[(cluster.name, group.name)] = grown.name
                members = [n for n, s in nodes.items() if self.group_of(s) == grown.name and n not in self.releasing]
                sched.set_growable_group(grown, members, now)
        for name in [g for g in book.groups if g not in self.groups]:
            del book.groups[name]
            for node in list(book.members.pop(name, {})):
                book.node_group.pop(node, None)
                book.idle_since.pop(node, None)

    def held_back(self, sched: SchedulerState, state: NodeState, now: float) -> bool:
        """Whether an observed node stays out of the core's view: given back, or made for a request not answered
        yet (no other job may take it meanwhile). A node of a growable group that is shown joins its members."""
        if state.node in self.releasing:
            return True
        request = state.labels.get(PROVISIONING_REQUEST)
        if request is not None and request in self.requests.values():
            return True
        group = self.group_of(state)
        book = sched.growth
        if group is not None and state.node not in book.node_group:
            book.add_member(group, state.node, now)
            if sched.node_jobs.get(state.node):
                book.idle_since.pop(state.node, None)
        return False

    def node_gone(self, sched: SchedulerState, name: str, now: float) -> None:
        """A node left the cluster: a member of a growable group is given back (its queue charged what it cost)."""
        self.releasing.discard(name)
        if name in sched.growth.node_group:
            sched.node_released(name, now)
        else:
            sched.remove_node(name)
