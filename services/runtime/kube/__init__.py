"""The Kubernetes client layer: client construction, list-then-watch caches, idempotent writes."""

from services.runtime.kube.caches import job_cache, node_cache, pod_cache
from services.runtime.kube.client import KubeConfigError, build_api_client
from services.runtime.kube.informer import Informer, Subscription, WatchErrorEvent
from services.runtime.kube.names import dns1123_label, job_object_name, label_value
from services.runtime.kube.resources import EVENTS, JOBS, LEASES, NAMESPACES, NODES, PODS, Resource
from services.runtime.kube.rest import KubeObject, KubeRest, PatchType
from services.runtime.kube.retry import Backoff, RetryPolicy
from services.runtime.kube.source import ApiEventSource, EventSource
from services.runtime.kube.store import ADDED, DELETED, MODIFIED, Change, ObjectStore
from services.runtime.kube.writes import UpdateConflictError, create_or_get, delete, ensure_namespace, patch, update

__all__ = [
    "ADDED", "DELETED", "EVENTS", "JOBS", "LEASES", "MODIFIED", "NAMESPACES", "NODES", "PODS",
    "ApiEventSource", "Backoff", "Change", "EventSource", "Informer", "KubeConfigError", "KubeObject", "KubeRest",
    "ObjectStore", "PatchType", "Resource", "RetryPolicy", "Subscription", "UpdateConflictError", "WatchErrorEvent",
    "build_api_client", "create_or_get", "delete", "dns1123_label", "ensure_namespace", "job_cache",
    "job_object_name", "label_value", "node_cache", "patch", "pod_cache", "update",
]
