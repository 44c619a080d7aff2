"""What the state knows of capacity that grows: the growable node groups and their members, the requests for
nodes in flight, the bought nodes kept for the job they were bought for, when each member went idle, and what
each queue spent of its burst budget in the current window (as this state charged it, and as the quota accountant
last reported it). Read by ``growth``, changed by ``SchedulerState``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .model import BurstBudget, GrowableGroup, Provision


@dataclass(slots=True)
class Bought:
    """A bought node: the job it was bought for (and that job's queue, whose budget pays for it), until when it
    is kept for that job (``math.inf`` while the job runs on it), and what was charged for it up front."""

    job_id: str
    queue: str
    ready_at: float
    until: float
    gpus: int
    price_per_gpu_hour: float
    charged_gpu_hours: float


class GrowthBook:
    __slots__ = ("booked", "budgets", "failed", "groups", "idle_since", "members", "node_group", "reported", "requests",
                 "spent")

    def __init__(self) -> None:
        self.groups: dict[str, GrowableGroup] = {}
        self.members: dict[str, dict[str, None]] = {}  # group -> its nodes now (bought or not)
        self.node_group: dict[str, str] = {}  # member node -> its group
        self.budgets: dict[str, BurstBudget] = {}  # queue -> its burst budget
        self.requests: dict[str, Provision] = {}  # job -> its request for nodes, not answered yet
        self.booked: dict[str, Bought] = {}  # bought node -> what it was bought for
        self.idle_since: dict[str, float] = {}  # member node without pods -> since when
        self.failed: dict[str, tuple[str, float]] = {}  # job -> (why its last request failed, when)
        self.spent: dict[str, tuple[float, float, float]] = {}  # queue -> (window start, GPU-hours, money)
        # queue -> (window start, window end, GPU-hours, money) the quota accountant last reported spent
        self.reported: dict[str, tuple[float, float, float, float]] = {}

    def __bool__(self) -> bool:
        return bool(self.groups)

    def set_group(self, group: GrowableGroup, nodes: Iterable[str], now: float) -> None:
        """Declare a growable group and the nodes it has now (idle from ``now`` unless a job holds them)."""
        self.groups[group.name] = group
        self.members.setdefault(group.name, {})
        for name in nodes:
            self.add_member(group.name, name, now)

    def add_member(self, group: str, node: str, now: float) -> None:
        self.members.setdefault(group, {})[node] = None
        self.node_group[node] = group
        self.idle_since.setdefault(node, now)

    def drop_member(self, node: str) -> None:
        group = self.node_group.pop(node, None)
        if group is not None:
            self.members.get(group, {}).pop(node, None)
        self.idle_since.pop(node, None)
        self.booked.pop(node, None)

    def size(self, group: str) -> int:
        """Nodes the group has now plus those requested and not answered yet."""
        return len(self.members.get(group, {})) + sum(p.nodes for p in self.requests.values() if p.group == group)

    def window_start(self, queue: str, now: float) -> float:
        budget = self.budgets.get(queue)
        width = budget.window_s if budget is not None else math.inf
        return 0.0 if math.isinf(width) else math.floor(now / width) * width

    def spent_in_window(self, queue: str, now: float) -> tuple[float, float]:
        """GPU-hours and money charged to the queue's budget in the window ``now`` falls in."""
        start, gpu_hours, money = self.spent.get(queue, (0.0, 0.0, 0.0))
        if start != self.window_start(queue, now):
            return 0.0, 0.0
        return gpu_hours, money

    def overrun(self, queue: str, now: float) -> tuple[float, float]:
        """What the queue's bought nodes still held have cost by ``now`` beyond what was charged for them up front
        (their jobs ran longer than estimated): counted against the budget before it is trued up."""
        hours = money = 0.0
        for b in self.booked.values():
            if b.queue == queue:
                extra = b.gpus * max(now - b.ready_at, 0.0) / 3600.0 - b.charged_gpu_hours
                if extra > 0:
                    hours += extra
                    money += extra * b.price_per_gpu_hour
        return hours, money

    def used(self, queue: str, now: float) -> tuple[float, float]:
        """GPU-hours and money the queue's budget has used by ``now``: what this state charged plus the overrun of
        the nodes it still holds, or what the quota accountant reported for a window holding ``now`` when that is
        more (this state was restarted, or a node was kept longer than charged): the accountant's figure is the
        bought nodes' real time, and outlives a restart of the queue manager."""
        hours, money = self.spent_in_window(queue, now)
        over_hours, over_money = self.overrun(queue, now)
        hours += over_hours
        money += over_money
        reported = self.reported.get(queue)
        if reported is not None and reported[0] <= now < reported[1]:
            hours, money = max(hours, reported[2]), max(money, reported[3])
        return hours, money

    def allows(self, queue: str, gpu_hours: float, money: float, now: float) -> bool:
        """Whether the queue's budget has room for a further charge (no budget: never), counting what its
        bought nodes have really cost so far."""
        budget = self.budgets.get(queue)
        if budget is None:
            return False
        used_hours, used_money = self.used(queue, now)
        if budget.gpu_hours is not None and used_hours + gpu_hours > budget.gpu_hours + 1e-9:
            return False
        return not (budget.money is not None and used_money + money > budget.money + 1e-9)

    def charge(self, queue: str, gpu_hours: float, money: float, now: float) -> None:
        used_hours, used_money = self.spent_in_window(queue, now)
        self.spent[queue] = (self.window_start(queue, now), max(used_hours + gpu_hours, 0.0),
                             max(used_money + money, 0.0))

    def exclusive(self, now: float) -> dict[str, tuple[str, str]]:
        """Who may use each bought node at ``now``, as (job, queue): until the job it was bought for starts, that
        job alone (``(job, "")``); while that job runs there, the jobs of its queue too (``("", queue)``: they
        use the GPUs it leaves free, and the queue pays for the node anyway) unless the queue's burst budget is
        spent (nothing new may start there then: it would keep the node longer); once the job has left it, nobody
        (``("", "")``: it only waits to be given back). So a bought node never outlives its job by new work."""
        out: dict[str, tuple[str, str]] = {}
        spent: dict[str, bool] = {}
        for n, b in self.booked.items():
            if b.until <= now:
                out[n] = ("", "")
            elif math.isinf(b.until):
                if b.queue not in spent:
                    spent[b.queue] = not self.allows(b.queue, 0.0, 0.0, now)
                out[n] = ("", "") if spent[b.queue] else ("", b.queue)  # a spent budget shares nothing more
            else:
                out[n] = (b.job_id, "")
        return out

    def kept_for(self, job_id: str, now: float) -> bool:
        return any(b.job_id == job_id and b.until > now for b in self.booked.values())
