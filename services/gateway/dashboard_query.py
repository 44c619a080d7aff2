"""The dashboard's pages computed from the gateway's views, pure: the jobs table (filter, sort, group,
page), the overview, queues and cohorts, the GPU map, one job's page. Every function sees only what the
caller may see (``Principal.owns``)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas.api import Action, HistoryItem, JobRow, JobView
from schemas.capacity import NodeState
from schemas.config import CohortConfig, QueueConfig, is_gpu_resource
from schemas.jobs import JobRecord
from schemas.jobspec import JobSpec
from schemas.status import TERMINAL_STATES, JobStatusChanged
from schemas.usage import BudgetStatusReported, BurstSpendReported, ChargebackRecorded, QueueUsageReported
from services.gateway.auth import Principal
from services.gateway.dashboard_models import (
    BurstLine,
    Charge,
    CohortNode,
    Facets,
    GpuCount,
    GpuSlot,
    JobDetail,
    JobGroup,
    JobPage,
    JobSort,
    NodeCell,
    Overview,
    QueueRow,
    QueuesPage,
    QueueWait,
    QuotaLine,
    RackGroup,
)
from services.gateway.presenters import job_from_status

#: a job as the table sees it: a status from the queue manager, or a submission it has not reported yet
Listed = JobStatusChanged | JobView

HOLDING_GPUS = frozenset({"admitted", "running", "preempting"})
_FILTERS = ("tenant", "queue", "state", "priority_class", "cluster")


@dataclass(frozen=True, slots=True)
class JobQuery:
    tenant: str | None = None
    queue: str | None = None
    state: str | None = None
    priority_class: str | None = None
    cluster: str | None = None
    user: str | None = None
    text: str | None = None
    sort: JobSort = "submitted_at"
    descending: bool = True
    group: JobGroup | None = None
    offset: int = 0
    limit: int = 50


def _matches(job: Listed, user: str | None, query: JobQuery, needle: str | None) -> bool:
    for name in _FILTERS:
        wanted = getattr(query, name)
        if wanted is not None and getattr(job, name) != wanted:
            return False
    if query.user is not None and user != query.user:
        return False
    if needle is not None:
        haystack = f"{job.job_id}\n{job.name}\n{job.reason}\n{job.message}".lower()
        if needle not in haystack:
            return False
    return True


def _sort_key(sort: JobSort, descending: bool) -> Callable[[Listed], tuple[Any, ...]]:
    def key(job: Listed) -> tuple[Any, ...]:
        value = getattr(job, sort)
        missing = value is None
        # missing values (no position, no estimate) go last in either direction
        return (missing if not descending else not missing, 0 if missing else value, job.job_id)

    return key


def job_page(jobs: Iterable[Listed], user_of: Callable[[str], str | None], principal: Principal,
             query: JobQuery) -> JobPage:
    """One page of the jobs the caller may see that match ``query``, with group counts and facets."""
    visible = [j for j in jobs if principal.owns(j.tenant)]
    facet_values: dict[str, set[str]] = {name: set() for name in (*_FILTERS, "user")}
    users: dict[str, str | None] = {}
    for job in visible:
        for name in _FILTERS:
            value = getattr(job, name)
            if value is not None:
                facet_values[name].add(value)
        user = users[job.job_id] = user_of(job.job_id)
        if user is not None:
            facet_values["user"].add(user)
    needle = query.text.strip().lower() if query.text and query.text.strip() else None
    matching = [j for j in visible if _matches(j, users[j.job_id], query, needle)]
    matching.sort(key=_sort_key(query.sort, query.descending), reverse=query.descending)
    groups: dict[str, int] = {}
    if query.group is not None:
        group = query.group
        matching.sort(key=lambda j: str(getattr(j, group)))  # stable: the chosen order inside each group
        groups = dict(Counter(str(getattr(j, group)) for j in matching))
    page = matching[query.offset:query.offset + query.limit]
    return JobPage(
        items=[_row(j, users[j.job_id]) for j in page], total=len(matching), offset=query.offset,
        limit=query.limit, groups=groups,
        facets=Facets(**{name: sorted(values) for name, values in facet_values.items()}),
    )


def _row(job: Listed, user: str | None) -> JobRow:
    view = job_from_status(job) if isinstance(job, JobStatusChanged) else job
    return JobRow(**view.model_dump(), user=user)


# ---------------------------------------------------------------- overview


def gpu_counts(nodes: Sequence[NodeState]) -> list[GpuCount]:
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for node in nodes:
        line = totals[(node.cluster, node.gpu_type)]
        line[0] += 1
        line[1] += node.gpus_allocatable
        line[2] += min(node.gpus_in_use, node.gpus_allocatable)
        line[3] += 0 if node.healthy and node.schedulable else 1
    return [GpuCount(cluster=cluster, gpu_type=gpu_type, nodes=n, allocatable=alloc, in_use=used, free=alloc - used,
                     unhealthy_nodes=bad)
            for (cluster, gpu_type), (n, alloc, used, bad) in sorted(totals.items())]


def overview(jobs: Iterable[Listed], nodes: Sequence[NodeState], admissions: list[int],
             queues: Sequence[QueueConfig], principal: Principal, now: datetime, *, longest: int = 5) -> Overview:
    by_state: Counter[str] = Counter()
    pending: dict[str, list[datetime]] = defaultdict(list)
    for job in jobs:
        if not principal.owns(job.tenant):
            continue
        by_state[job.state] += 1
        if job.state in ("pending", "submitted"):
            pending[job.queue].append(job.submitted_at)
    tenants = {q.name: q.tenant for q in queues}
    waits = [QueueWait(queue=queue, tenant=tenants.get(queue, ""), pending=len(times),
                       oldest_wait_s=max(0.0, (now - min(times)).total_seconds()))
             for queue, times in pending.items()]
    waits.sort(key=lambda w: (-w.oldest_wait_s, w.queue))
    return Overview(as_of=now, jobs_by_state=dict(sorted(by_state.items())), gpus=gpu_counts(nodes),
                    admissions_per_minute=admissions, longest_waits=waits[:longest])


# ---------------------------------------------------------------- queues and cohorts


def _gpus(resources: dict[str, int] | dict[str, int | float]) -> int:
    """Whole GPUs of all types; shares of GPUs (MIG slices, fractions) round up to the GPUs they touch."""
    return math.ceil(sum(v for k, v in resources.items() if is_gpu_resource(k)) - 1e-9)


def _burst_line(queue: QueueConfig, report: BurstSpendReported | None) -> BurstLine | None:
    budget = queue.burst_budget
    if report is None and budget is None:
        return None
    return BurstLine(
        window=report.window if report else budget.window if budget else "month",
        gpu_hours=round(report.gpu_hours, 2) if report else 0.0, money=round(report.money, 2) if report else 0.0,
        nodes_held=report.nodes_held if report else 0,
        gpu_hour_budget=budget.gpu_hours if budget else None, money_budget=budget.money if budget else None)


def queues_page(queues: Sequence[QueueConfig], cohorts: Sequence[CohortConfig],
                usage: Callable[[str], QueueUsageReported | None], budget: Callable[[str], BudgetStatusReported | None],
                jobs: Iterable[Listed], principal: Principal,
                burst: Callable[[str], BurstSpendReported | None] = lambda _: None) -> QueuesPage:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for job in jobs:
        counts[job.queue]["running" if job.state in HOLDING_GPUS else job.state] += 1
    reports = {q.name: usage(q.name) for q in queues}
    in_use = {q.name: _gpus(r.allocated) if r is not None else 0 for q, r in zip(queues, reports.values(), strict=True)}
    members: dict[str | None, list[QueueConfig]] = defaultdict(list)
    for queue in queues:
        members[queue.cohort].append(queue)

    rows: list[QueueRow] = []
    for queue in queues:
        if not principal.owns(queue.tenant):
            continue
        report = reports[queue.name]
        peers = members[queue.cohort] if queue.cohort is not None else [queue]
        waiting = counts[queue.name]["pending"] + counts[queue.name]["submitted"]
        busy = [p for p in peers if in_use[p.name] > 0 or counts[p.name]["pending"] > 0]
        if queue not in busy:
            busy.append(queue)
        cohort_use = sum(in_use[p.name] for p in peers)
        fair_share = round(queue.weight / sum(p.weight for p in busy), 4)
        tenant_budget = budget(queue.tenant)
        rows.append(QueueRow(
            name=queue.name, tenant=queue.tenant, cohort=queue.cohort, weight=queue.weight,
            quotas=_quota_lines(queue, report, peers, reports), running=counts[queue.name]["running"],
            waiting=waiting, gpus_in_use=in_use[queue.name],
            fair_share=fair_share,
            actual_share=round(in_use[queue.name] / cohort_use, 4) if cohort_use else None,
            budget_window=tenant_budget.window if tenant_budget else None,
            gpu_hours_used=round(tenant_budget.gpu_hours_used, 2) if tenant_budget else None,
            gpu_hour_budget=tenant_budget.gpu_hour_budget if tenant_budget else None,
            burst=_burst_line(queue, burst(queue.name)),
            nominal_gpus=_nominal_gpus(queue),
            fair_share_gpus=round(fair_share * sum(_nominal_gpus(p) for p in peers), 2),
        ))
    shown = {row.cohort for row in rows}
    by_name = {c.name: c for c in cohorts}
    for name in list(shown):  # the ancestors of every cohort shown
        while name is not None and name in by_name:
            shown.add(name)
            name = by_name[name].parent
    nodes = [CohortNode(name=c.name, parent=c.parent, weight=c.weight,
                        queues=[row.name for row in rows if row.cohort == c.name],
                        children=sorted(k.name for k in cohorts if k.parent == c.name and k.name in shown))
             for c in cohorts if c.name in shown]
    return QueuesPage(cohorts=nodes, queues=rows)


def _nominal_gpus(queue: QueueConfig) -> int:
    return sum(quota.nominal for resource, quota in queue.quotas.items() if is_gpu_resource(resource))


def _quota_lines(queue: QueueConfig, report: QueueUsageReported | None, peers: Sequence[QueueConfig],
                 reports: dict[str, QueueUsageReported | None]) -> list[QuotaLine]:
    """Per resource: nominal, in use, borrowed, and the share of the cohort's borrowing this queue's idle
    nominal quota covers (the accountant reports what is borrowed, not from whom: lent is an estimate,
    spread over the idle quota of the cohort in proportion)."""
    lines = []
    for resource, quota in sorted(queue.quotas.items()):
        # shares of GPUs (MIG slices, fractions) round up to the whole GPUs they touch
        used = math.ceil(report.allocated.get(resource, 0) - 1e-9) if report else 0
        borrowed = math.ceil(report.borrowed.get(resource, 0) - 1e-9) if report else 0

        def idle(q: QueueConfig, resource: str = resource) -> int:
            cfg = q.quotas.get(resource)
            if cfg is None:
                return 0
            r = reports.get(q.name)
            spare = max(0, math.floor(cfg.nominal - (r.allocated.get(resource, 0) if r else 0) + 1e-9))
            return spare if cfg.lending_limit is None else min(spare, cfg.lending_limit)

        others_borrowed: float = 0
        for peer in peers:
            peer_report = reports.get(peer.name)
            if peer.name != queue.name and peer_report is not None:
                others_borrowed += peer_report.borrowed.get(resource, 0)
        total_idle = sum(idle(p) for p in peers if p.name != queue.name) + idle(queue)
        lent = 0 if total_idle == 0 else round(idle(queue) * min(1.0, others_borrowed / total_idle))
        lines.append(QuotaLine(resource=resource, nominal=quota.nominal, in_use=used, borrowed=borrowed, lent=lent,
                               borrowing_limit=quota.borrowing_limit, lending_limit=quota.lending_limit))
    return lines


# ---------------------------------------------------------------- the GPU map


def gpu_map(nodes: Sequence[NodeState], records: Iterable[tuple[str, JobRecord]],
            principal: Principal) -> list[RackGroup]:
    """Nodes grouped by cluster, block and rack; each GPU with the job on it (another tenant's job is
    shown busy without its name)."""
    on_node: dict[tuple[str, str], list[GpuSlot]] = defaultdict(list)
    for job_id, record in records:
        placement = record.placement
        if placement is None or record.state not in HOLDING_GPUS:
            continue
        spec = record.submission.spec
        tenant = record.submission.tenant
        mine = principal.owns(tenant)
        slot = GpuSlot(job_id=job_id if mine else None, name=spec.name if mine else None,
                       tenant=tenant if mine else None, busy=True)
        for placed in placement.nodes:
            per_pod = spec.role_named(placed.role).template.resources.gpus
            on_node[(placement.cluster, placed.node)].extend([slot] * (placed.pods * per_pod))
    racks: dict[tuple[str, str, str], list[NodeCell]] = defaultdict(list)
    for node in nodes:
        slots = on_node.get((node.cluster, node.node), [])[:node.gpus_allocatable]
        unknown = max(0, min(node.gpus_in_use, node.gpus_allocatable) - len(slots))
        slots += [GpuSlot(job_id=None, busy=True)] * unknown
        slots += [GpuSlot(job_id=None, busy=False)] * (node.gpus_allocatable - len(slots))
        racks[(node.cluster, node.topology.block, node.topology.rack)].append(NodeCell(
            node=node.node, gpu_type=node.gpu_type, healthy=node.healthy, schedulable=node.schedulable,
            health_reason=node.health_reason, gpus=slots))
    return [RackGroup(cluster=c, block=b, rack=r, nodes=sorted(cells, key=lambda n: n.node))
            for (c, b, r), cells in sorted(racks.items())]


# ---------------------------------------------------------------- one job


def actions(job: JobView, spec: JobSpec | None, principal: Principal) -> list[Action]:
    """What the caller may do to the job now (the API refuses the rest)."""
    if not principal.may_act or not principal.owns(job.tenant) or job.state in TERMINAL_STATES:
        return []
    allowed: list[Action] = ["cancel"]
    allowed.append("resume" if job.state == "suspended" else "suspend")
    allowed.append("change_priority")
    if spec is not None and spec.min_replicas is not None:
        allowed.append("scale")
    return allowed


def job_detail(job: JobView, user: str | None, summary: str, spec: JobSpec | None, record: JobRecord | None,
               history: list[HistoryItem], charges: list[ChargebackRecorded], principal: Principal) -> JobDetail:
    return JobDetail(
        job=JobRow(**job.model_dump(), user=user), summary=summary, spec=spec, history=history,
        placement=record.placement if record is not None and job.state in HOLDING_GPUS else None,
        admitted_at=record.admitted_at if record is not None else None,
        finished_at=record.finished_at if record is not None else None,
        charges=[Charge(attempt=c.attempt, gpu_type=c.gpu_type, gpus=c.gpus, started_at=c.started_at,
                        ended_at=c.ended_at, gpu_seconds=c.gpu_seconds, outcome=c.outcome) for c in charges],
        gpu_hours=round(sum(c.gpu_seconds for c in charges) / 3600, 3),
        actions=actions(job, spec, principal),
    )
