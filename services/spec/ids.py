"""Job ids: DNS-1123 labels of at most 48 characters, ``<name-prefix>-<tenant tag>-<8 hex>``.

The tenant tag (``tenant_tag``) is the start of a hash of the tenant's name, 6 hex digits: every id minted
for a tenant carries its tag (the gateway's random and keyed ids, ``KafkaSubmitter``'s, the ids of objects
submitted through Kubernetes, minted for their namespace's tenant), so an id says whose it is without a
lookup. The queue manager accepts on a tenant's own intents topic only submissions under that tenant's ids,
and judges a request there by the tag of the job id it names, never by whether the job exists
(``services.queue_manager.provenance``): no tenant can claim an id another tenant will use, nor learn
whether another tenant's id exists. The tag is no secret and needs none: what proves the writer is the
topic's ACL; the tag only ties an id to one tenant.

Two tenants whose names give the same tag could not be told apart by their ids: the gateway refuses to
define such a tenant, and the queue manager refuses such a tenant's own-topic submissions.

Ids minted before ids carried a tag, ``<name-prefix>-<8 hex>``, keep working for the jobs that have them:
``id_tenant_tag`` finds no tag in them, and the ``untagged_*`` forms (and ``kube_*_id`` without a tenant)
give them again, so that a retry or an object seen again finds its earlier job.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from functools import lru_cache

MAX_JOB_ID = 48
_SUFFIX = 8
_TAG = 6
#: how long the name part of an id is: room for the tag and the suffix
_PREFIX = MAX_JOB_ID - _TAG - _SUFFIX - 2
#: how long it was before ids carried a tag (the untagged forms)
_UNTAGGED_PREFIX = MAX_JOB_ID - _SUFFIX - 1
_NOT_ALLOWED = re.compile(r"[^a-z0-9-]+")
_TAGGED = re.compile(rf"^[a-z0-9-]*[a-z0-9]-(?P<tag>[0-9a-f]{{{_TAG}}})-[0-9a-f]{{{_SUFFIX}}}$")


def _cut(name: str, length: int) -> str:
    cleaned = _NOT_ALLOWED.sub("-", name.lower())[:length].strip("-")
    return cleaned or "job"


def name_prefix(name: str) -> str:
    """The part of a job id taken from a name: lower case, ``[a-z0-9-]``, short enough for the tag and suffix."""
    return _cut(name, _PREFIX)


def _hash8(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:_SUFFIX]


@lru_cache(maxsize=4096)
def tenant_tag(tenant: str) -> str:
    """The tag of ``tenant``'s job ids: 6 hex digits of a hash of its name."""
    return hashlib.sha256("\0".join(("tenant", tenant)).encode()).hexdigest()[:_TAG]


def id_tenant_tag(job_id: str) -> str | None:
    """The tenant tag ``job_id`` carries; None for an id without one (made before ids carried tags, or a
    recurring job's firing, which the gateway alone submits)."""
    match = _TAGGED.match(job_id)
    return None if match is None else match["tag"]


def job_id_of_tenant(job_id: str, tenant: str) -> bool:
    """Whether ``job_id`` carries ``tenant``'s tag."""
    return id_tenant_tag(job_id) == tenant_tag(tenant)


def tag_sharers(tenant: str, tenants: Iterable[str]) -> list[str]:
    """The other tenants among ``tenants`` whose tag is ``tenant``'s (sorted): ids could not tell their jobs
    from ``tenant``'s."""
    tag = tenant_tag(tenant)
    return sorted({t for t in tenants if t != tenant and tenant_tag(t) == tag})


def _tagged(prefix: str, tenant: str, suffix: str) -> str:
    room = MAX_JOB_ID - _TAG - len(suffix) - 2
    return f"{prefix[:room].rstrip('-') or 'job'}-{tenant_tag(tenant)}-{suffix}"


def with_tenant_tag(job_id: str, tenant: str) -> str:
    """``job_id`` (``<prefix>-<suffix>``) with ``tenant``'s tag before its suffix, the prefix shortened to keep
    it within ``MAX_JOB_ID``; an id that carries the tag already stays as it is."""
    if job_id_of_tenant(job_id, tenant):
        return job_id
    prefix, _, suffix = job_id.rpartition("-")
    return _tagged(prefix, tenant, suffix)


def keyed_job_id(name: str, tenant: str, idempotency_key: str) -> str:
    """The id a submission of ``tenant`` with an idempotency key gets: the same for every retry of that key,
    through the gateway or ``KafkaSubmitter``."""
    return f"{name_prefix(name)}-{tenant_tag(tenant)}-{_hash8('key', tenant, idempotency_key)}"


def untagged_keyed_job_id(name: str, tenant: str, idempotency_key: str) -> str:
    """The id the same key gave before ids carried a tenant tag: a retry of such a submission finds its job."""
    return f"{_cut(name, _UNTAGGED_PREFIX)}-{_hash8('key', tenant, idempotency_key)}"


def random_job_id(name: str, tenant: str | None = None) -> str:
    """A fresh id for a submission without an idempotency key, tagged for ``tenant``; without one it has no
    tag yet (``with_tenant_tag`` adds it: the gateway's ``fresh_id`` is called with the name alone)."""
    job_id = f"{_cut(name, _UNTAGGED_PREFIX)}-{secrets.token_hex(_SUFFIX // 2)}"
    return job_id if tenant is None else with_tenant_tag(job_id, tenant)


def _object_id(name: str, tenant: str | None, suffix: str) -> str:
    if tenant is None:
        return f"{_cut(name, _UNTAGGED_PREFIX)}-{suffix}"
    return f"{name_prefix(name)}-{tenant_tag(tenant)}-{suffix}"


def kube_job_id(namespace: str, name: str, uid: str, *, tenant: str | None) -> str:
    """The id of a ``batch/v1`` Job submitted through the cluster, minted for ``tenant``, the tenant of its
    namespace: stable for that object's lifetime. ``tenant`` None gives the id without a tag, the one such an
    object got before ids carried tags (and the id of an object whose namespace belongs to no tenant)."""
    return _object_id(name, tenant, _hash8("kube", namespace, name, uid))


def kube_workload_id(kind: str, namespace: str, name: str, uid: str, *, tenant: str | None) -> str:
    """The id of a workload object (JobSet, RayJob, LeaderWorkerSet, a pod group...) submitted through the
    cluster, minted for ``tenant``, the tenant of its namespace: stable for that object's lifetime, the kind
    part of it so that a JobSet and a RayJob of one name in one namespace are two jobs. A pod group has no uid
    of its own: ``uid`` is then empty. ``tenant`` None: the id without a tag, as for ``kube_job_id``."""
    return _object_id(name, tenant, _hash8("kube", kind, namespace, name, uid))
