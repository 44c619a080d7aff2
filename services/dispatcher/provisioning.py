"""``NodesRequested`` and ``NodeReleaseRequested``: asking the cluster's autoscaler for nodes, and giving them back.

A request becomes a ``ProvisioningRequest`` (cluster-autoscaler's ``autoscaling.x-k8s.io/v1``, class
``best-effort-atomic-scale-up``: all of the nodes or none) named after the job's attempt, in the job's namespace,
with a ``PodTemplate`` of the same name: one pod per node asking for the node's GPUs, on the node group Muster
chose (``muster.dev/node-group``, also passed as a parameter). Both are created idempotently (a repeated decision
finds them). The answer (``Provisioned`` or ``Failed``) is observed by the node watcher; the dispatcher only
asks. A request the API refuses (no ProvisioningRequest API on the cluster, no RBAC) is logged and counted: the
queue manager then counts the request failed when it stays unanswered (``provision_timeout_s``).

A node to give back gets the ``muster.dev/scale-down`` taint (NoSchedule, by strategic merge on its taints):
nothing new is placed there, and the autoscaler removes it.
"""

from __future__ import annotations

import logging

from schemas.decisions import NodeReleaseRequested, NodesRequested
from schemas.envelope import Envelope
from schemas.kube import (
    ATTEMPT,
    GPU_RESOURCE,
    JOB_ID,
    MUSTER,
    NODE_GROUP,
    NODE_GROUP_PARAMETER,
    PROVISIONING_API,
    PROVISIONING_CLASS,
    PROVISIONING_KIND,
    QUEUE,
    SCALE_DOWN,
)
from services.dispatcher.context import Context, api_failure
from services.runtime.kube import NODES, KubeObject, PatchType, create_or_get, label_value, patch
from services.runtime.kube.errors import status_of
from services.runtime.kube.resources import POD_TEMPLATES, PROVISIONING_REQUESTS

log = logging.getLogger(__name__)

#: when the nodes were expected (ISO 8601), on the request
READY_BY = "muster.dev/ready-by"


def _labels(d: NodesRequested) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": MUSTER, JOB_ID: d.job_id, ATTEMPT: str(d.attempt),
            QUEUE: label_value(d.queue), NODE_GROUP: d.group}


def pod_template(d: NodesRequested) -> KubeObject:
    """What one pod of the request looks like to the autoscaler: a whole node of the group."""
    gpus = {GPU_RESOURCE: str(d.gpus_per_node)} if d.gpus_per_node else {}
    return {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": d.request, "namespace": d.namespace, "labels": _labels(d)},
        "template": {
            "metadata": {"labels": {JOB_ID: d.job_id}},
            "spec": {
                "nodeSelector": {NODE_GROUP: d.group},
                "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "capacity", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": gpus, "limits": gpus}}],
            },
        },
    }


def provisioning_request(d: NodesRequested) -> KubeObject:
    return {
        "apiVersion": PROVISIONING_API, "kind": PROVISIONING_KIND,
        "metadata": {"name": d.request, "namespace": d.namespace, "labels": _labels(d),
                     "annotations": {READY_BY: d.ready_by.isoformat()}},
        "spec": {
            "provisioningClassName": PROVISIONING_CLASS,
            "podSets": [{"podTemplateRef": {"name": d.request}, "count": d.nodes}],
            "parameters": {NODE_GROUP_PARAMETER: d.group},
        },
    }


async def request_nodes(ctx: Context, envelope: Envelope) -> None:
    d = envelope.payload
    assert isinstance(d, NodesRequested)
    if d.cluster != ctx.cluster:
        return
    try:
        await ctx.ops.ensure_namespace(d.namespace)
        await create_or_get(ctx.ops.rest, POD_TEMPLATES, pod_template(d), d.namespace)
        _, created = await create_or_get(ctx.ops.rest, PROVISIONING_REQUESTS, provisioning_request(d), d.namespace)
    except Exception as exc:
        failure = api_failure(exc)
        if failure is None or failure[1]:
            raise  # redelivered: the cluster's API may answer next time
        log.error("job %s attempt %d: the cluster refused the request for %d %s node(s) (%s): %s; the queue manager "
                  "counts it failed once unanswered", d.job_id, d.attempt, d.nodes, d.group, failure[0], exc)
        ctx.outcome(d.TYPE, "failed")
        return
    log.info("job %s attempt %d: asked for %d node(s) of group %s (%s)", d.job_id, d.attempt, d.nodes, d.group,
             "ProvisioningRequest created" if created else "already asked")
    ctx.outcome(d.TYPE, "created" if created else "repeat")


async def release_node(ctx: Context, envelope: Envelope) -> None:
    d = envelope.payload
    assert isinstance(d, NodeReleaseRequested)
    if d.cluster != ctx.cluster:
        return
    taint = {"key": SCALE_DOWN, "value": "true", "effect": "NoSchedule"}
    try:
        await patch(ctx.ops.rest, NODES, d.node, {"spec": {"taints": [taint]}}, patch_type=PatchType.STRATEGIC)
    except Exception as exc:
        if status_of(exc) == 404:
            ctx.outcome(d.TYPE, "gone")
            return
        raise
    log.info("node %s of group %s: marked for scale-down", d.node, d.group)
    ctx.outcome(d.TYPE, "marked")
