"""Object metadata helpers: timestamps, uids, generated names, quantities, deep copies."""

from __future__ import annotations

import copy
import random
import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

Obj = dict[str, Any]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIXES = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """MicroTime as used by Lease ``renewTime``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def random_suffix(n: int = 5, rng: random.Random | None = None) -> str:
    r = rng or random
    return "".join(r.choice(_NAME_CHARS) for _ in range(n))


def deep(obj: Obj) -> Obj:
    return copy.deepcopy(obj)


def parse_quantity(value: Any) -> Decimal:
    """Parse a Kubernetes quantity (``500m``, ``4Gi``, ``2``); raises ``ValueError`` on garbage."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    m = _QUANTITY_RE.match(str(value).strip())
    if not m:
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    try:
        return Decimal(m.group(1)) * _SUFFIXES[m.group(2) or ""]
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc


def meta(obj: Obj) -> Obj:
    """The object's metadata mapping, created if missing."""
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def set_condition(conditions: list[Obj], ctype: str, status: str, reason: str = "", message: str = "") -> bool:
    """Set a condition by type; keeps ``lastTransitionTime`` when the status is unchanged.

    Returns True when anything changed.
    """
    now = now_rfc3339()
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") == status and cond.get("reason", "") == reason and (
                cond.get("message", "") == message
            ):
                return False
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now
            cond.update({"status": status, "reason": reason, "message": message, "lastProbeTime": now})
            return True
    conditions.append(
        {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )
    return True


def condition_true(obj: Obj, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )
