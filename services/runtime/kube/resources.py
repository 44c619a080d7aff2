"""REST descriptors of the Kubernetes resources Muster reads and writes."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource type, e.g. ``batch/v1`` ``jobs`` (namespaced)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def base_path(self) -> str:
        return f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """The list / create / watch path; ``namespace=None`` on a namespaced type means all namespaces."""
        if self.namespaced and namespace:
            return f"{self.base_path}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        if not self.namespaced and namespace:
            raise ValueError(f"{self.kind} is cluster-scoped; no namespace applies")
        return f"{self.base_path}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None, subresource: str | None = None) -> str:
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name!r} needs a namespace")
        path = f"{self.collection_path(namespace)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path


NAMESPACES = Resource("v1", "Namespace", "namespaces", namespaced=False)
NODES = Resource("v1", "Node", "nodes", namespaced=False)
PODS = Resource("v1", "Pod", "pods", namespaced=True)
EVENTS = Resource("v1", "Event", "events", namespaced=True)
JOBS = Resource("batch/v1", "Job", "jobs", namespaced=True)
LEASES = Resource("coordination.k8s.io/v1", "Lease", "leases", namespaced=True)
POD_TEMPLATES = Resource("v1", "PodTemplate", "podtemplates", namespaced=True)
#: cluster-autoscaler's request for nodes (``schemas.kube.PROVISIONING_API``), where its CRD is installed
PROVISIONING_REQUESTS = Resource("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "provisioningrequests",
                                 namespaced=True)
