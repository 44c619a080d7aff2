"""The resource types kubesim serves: names, kinds, groups and the verbs discovery advertises."""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: ``/api/v1/pods`` or ``/apis/batch/v1/namespaces/x/jobs``."""

    plural: str
    singular: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


NAMESPACES = ResourceType("namespaces", "namespace", "Namespace", "", "v1", False, ("ns",), ("status",))
NODES = ResourceType("nodes", "node", "Node", "", "v1", False, ("no",), ("status",))
PODS = ResourceType("pods", "pod", "Pod", "", "v1", True, ("po",), ("status", "log"), ("all",))
EVENTS = ResourceType("events", "event", "Event", "", "v1", True, ("ev",))
JOBS = ResourceType("jobs", "job", "Job", "batch", "v1", True, (), ("status",), ("all",))
LEASES = ResourceType("leases", "lease", "Lease", "coordination.k8s.io", "v1", True)

RESOURCE_TYPES: tuple[ResourceType, ...] = (NAMESPACES, NODES, PODS, EVENTS, JOBS, LEASES)

GROUP_VERSIONS: dict[str, tuple[str, str]] = {
    "v1": ("", "v1"),
    "batch/v1": ("batch", "v1"),
    "coordination.k8s.io/v1": ("coordination.k8s.io", "v1"),
}


def resources_in(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCE_TYPES if r.group == group and r.version == version]


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    for r in RESOURCE_TYPES:
        if r.group == group and r.version == version and r.plural == plural:
            return r
    return None
