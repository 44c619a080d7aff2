"""Role names: a kind's own pod-set name (a replicatedJob, a Ray worker group...) as a Muster role name, a
DNS label of at most 32 characters (``schemas.jobspec.RoleName``).

A valid name is kept as it is. Any other is lower-cased, every run of characters outside ``[a-z0-9-]``
becomes ``-``, it is cut to leave room for ``-`` and six hex digits of the SHA-256 of the original name,
which are appended. The result depends on that one name only (not on the object's other pod sets), so a
pod's role can be told from its pod-set label alone, and two different names never meet by accident."""

from __future__ import annotations

import hashlib
import re

ROLE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_ROLE_NAME = 32
_DIGEST = 6
_INVALID = re.compile(r"[^a-z0-9-]+")


def role_name(pod_set: str) -> str:
    """The role name of a pod set (deterministic; see the module)."""
    if len(pod_set) <= MAX_ROLE_NAME and ROLE_NAME.match(pod_set):
        return pod_set
    digest = hashlib.sha256(pod_set.encode()).hexdigest()[:_DIGEST]
    stem = _INVALID.sub("-", pod_set.lower())[: MAX_ROLE_NAME - _DIGEST - 1].strip("-")
    stem = re.sub(r"-{2,}", "-", stem)
    return f"{stem}-{digest}" if stem else f"r-{digest}"
