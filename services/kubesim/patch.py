"""The PATCH content types: JSON merge patch, strategic merge patch and RFC 6902 JSON patch."""

from __future__ import annotations

from typing import Any

import jsonpatch

from services.kubesim.errors import ApiError
from services.spec.merge_patch import merge_patch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)

# Lists merged by key under strategic merge patch (field name -> merge key), as in the core types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "addresses": "type",
    "taints": "key",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
}
# Lists of scalars merged as sets under strategic merge patch.
MERGE_SETS = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge patch for the fields kubesim knows (merge keys above and ``$patch`` directives)."""
    if isinstance(patch, list):
        return _merge_list(target if isinstance(target, list) else [], patch, field)
    if not isinstance(patch, dict):
        return patch
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [v for v in result.get(name) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        merged = strategic_merge_patch(result.get(key), value, key)
        if merged is None and isinstance(value, dict) and value.get("$patch") == "delete":
            result.pop(key, None)
        else:
            result[key] = merged
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(target: list[Any], patch: list[Any], field: str) -> list[Any]:
    if field in MERGE_SETS:
        out = list(target)
        for v in patch:
            if v not in out:
                out.append(v)
        return out
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [p for p in patch if not (isinstance(p, dict) and p.get("$patch"))]
    if any(p.get("$patch") == "replace" for p in patch):
        return [p for p in patch if "$patch" not in p]
    out = [dict(t) if isinstance(t, dict) else t for t in target]
    for item in patch:
        if item.get("$patch") == "delete":
            out = [t for t in out if not (isinstance(t, dict) and t.get(key) == item.get(key))]
            continue
        for i, existing in enumerate(out):
            if isinstance(existing, dict) and key in item and existing.get(key) == item.get(key):
                out[i] = strategic_merge_patch(existing, item, field)
                break
        else:
            out.append(strategic_merge_patch({}, item, field))
    return out


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 operations applied with the ``jsonpatch`` library; failures become 422 like the API."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations", "BadRequest")
    try:
        return jsonpatch.JsonPatch(ops).apply(target)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError) as exc:
        raise ApiError(422, f"the server rejected our request due to an error in our request: {exc}") from exc


def apply_patch(content_type: str, target: Any, patch: Any) -> Any:
    """Dispatch on the PATCH ``Content-Type`` (parameters after ``;`` ignored)."""
    ctype = content_type.split(";")[0].strip()
    if ctype == JSON_PATCH:
        return json_patch(target, patch)
    if ctype == MERGE_PATCH:
        return merge_patch(target, patch)
    if ctype in (STRATEGIC_PATCH, APPLY_PATCH):
        return strategic_merge_patch(target, patch)
    raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                   f"{', '.join(PATCH_TYPES)}", "UnsupportedMediaType")
