"""Who may run work that cannot be preempted. Pure; one rule for both doors: the gateway (403 at
submission and priority change) and the queue manager (rejection of intents that external producers
write straight onto the intents topic).

A job is non-preemptible when its spec says ``preemptible: false`` or its priority class is not
preemptible. Only a tenant whose configuration sets ``allow_non_preemptible`` may run such work; an
unconfigured tenant may not. (The scheduling core separately keeps non-preemptible work within its
queue's nominal quota, so even an allowed tenant never holds quota another queue can claim back.)
"""

from __future__ import annotations

from schemas.config import PriorityClassConfig, TenantConfig

NON_PREEMPTIBLE_NOT_ALLOWED = "non_preemptible_not_allowed"


def class_preemptible(priority_class: PriorityClassConfig | None) -> bool:
    """An unknown class is preemptible (the unknown name itself is refused elsewhere)."""
    return priority_class is None or priority_class.preemptible


def non_preemptible_refusal(
    tenant_name: str,
    tenant: TenantConfig | None,
    *,
    preemptible: bool,
    priority_class: str,
    class_config: PriorityClassConfig | None,
) -> tuple[str, str] | None:
    """(field, message) naming why the tenant may not run this work, or None when it may."""
    if tenant is not None and tenant.allow_non_preemptible:
        return None
    rule = f"tenant {tenant_name!r} may not run non-preemptible work (tenant setting allow_non_preemptible)"
    if not class_preemptible(class_config):
        return "priority_class", f"priority class {priority_class!r} is not preemptible and {rule}"
    if not preemptible:
        return "preemptible", f"preemptible: false is not allowed: {rule}"
    return None
