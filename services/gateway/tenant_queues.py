"""Tenant-managed queues: what a tenant administrator (role ``tenant-admin``) may do to the configuration.

A tenant administrator may create, change and delete the queues of its own tenant, and nothing else of
the configuration. Its queues' nominal quotas may add up, per resource, to the tenant's ``queue_quota``
(a resource the tenant's ``queue_quota`` does not name: 0); every queue of the tenant counts, those an
administrator made included. A change that does not raise a resource's total is always allowed, so a
tenant whose queues an administrator gave more than its ``queue_quota`` can still shrink or delete them.
It may put a queue in a cohort only when the tenant's ``queue_cohorts`` lists the cohort (or the queue
is already in it), and it may not change what an administrator decides for a queue: ``allow_privileged``,
``weight`` (fair share is compared across tenants) and ``pool`` keep the queue's current value (a new
queue: the defaults). Administrators are bound by none of this.

Gateway replicas check against their own view of the config topic; ``PendingQueues`` covers the changes
this gateway published and has not read back yet, so that two quick changes through one gateway cannot
both pass. Pure apart from the lock in ``PendingQueues``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from schemas.config import QueueConfig, TenantConfig
from services.gateway.auth import Principal
from services.gateway.errors import ApiError
from services.gateway.views import ConfigView

#: the fields only an administrator may set; a tenant administrator keeps the queue's current values
RESERVED_FIELDS = ("allow_privileged", "weight", "pool")
#: how long a published change covers the view when the view has not shown it yet (seconds)
PENDING_FOR_S = 30.0

KIND_REFUSED = "admin_required"
OTHER_TENANT = "other_tenant"
COHORT_NOT_ALLOWED = "cohort_not_allowed"
RESERVED_FIELD = "reserved_field"
QUOTA_EXCEEDED = "tenant_quota_exceeded"


def refuse_kind(principal: Principal, kind: str) -> ApiError:
    """403 for a configuration change the caller's role does not allow."""
    if principal.is_tenant_admin:
        return ApiError(403, KIND_REFUSED, f"a tenant administrator may change only its tenant's queues, not a "
                        f"{kind}; ask an administrator")
    return ApiError(403, KIND_REFUSED, "only administrators may change the configuration")


def _queues_of(tenant: str, queues: Iterable[QueueConfig], pending: Mapping[str, QueueConfig | None]) -> dict[
        str, QueueConfig]:
    """The tenant's queues by name, with this gateway's unread changes laid over the view's."""
    current = {q.name: q for q in queues}
    for name, item in pending.items():
        if item is None:
            current.pop(name, None)
        else:
            current[name] = item
    return {name: q for name, q in current.items() if q.tenant == tenant}


def _nominal(queue: QueueConfig | None, resource: str) -> int:
    if queue is None:
        return 0
    quota = queue.quotas.get(resource)
    return 0 if quota is None else quota.nominal


def check_quota(tenant: TenantConfig | None, tenant_name: str, name: str, old: QueueConfig | None,
                new: QueueConfig, others: Iterable[QueueConfig]) -> None:
    """422 ``tenant_quota_exceeded`` when ``new`` (replacing ``old``) takes a resource's total over the
    tenant's ``queue_quota`` and raises it; ``others``: the tenant's other queues."""
    limits = tenant.queue_quota if tenant is not None else {}
    rest = list(others)
    for resource in sorted(set(new.quotas) | (set(old.quotas) if old is not None else set())):
        wanted = _nominal(new, resource)
        before = _nominal(old, resource)
        if wanted <= before:
            continue  # lowering (or keeping) a queue's share is always allowed
        taken = sum(_nominal(q, resource) for q in rest)
        limit = limits.get(resource, 0)
        if taken + wanted > limit:
            holders = ", ".join(f"{q.name} {_nominal(q, resource)}" for q in sorted(rest, key=lambda q: q.name)
                                if _nominal(q, resource) > 0) or "none"
            raise ApiError(422, QUOTA_EXCEEDED,
                           f"queue {name!r} asks for {wanted} {resource} but tenant {tenant_name!r} may give its "
                           f"queues {limit} {resource} in all and its other queues already take {taken} ({holders}); "
                           f"at most {max(limit - taken, 0)} is left",
                           field=f"item.quotas.{resource}.nominal")


def check_queue_change(principal: Principal, name: str, new: QueueConfig | None, config: ConfigView,
                       pending: Mapping[str, QueueConfig | None]) -> None:
    """Whether tenant administrator ``principal`` may define queue ``name`` as ``new`` (None: delete it).
    403 ``other_tenant``, ``cohort_not_allowed``, ``reserved_field``; 422 ``tenant_quota_exceeded``."""
    tenant = principal.tenant
    old = pending[name] if name in pending else config.queue(name)
    if old is not None and old.tenant != tenant:
        raise ApiError(403, OTHER_TENANT, f"queue {name!r} belongs to another tenant; a tenant administrator "
                       f"may change only the queues of tenant {tenant!r}", field="name")
    if new is None:
        return  # deleting one's own queue lowers every total; check_deletion has the other rules
    if new.tenant != tenant:
        raise ApiError(403, OTHER_TENANT, f"a tenant administrator of {tenant!r} may not define a queue of tenant "
                       f"{new.tenant!r}; set tenant: {tenant}", field="item.tenant")
    settings = config.tenant(tenant)
    if new.cohort is not None and new.cohort != (old.cohort if old is not None else None):
        allowed = settings.queue_cohorts if settings is not None else []
        if new.cohort not in allowed:
            listed = ", ".join(allowed) or "none"
            raise ApiError(403, COHORT_NOT_ALLOWED, f"tenant {tenant!r} may not put its queues in cohort "
                           f"{new.cohort!r} (its queue_cohorts: {listed}); ask an administrator", field="item.cohort")
    base = old if old is not None else QueueConfig(name=name, tenant=tenant)
    for reserved in RESERVED_FIELDS:
        if getattr(new, reserved) != getattr(base, reserved):
            raise ApiError(403, RESERVED_FIELD, f"only an administrator may set {reserved} of a queue (it is "
                           f"{getattr(base, reserved)!r} for {name!r})", field=f"item.{reserved}")
    others = [q for q_name, q in _queues_of(tenant, config.queues(), pending).items() if q_name != name]
    check_quota(settings, tenant, name, old, new, others)


@dataclass
class PendingQueues:
    """The queue changes this gateway published and has not read back from the config topic yet, and the
    lock that makes a tenant administrator's check and publication one step."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _changes: dict[str, tuple[QueueConfig | None, float]] = field(default_factory=dict)

    def current(self, config: ConfigView, now: float) -> dict[str, QueueConfig | None]:
        """The unread changes, dropping those the view shows by now (or that are older than ``PENDING_FOR_S``)."""
        for name, (item, at) in list(self._changes.items()):
            if config.queue(name) == item or now - at > PENDING_FOR_S:
                del self._changes[name]
        return {name: item for name, (item, _) in self._changes.items()}

    def published(self, name: str, item: QueueConfig | None, now: float) -> None:
        self._changes[name] = (item, now)

