"""Job ids: DNS-1123 labels of at most 48 characters, ``<name-prefix>-<8 hex>``."""

from __future__ import annotations

import hashlib
import re
import secrets

MAX_JOB_ID = 48
_SUFFIX = 8
_NOT_ALLOWED = re.compile(r"[^a-z0-9-]+")


def name_prefix(name: str) -> str:
    """The part of a job id taken from a name: lower case, ``[a-z0-9-]``, short enough for the suffix."""
    cleaned = _NOT_ALLOWED.sub("-", name.lower())[: MAX_JOB_ID - _SUFFIX - 1].strip("-")
    return cleaned or "job"


def _hash8(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:_SUFFIX]


def keyed_job_id(name: str, tenant: str, idempotency_key: str) -> str:
    """The id a submission with an idempotency key gets: the same for every retry of that key."""
    return f"{name_prefix(name)}-{_hash8('key', tenant, idempotency_key)}"


def random_job_id(name: str) -> str:
    """A fresh id for a submission without an idempotency key."""
    return f"{name_prefix(name)}-{secrets.token_hex(_SUFFIX // 2)}"


def kube_job_id(namespace: str, name: str, uid: str) -> str:
    """The id of a ``batch/v1`` Job submitted through the cluster: stable for that object's lifetime."""
    return f"{name_prefix(name)}-{_hash8('kube', namespace, name, uid)}"


def kube_workload_id(kind: str, namespace: str, name: str, uid: str) -> str:
    """The id of a workload object (JobSet, RayJob, LeaderWorkerSet, a pod group...) submitted through the
    cluster: stable for that object's lifetime, the kind part of it so that a JobSet and a RayJob of one name
    in one namespace are two jobs. A pod group has no uid of its own: ``uid`` is then empty."""
    return f"{name_prefix(name)}-{_hash8('kube', kind, namespace, name, uid)}"
