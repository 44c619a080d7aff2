"""Discovery documents: ``/api``, ``/apis``, group versions and ``/version``."""

from __future__ import annotations

from typing import Any

from services.kubesim.resources import GROUP_VERSIONS, ResourceType, resources_in

SERVER_ADDRESS = {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}


def version_info() -> dict[str, str]:
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-kubesim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions() -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [SERVER_ADDRESS]}


def api_groups() -> dict[str, Any]:
    groups = []
    for gv, (group, version) in GROUP_VERSIONS.items():
        if not group:
            continue
        entry = {"groupVersion": gv, "version": version}
        groups.append(
            {"name": group, "versions": [entry], "preferredVersion": entry,
             "serverAddressByClientCIDRs": [SERVER_ADDRESS]}
        )
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, Any] | None:
    for g in api_groups()["groups"]:
        if g["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **g}
    return None


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [
        {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
            "shortNames": list(rt.short_names),
            "categories": list(rt.categories),
            "storageVersionHash": rt.kind.lower(),
        }
    ]
    for sub in rt.subresources:
        verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
        kind = "Pod" if sub == "log" else rt.kind
        entries.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                        "kind": kind, "verbs": verbs})
    if rt.plural == "pods":
        entries.append({"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                        "verbs": ["create"]})
    return entries


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    gv = f"{group}/{version}" if group else version
    if gv not in GROUP_VERSIONS:
        return None
    resources = [e for rt in resources_in(group, version) for e in _resource_entries(rt)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
