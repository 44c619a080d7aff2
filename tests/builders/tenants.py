"""Tenant names for the tests of job id tags."""

from __future__ import annotations

#: two tenant names whose job id tags (``services.spec.ids.tenant_tag``, 6 hex digits) are the same, found by
#: search: ids cannot tell their jobs apart, so the gateway refuses the second and the queue manager reports them
COLLIDING = ("team-92", "team-745")
