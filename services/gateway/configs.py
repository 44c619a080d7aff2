"""Configuration items as config-topic messages, the checks a change must pass, and seeding from a file."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.api import JobView
from schemas.config import (
    ClusterConfig,
    CohortConfig,
    CohortDefined,
    GpuTypeConfig,
    GpuTypeDefined,
    MusterConfig,
    PoolConfig,
    PoolDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    TenantConfig,
    TenantDefined,
)
from schemas.envelope import Message
from schemas.status import TERMINAL_STATES
from services.gateway.errors import ApiError
from services.gateway.views import ConfigItem, ConfigKind, ConfigView
from services.spec.ids import tag_sharers, tenant_tag


def defined_message(kind: ConfigKind, item: ConfigItem) -> Message:
    """The ``<Kind>Defined`` message carrying ``item``."""
    if kind == "queue" and isinstance(item, QueueConfig):
        return QueueDefined(item=item)
    if kind == "cohort" and isinstance(item, CohortConfig):
        return CohortDefined(item=item)
    if kind == "priority-class" and isinstance(item, PriorityClassConfig):
        return PriorityClassDefined(item=item)
    if kind == "gpu-type" and isinstance(item, GpuTypeConfig):
        return GpuTypeDefined(item=item)
    if kind == "pool" and isinstance(item, PoolConfig):
        return PoolDefined(item=item)
    if kind == "tenant" and isinstance(item, TenantConfig):
        return TenantDefined(item=item)
    raise TypeError(f"{type(item).__name__} is not a {kind} item")


def file_items(cfg: MusterConfig) -> list[tuple[ConfigKind, ConfigItem]]:
    """Every configuration item of a cluster file, referenced items first (cohorts before queues)."""
    items: list[tuple[ConfigKind, ConfigItem]] = []
    items += [("cohort", c) for c in cfg.cohorts]
    items += [("priority-class", p) for p in cfg.priority_classes]
    items += [("gpu-type", g) for g in cfg.gpu_types]
    items += [("pool", p) for p in cfg.pools]
    items += [("tenant", t) for t in cfg.tenants]
    items += [("queue", q) for q in cfg.queues]
    return items


def growing_clusters(cfg: MusterConfig) -> list[ClusterConfig]:
    """The clusters of a file with a node group that can grow: the queue manager must know them to buy nodes
    (``ClusterDefined``); the others need no definition, their nodes are observed."""
    return [c for c in cfg.clusters if c.grows]


def check_definition(kind: ConfigKind, name: str, item: ConfigItem, config: ConfigView) -> None:
    """422 when the body's name differs from the path, a reference does not resolve, or a new tenant's job ids
    could not be told from another tenant's (``check_tenant_tag``)."""
    if item.name != name:
        raise ApiError(422, "name_mismatch", f"body names {item.name!r}, path names {name!r}", field="item.name")
    if isinstance(item, TenantConfig):
        check_tenant_tag(item.name, config, field="item.name")
    if isinstance(item, QueueConfig):
        check_tenant_tag(item.tenant, config, field="item.tenant")
    if isinstance(item, QueueConfig) and item.cohort is not None and config.item("cohort", item.cohort) is None:
        raise ApiError(422, "unknown_cohort", f"no cohort named {item.cohort!r}", field="item.cohort")
    if isinstance(item, CohortConfig) and item.parent is not None:
        if item.parent == item.name:
            raise ApiError(422, "cohort_cycle", "a cohort cannot be its own parent", field="item.parent")
        if config.item("cohort", item.parent) is None:
            raise ApiError(422, "unknown_cohort", f"no cohort named {item.parent!r}", field="item.parent")


TENANT_TAG_COLLISION = "tenant_tag_collision"


def known_tenants(config: ConfigView) -> set[str]:
    """Every tenant the configuration knows: those defined, and those queues belong to."""
    return {*(t.name for t in config.items("tenant")), *(q.tenant for q in config.queues())}


def check_tenant_tag(tenant: str, config: ConfigView, *, field: str) -> None:
    """422 ``tenant_tag_collision`` when ``tenant`` is new and its name gives the job id tag of a tenant the
    configuration knows (``services.spec.ids.tenant_tag``): their ids could not be told apart, so either could
    claim or refuse the other's jobs. A tenant known already is left as it is."""
    known = known_tenants(config)
    if tenant in known:
        return
    others = tag_sharers(tenant, known)
    if others:
        raise ApiError(422, TENANT_TAG_COLLISION,
                       f"tenant {tenant!r} would have the job id tag {tenant_tag(tenant)} of tenant {others[0]!r}: "
                       "their job ids could not be told apart; choose another name", field=field)


#: at most this many job ids are named when a deletion is refused because of unfinished jobs
NAMED_JOBS = 5


def check_deletion(kind: ConfigKind, name: str, config: ConfigView, jobs: Sequence[JobView] = ()) -> None:
    """404 for an unknown item; 409 while other items still refer to it, or while unfinished ``jobs`` (every
    tenant's) are in the queue or of the priority class: deleting those would orphan them (their queue's
    quota, or their priority, would no longer resolve), so they must finish or be cancelled first."""
    if config.item(kind, name) is None:
        raise ApiError(404, "not_found", f"no {kind} named {name!r}", field="name")
    users: list[str] = []
    if kind == "cohort":
        users += [f"queue/{q.name}" for q in config.queues() if q.cohort == name]
        users += [f"cohort/{c.name}" for c in config.items("cohort")
                  if isinstance(c, CohortConfig) and c.parent == name]
    if kind == "tenant":
        users += [f"queue/{q.name}" for q in config.queues() if q.tenant == name]
    if kind == "queue":
        users += [f"recurring-job/{r.name}" for r in config.recurring_jobs() if r.spec.queue == name]
    if users:
        raise ApiError(409, "in_use", f"{kind} {name!r} is still used by {', '.join(sorted(users))}", field="name")
    if kind not in ("queue", "priority-class"):
        return
    holding = sorted((j for j in jobs if (j.queue if kind == "queue" else j.priority_class) == name
                      and j.state not in TERMINAL_STATES), key=lambda j: j.job_id)
    if holding:
        states: dict[str, int] = {}
        for job in holding:
            states[job.state] = states.get(job.state, 0) + 1
        counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        named = ", ".join(j.job_id for j in holding[:NAMED_JOBS]) + (", ..." if len(holding) > NAMED_JOBS else "")
        raise ApiError(409, "has_unfinished_jobs",
                       f"{kind} {name!r} still has unfinished jobs ({counts}: {named}); deleting it would orphan "
                       "them: let them finish or cancel them first", field="name")
