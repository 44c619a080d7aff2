"""A minimal OpenAPI v3 index: enough for kubectl to see that PATCH takes ``fieldValidation``.

With it kubectl leaves validation to the server (kubesim validates on its own) instead of
downloading the full schema for client-side validation.
"""

from __future__ import annotations

from typing import Any

from services.kubesim.resources import GROUP_VERSIONS, ResourceType, resources_in

_HASH = "kubesim0001"


def _path_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root() -> dict[str, Any]:
    return {
        "paths": {
            _path_key(g, v): {"serverRelativeURL": f"/openapi/v3/{_path_key(g, v)}?hash={_HASH}"}
            for g, v in GROUP_VERSIONS.values()
        }
    }


def _operation(rt: ResourceType, verb: str) -> dict[str, Any]:
    params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
              {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
              {"name": "dryRun", "in": "query", "schema": {"type": "string"}}]
    return {
        "operationId": f"{verb}{rt.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    }


def openapi_v3_group(path: str) -> dict[str, Any] | None:
    """The document for ``api/v1`` or ``apis/<group>/<version>``, or None when unknown."""
    for group, version in GROUP_VERSIONS.values():
        if _path_key(group, version) != path:
            continue
        paths: dict[str, Any] = {}
        for rt in resources_in(group, version):
            base = f"/{path}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"/{path}/{rt.plural}"
            paths[f"{base}/{{name}}"] = {
                "patch": _operation(rt, "patch"),
                "put": _operation(rt, "put"),
            }
            paths[base] = {"post": _operation(rt, "post")}
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0-kubesim"},
            "paths": paths,
            "components": {"schemas": {}},
        }
    return None
