"""What a fresh local control plane gets before Muster uses it: the cluster file's nodes as KWOK
nodes, the ServiceAccounts and RBAC of ``deploy/kubernetes``, cluster-autoscaler's ProvisioningRequest API
(``autoscaler_api``), and one kubeconfig per Muster service that authenticates as that service's
ServiceAccount (never as the admin).

Every step is idempotent: running it again on a cluster that has it all changes nothing but the
tokens, which are requested anew.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from schemas.config import ClusterConfig
from services.kubereal.autoscaler_api import install_provisioning_api
from services.kubereal.build import BuildError
from services.kubereal.controlplane import KWOK_NODE_ANNOTATION, ControlPlane
from services.kubesim.nodes import cluster_nodes, node_ready
from services.runtime.credentials import write_private
from services.runtime.kube import (
    JOBS,
    NAMESPACES,
    NODES,
    PODS,
    KubeObject,
    KubeRest,
    Resource,
    build_api_client,
    create_or_get,
    delete,
)
from services.runtime.kube.errors import status_of

log = logging.getLogger(__name__)

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
SYSTEM_NAMESPACE = "muster-system"
SYSTEM_NAMESPACES = (SYSTEM_NAMESPACE, "kube-system", "kube-public", "kube-node-lease")
#: the manifests that define who each service is and what it may do, as a cluster operator applies them
RBAC_MANIFESTS = (
    "namespace.yaml",
    "serviceaccounts.yaml",
    "rbac-dispatcher.yaml",
    "rbac-node-watcher.yaml",
    "components/gateway-kube-jobs/rbac-gateway.yaml",
)
#: the services that call the Kubernetes API, and their ServiceAccounts
SERVICE_ACCOUNTS = {
    "gateway": "muster-gateway",
    "dispatcher": "muster-dispatcher",
    "node-watcher": "muster-node-watcher",
}
TOKEN_SECONDS = 365 * 24 * 3600
#: kinds whose existing object is kept as it is (a node's state, a ServiceAccount's uid and tokens)
KEEP_EXISTING = frozenset({"Namespace", "ServiceAccount", "Node"})

KINDS: dict[str, Resource] = {
    r.kind: r for r in (
        NAMESPACES,
        NODES,
        Resource("v1", "ServiceAccount", "serviceaccounts", namespaced=True),
        Resource("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False),
        Resource("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
        Resource("rbac.authorization.k8s.io/v1", "Role", "roles", namespaced=True),
        Resource("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", namespaced=True),
    )
}


def kwok_node(node: KubeObject) -> KubeObject:
    """A node of the cluster file as KWOK manages it: annotated, with resources and no conditions yet
    (KWOK's node-initialize stage makes it Ready and keeps its heartbeat)."""
    out = copy.deepcopy(node)
    out["apiVersion"], out["kind"] = "v1", "Node"
    out["metadata"].setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
    status = out.get("status") or {}
    out["status"] = {k: status[k] for k in ("capacity", "allocatable", "addresses") if k in status}
    return out


def manifests(paths: Iterable[Path]) -> list[KubeObject]:
    docs: list[KubeObject] = []
    for path in paths:
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


async def apply(rest: KubeRest, obj: KubeObject) -> KubeObject:
    """Create ``obj``, or replace what has its name (RBAC rules follow the manifests)."""
    resource = KINDS.get(obj["kind"])
    if resource is None:
        raise ValueError(f"cannot apply a {obj['kind']}: not one of {sorted(KINDS)}")
    namespace = obj["metadata"].get("namespace") if resource.namespaced else None
    current, created = await create_or_get(rest, resource, obj, namespace)
    if created or obj["kind"] in KEEP_EXISTING:
        return current
    body = copy.deepcopy(obj)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return await rest.replace(resource, body, namespace)


@dataclass(frozen=True)
class Bootstrapped:
    """The kubeconfig of each service that calls the API (``gateway``, ``dispatcher``, ``node-watcher``)."""

    kubeconfigs: dict[str, Path]
    nodes: int


async def service_token(rest: KubeRest, account: str, seconds: int = TOKEN_SECONDS) -> str:
    """A bound ServiceAccount token from the TokenRequest API."""
    path = (f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts/{account}/token")
    answer = await rest.request("POST", path, body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    })
    token: str = answer["status"]["token"]
    return token


def _shape(node: KubeObject) -> tuple[object, ...]:
    """What the cluster file decides of a node: labels, annotations, taints, allocatable resources."""
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("kwok.x-k8s.io/")
                   or k == KWOK_NODE_ANNOTATION}
    return (meta.get("labels"), annotations, spec.get("taints") or [], status.get("allocatable"))


