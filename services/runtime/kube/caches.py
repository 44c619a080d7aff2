"""Ready-made informers for the objects Muster watches: Nodes, Pods and Jobs."""

from __future__ import annotations

from services.runtime.kube.informer import Informer
from services.runtime.kube.resources import JOBS, NODES, PODS
from services.runtime.kube.rest import KubeRest
from services.runtime.kube.retry import Backoff
from services.runtime.kube.source import ApiEventSource


def node_cache(rest: KubeRest, *, label_selector: str | None = None, backoff: Backoff | None = None) -> Informer:
    """All Nodes (or those matching ``label_selector``)."""
    return Informer(ApiEventSource(rest, NODES, label_selector=label_selector), backoff=backoff)


def pod_cache(
    rest: KubeRest, namespace: str | None = None, *, label_selector: str | None = None,
    field_selector: str | None = None, backoff: Backoff | None = None,
) -> Informer:
    """Pods of one namespace, or of all namespaces when ``namespace`` is None."""
    return Informer(ApiEventSource(rest, PODS, namespace, label_selector=label_selector,
                                   field_selector=field_selector), backoff=backoff)


def job_cache(
    rest: KubeRest, namespace: str | None = None, *, label_selector: str | None = None,
    backoff: Backoff | None = None,
) -> Informer:
    """``batch/v1`` Jobs of one namespace, or of all namespaces when ``namespace`` is None."""
    return Informer(ApiEventSource(rest, JOBS, namespace, label_selector=label_selector), backoff=backoff)
