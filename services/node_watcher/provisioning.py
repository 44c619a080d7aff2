"""The answers of the cluster's autoscaler to Muster's ``ProvisioningRequest``s. Pure: objects in, messages out.

A request the dispatcher made carries the job's identity (``muster.dev/job-id``, ``muster.dev/attempt`` and
``muster.dev/node-group`` labels). When its ``Provisioned`` condition turns true the nodes made for it (labelled
``muster.dev/provisioning-request`` with its name) are named in ``NodesProvisioned``, once as many of them as it
asked for are observed (nodes and requests are watched apart, so either may be seen first); an autoscaler that
labels no node is answered after the nodes' grace period with none named. ``Failed``, and ``BookingExpired`` or
``CapacityRevoked`` before it was provisioned, become ``ProvisioningFailed`` with the condition's reason. Each
answer is reported once per request (a restart reports it again; the queue manager ignores repeats).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schemas.envelope import Message, clip_reason, clip_text
from schemas.kube import ATTEMPT, JOB_ID, NODE_GROUP, PROVISIONING_REQUEST
from schemas.runs import NodesProvisioned, ProvisioningFailed
from services.node_watcher.runs import condition
from services.runtime.kube.store import DELETED

KubeObject = dict[str, Any]
#: how long after ``Provisioned`` the answer waits for the request's nodes to be observed
NODES_GRACE_S = 30.0
_FAILED = ("Failed", "CapacityRevoked", "BookingExpired")


def _count(obj: KubeObject) -> int:
    return sum(int(p.get("count") or 0) for p in (obj.get("spec") or {}).get("podSets") or [])


class ProvisioningTracker:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.requests: dict[str, KubeObject] = {}  # name -> request provisioned, not answered yet
        self.since: dict[str, datetime] = {}  # name -> when it was seen provisioned
        self.nodes: dict[str, set[str]] = {}  # request name -> its nodes observed
        self.answered: set[str] = set()  # "<uid>" of requests answered

    def on_request(self, event_type: str, obj: KubeObject, now: datetime) -> list[Message]:
        meta = obj.get("metadata") or {}
        labels, name = meta.get("labels") or {}, str(meta.get("name", ""))
        uid = str(meta.get("uid", name))
        if event_type == DELETED:
            self.requests.pop(name, None)
            self.since.pop(name, None)
            return []
        if JOB_ID not in labels or uid in self.answered:
            return []
        provisioned = condition(obj, "Provisioned")
        failed = next((c for kind in _FAILED if (c := condition(obj, kind)) is not None), None)
        if failed is not None and (provisioned is None or failed.get("type") == "Failed"):
            self.answered.add(uid)
            self.requests.pop(name, None)
            return [ProvisioningFailed(
                job_id=labels[JOB_ID], attempt=int(labels.get(ATTEMPT, "0")), cluster=self.cluster, observed_at=now,
                request=name, reason=clip_reason(str(failed.get("reason") or failed.get("type"))),
                message=clip_text(str(failed.get("message") or "")))]
        if provisioned is None:
            return []
        self.requests[name] = obj
        self.since.setdefault(name, now)
        return self._answer(name, now)

    def on_node(self, event_type: str, node: KubeObject, now: datetime) -> list[Message]:
        meta = node.get("metadata") or {}
        request = (meta.get("labels") or {}).get(PROVISIONING_REQUEST)
        if request is None:
            return []
        names = self.nodes.setdefault(request, set())
        if event_type == DELETED:
            names.discard(str(meta.get("name")))
            return []
        names.add(str(meta.get("name")))
        return self._answer(request, now) if request in self.requests else []

    def tick(self, now: datetime) -> list[Message]:
        """Answer the requests whose nodes' grace period is over, with the nodes observed by then."""
        return [m for name in list(self.requests) for m in self._answer(name, now, late=True)]

    def _answer(self, name: str, now: datetime, *, late: bool = False) -> list[Message]:
        obj = self.requests[name]
        nodes = sorted(self.nodes.get(name, ()))
        waited = (now - self.since[name]).total_seconds()
        if len(nodes) < _count(obj) and not (late and waited >= NODES_GRACE_S):
            return []
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        del self.requests[name]
        self.since.pop(name, None)
        self.answered.add(str(meta.get("uid", name)))
        return [NodesProvisioned(job_id=labels[JOB_ID], attempt=int(labels.get(ATTEMPT, "0")), cluster=self.cluster,
                                 observed_at=now, request=name, group=labels.get(NODE_GROUP, "unknown"),
                                 nodes=nodes)]
