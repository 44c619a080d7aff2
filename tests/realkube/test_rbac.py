"""Least privilege, for real: each service's ServiceAccount (``deploy/kubernetes``) may do exactly what
the service needs and gets 403 beyond it. The queue manager and the quota accountant have no
Kubernetes credentials at all; the end-to-end tests on the real control plane run every service with
these same kubeconfigs, which shows the rights are enough."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from services.runtime.kube import JOBS, NODES, KubeRest, Resource, build_api_client
from tests.builders.realkube import RealCluster
from tests.realkube.conftest import NAMESPACE

pytestmark = pytest.mark.realkube

SECRETS = Resource("v1", "Secret", "secrets", namespaced=True)

# (service, verb, API group, resource, namespace or None) -> allowed
MATRIX: list[tuple[str, str, str, str, str | None, bool]] = [
    ("dispatcher", "create", "batch", "jobs", NAMESPACE, True),
    ("dispatcher", "delete", "batch", "jobs", NAMESPACE, True),
    ("dispatcher", "watch", "batch", "jobs", None, False),
    ("dispatcher", "create", "", "pods/binding", NAMESPACE, True),
    ("dispatcher", "delete", "", "pods", NAMESPACE, True),
    ("dispatcher", "create", "", "pods", NAMESPACE, True),  # a plain Pod group submitted with its manifest
    ("dispatcher", "create", "", "events", NAMESPACE, True),  # a cancelled user object left in place is told
    ("dispatcher", "delete", "", "events", NAMESPACE, False),
    ("dispatcher", "patch", "", "nodes", None, True),  # the scale-down taint of a bought node given back
    ("dispatcher", "delete", "", "nodes", None, False),
    ("dispatcher", "create", "autoscaling.x-k8s.io", "provisioningrequests", NAMESPACE, True),
    ("dispatcher", "delete", "autoscaling.x-k8s.io", "provisioningrequests", NAMESPACE, False),
    ("dispatcher", "create", "", "podtemplates", NAMESPACE, True),
    ("dispatcher", "get", "", "secrets", NAMESPACE, False),
    ("dispatcher", "create", "", "namespaces", None, True),
    ("dispatcher", "delete", "", "namespaces", None, False),
    ("node-watcher", "watch", "", "nodes", None, True),
    ("node-watcher", "watch", "", "pods", None, True),
    ("node-watcher", "watch", "batch", "jobs", None, True),
    ("node-watcher", "patch", "", "nodes", None, False),
    ("node-watcher", "watch", "autoscaling.x-k8s.io", "provisioningrequests", None, True),
    ("node-watcher", "patch", "autoscaling.x-k8s.io", "provisioningrequests", NAMESPACE, False),
    ("node-watcher", "create", "batch", "jobs", NAMESPACE, False),
    ("node-watcher", "delete", "", "pods", NAMESPACE, False),
    ("gateway", "watch", "batch", "jobs", None, True),
    ("gateway", "patch", "batch", "jobs", NAMESPACE, False),
    ("gateway", "update", "batch", "jobs/status", NAMESPACE, True),
    ("gateway", "update", "batch", "jobs", NAMESPACE, False),
    ("gateway", "create", "", "events", NAMESPACE, True),
    ("gateway", "delete", "", "events", NAMESPACE, False),
    ("gateway", "list", "", "pods", None, True),  # the gated pods of a group of plain Pods (a workload kind)
    ("gateway", "delete", "", "pods", NAMESPACE, False),
    ("gateway", "get", "", "secrets", NAMESPACE, False),
    ("gateway", "watch", "jobset.x-k8s.io", "jobsets", None, True),
    ("gateway", "patch", "jobset.x-k8s.io", "jobsets", NAMESPACE, False),
    ("dispatcher", "patch", "jobset.x-k8s.io", "jobsets", NAMESPACE, True),
    ("dispatcher", "watch", "jobset.x-k8s.io", "jobsets", None, False),
    ("node-watcher", "watch", "ray.io", "rayjobs", None, True),
    ("node-watcher", "patch", "ray.io", "rayjobs", NAMESPACE, False),
]


async def can_i(rest: KubeRest, verb: str, group: str, resource: str, namespace: str | None) -> bool:
    plural, _, sub = resource.partition("/")
    attributes: dict[str, Any] = {"verb": verb, "group": group, "resource": plural}
    if sub:
        attributes["subresource"] = sub
    if namespace:
        attributes["namespace"] = namespace
    review = await rest.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    })
    return bool(review["status"].get("allowed"))


async def test_each_service_account_has_exactly_its_rights(real: RealCluster, admin: KubeRest) -> None:
    wrong = []
    for service in ("dispatcher", "node-watcher", "gateway"):
        api = await build_api_client(kubeconfig=str(real.kubeconfig(service)))
        async with api:
            rest = KubeRest(api, request_timeout=10.0)
            for who, verb, group, resource, namespace, allowed in MATRIX:
                if who == service and await can_i(rest, verb, group, resource, namespace) != allowed:
                    wrong.append((who, verb, group, resource, namespace, allowed))
    assert wrong == [], f"rights differ from deploy/kubernetes: {wrong}"


async def forbidden(call: Any) -> bool:
    try:
        await call
    except ApiException as exc:
        return exc.status == 403
    return False


async def test_calls_beyond_a_service_s_rights_get_403(real: RealCluster, admin: KubeRest) -> None:
    api = await build_api_client(kubeconfig=str(real.kubeconfig("node-watcher")))
    async with api:
        watcher = KubeRest(api, request_timeout=10.0)
        nodes, _ = await watcher.list(NODES)
        assert nodes, "the node watcher reads nodes"
        assert await forbidden(watcher.patch(NODES, nodes[0]["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}}))
        assert await forbidden(watcher.list(SECRETS, NAMESPACE))
    api = await build_api_client(kubeconfig=str(real.kubeconfig("dispatcher")))
    async with api:
        dispatcher = KubeRest(api, request_timeout=10.0)
        await dispatcher.list(JOBS, NAMESPACE)
        # it creates pods (a plain Pod group submitted with its manifest), never Secrets
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sneaky", "namespace": NAMESPACE},
                  "stringData": {"token": "x"}}
        assert await forbidden(dispatcher.create(SECRETS, secret, NAMESPACE))
        assert await forbidden(dispatcher.list(SECRETS, NAMESPACE))
    api = await build_api_client(kubeconfig=str(real.kubeconfig("gateway")))
    async with api:
        gateway = KubeRest(api, request_timeout=10.0)
        await gateway.list(JOBS)
        assert await forbidden(gateway.list(SECRETS, NAMESPACE))
