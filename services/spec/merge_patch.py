"""JSON merge patch (RFC 7386): maps merge recursively, ``null`` deletes a key, anything else replaces.

Used by kubesim for ``application/merge-patch+json`` and by the what-if replay for ``--config-patch``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied; neither is changed."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