async def register_nodes(rest: KubeRest, cluster: ClusterConfig | None, *, exclusive: bool = False) -> list[str]:
    """The cluster's nodes as KWOK nodes; their names. A node that exists already is kept as it is
    (a restart keeps the cluster's state), unless ``exclusive``: then every node that is not one of
    these, or that has another shape (labels, taints, GPUs), is deleted and registered anew."""
    nodes = [kwok_node(n) for n in cluster_nodes(cluster)] if cluster is not None else []
    names = [n["metadata"]["name"] for n in nodes]
    if exclusive:
        wanted = {n["metadata"]["name"]: _shape(n) for n in nodes}
        existing, _ = await rest.list(NODES)
        for node in existing:
            name = node["metadata"]["name"]
            if wanted.get(name) != _shape(node):
                await delete(rest, NODES, name)
                await _until_gone(rest, name)
    for node in nodes:
        await apply(rest, node)
    return names


async def _until_gone(rest: KubeRest, name: str, timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            await rest.get(NODES, name)
        except Exception as exc:
            if status_of(exc) == 404:
                return
            raise
        await asyncio.sleep(0.1)
    raise TimeoutError(f"node {name} still there {timeout_s:.0f}s after its deletion")


async def wait_nodes_ready(rest: KubeRest, names: Iterable[str], timeout_s: float = 60.0) -> None:
    """Until KWOK has made every named node Ready."""
    wanted = set(names)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        nodes, _ = await rest.list(NODES)
        ready = {n["metadata"]["name"] for n in nodes if node_ready(n)}
        if wanted <= ready:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout_s:.0f}s: {sorted(wanted - ready)}")
        await asyncio.sleep(0.2)


#: the workload objects a test leaves behind (their kinds' CRDs may be installed or not)
WORKLOAD_RESOURCES = (
    Resource("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", namespaced=True),
    Resource("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", namespaced=True),
    Resource("ray.io/v1", "RayJob", "rayjobs", namespaced=True),
    Resource("ray.io/v1", "RayCluster", "rayclusters", namespaced=True),
    Resource("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", namespaced=True),
    Resource("apps/v1", "Deployment", "deployments", namespaced=True),
    Resource("apps/v1", "StatefulSet", "statefulsets", namespaced=True),
)


async def clear_workloads(rest: KubeRest, keep_namespaces: Iterable[str] = SYSTEM_NAMESPACES) -> int:
    """Delete every workload object, Job and pod outside the system namespaces at once (pods without
    grace). How many."""
    keep = set(keep_namespaces)
    deleted = 0
    for kind in WORKLOAD_RESOURCES:
        try:
            objects, _ = await rest.list(kind)
        except Exception as exc:
            if status_of(exc) == 404:
                continue  # its CRD is not installed here
            raise
        for obj in objects:
            meta = obj["metadata"]
            if meta.get("namespace") not in keep:
                deleted += await delete(rest, kind, meta["name"], meta["namespace"])
    for resource, grace in ((JOBS, None), (PODS, 0)):
        items, _ = await rest.list(resource)
        for item in items:
            meta = item["metadata"]
            if meta.get("namespace") in keep:
                continue
            deleted += await delete(rest, resource, meta["name"], meta["namespace"], grace_period_seconds=grace)
    return deleted


async def _provisioning_api(plane: ControlPlane) -> None:
    """cluster-autoscaler's ProvisioningRequest API, so node groups can grow (``autoscaler_api``); a plane without it
    still runs everything else (Muster's requests for nodes then go unanswered and count as failed)."""
    try:
        await asyncio.to_thread(install_provisioning_api, plane, log.info)
    except BuildError as exc:
        log.warning("the ProvisioningRequest API is not installed on %s: %s", plane.url, exc)


async def bootstrap(plane: ControlPlane, cluster: ClusterConfig | None, deploy_dir: Path = DEPLOY_DIR) -> Bootstrapped:
    """Nodes, RBAC and per-service kubeconfigs on a started control plane."""
    api = await build_api_client(kubeconfig=str(plane.admin_kubeconfig))
    async with api:
        rest = KubeRest(api)
        missing = [m for m in RBAC_MANIFESTS if not (deploy_dir / m).exists()]
        if missing:
            raise FileNotFoundError(f"{deploy_dir} lacks {missing}: run from a checkout of the Muster repository")
        for obj in manifests(deploy_dir / m for m in RBAC_MANIFESTS):
            await apply(rest, obj)
        nodes = await register_nodes(rest, cluster)
        await _provisioning_api(plane)
        kubeconfigs: dict[str, Path] = {}
        for service, account in SERVICE_ACCOUNTS.items():
            token = await service_token(rest, account)
            path = plane.state_dir / "kubeconfigs" / f"{service}.yaml"
            config: dict[str, Any] = plane.kubeconfig_for(f"system:serviceaccount:{SYSTEM_NAMESPACE}:{account}", token)
            write_private(path, yaml.safe_dump(config, sort_keys=False))
            kubeconfigs[service] = path
    return Bootstrapped(kubeconfigs, len(nodes))
