"""What a cancel leaves of a job whose object its owner created (kube-native): the object, held back, marked.

Muster does not delete what a user made. A cancel reaches the dispatcher as a preemption that does not requeue
(reason ``cancelled``) and stops the job as a preemption does: a ``batch/v1`` Job, JobSet, TrainJob, RayJob or
RayCluster is suspended (its controller removes the pods), the pods of a LeaderWorkerSet, Deployment or
StatefulSet are deleted (their controller makes them again, held by the gate ``muster.dev/admission``, on no
node). Once the stop is reported, the object gets the annotation ``muster.dev/cancelled`` (when the cancel was
asked for) and a Normal Event ``LeftInPlace`` that tells its owner what is left and what to do with it.

The object keeps Muster's job id on it, and its uid is its job's: the gateway never takes it for a new
submission, whatever its owner changes in it. To run it again, its owner deletes it and creates it again, held
back (a new object, so a new job).

An object Muster created (a job submitted with its manifest, or Muster's own Job) is deleted as before, and a
group of plain pods leaves nothing: its pods are deleted, as a preemption deletes them (a released pod cannot
be gated again).

Both writes come after the stop is reported and are best effort: the job is over whatever becomes of them. A
crash before them leaves the object unmarked with its stop's annotations, and a restarted dispatcher resumes
the stop, which reports again (a repeat the queue manager ignores) and then marks it. A refused Event (the
dispatcher's role needs ``create`` on ``events``) is only logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from services.dispatcher.book import CANCELLED, Preemption
from services.runtime.kube import EVENTS, KubeObject, KubeRest
from services.runtime.kube.errors import is_already_exists, status_of

log = logging.getLogger(__name__)

#: the preemption reason of a cancel (``JobPreemptionRequested.reason``)
CANCEL = "cancelled"
#: the reason of the Event on an object left in place
LEFT_IN_PLACE = "LeftInPlace"
COMPONENT = "muster-dispatcher"
_MAX_NAME = 200  # of the object's name in the Event's name (an Event's name is a DNS subdomain: 253 at most)


def is_cancel(pre: Preemption) -> bool:
    """Whether the stop is a cancel (the job is over), not a preemption or a release of an idle session."""
    return pre.reason == CANCEL and not pre.requeue


def cancel_mark(pre: Preemption) -> dict[str, str]:
    """The annotation a cancelled object is left with: when the cancel was asked for."""
    return {CANCELLED: pre.requested_at.isoformat()}


@dataclass(frozen=True, slots=True)
class LeftObject:
    """The object a cancel left in place, as an Event names it (``involvedObject``)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    suspended: bool  # held back by ``spec.suspend``; else its pods come back gated

    @classmethod
    def of(cls, obj: KubeObject, api_version: str, kind: str, *, suspended: bool) -> LeftObject:
        meta = obj.get("metadata") or {}
        return cls(api_version, kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                   str(meta.get("uid") or ""), suspended)


def left_message(left: LeftObject) -> str:
    """What the owner reads in ``kubectl describe``: what is left, that Muster is done with it, what to do."""
    held = ("suspended" if left.suspended else
            "its pods deleted (they come back held by the scheduling gate muster.dev/admission, on no node)")
    return (f"its Muster job was cancelled: this {left.kind} is left in place, {held}, and holds no GPU; Muster "
            f"will not run it again (annotation {CANCELLED}). Delete it when you are done with it; to run it again, "
            "delete it and create it again held back: it is queued as a new job")


def event_name(left: LeftObject) -> str:
    """One name per object, so a repeated stop (a restarted dispatcher) posts no second Event."""
    uid = "".join(c for c in left.uid.lower() if c.isascii() and c.isalnum())[:8] or "object"
    return f"{left.name[:_MAX_NAME].rstrip('-.')}.{uid}.left-in-place"


def left_event(left: LeftObject, now: datetime) -> KubeObject:
    """The core/v1 Event about ``left`` (shown by ``kubectl describe`` of that object)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(left), "namespace": left.namespace},
        "involvedObject": {"apiVersion": left.api_version, "kind": left.kind, "name": left.name,
                           "namespace": left.namespace, "uid": left.uid},
        "type": "Normal", "reason": LEFT_IN_PLACE, "message": left_message(left),
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT, "reportingInstance": COMPONENT,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


async def tell(rest: KubeRest, left: LeftObject, now: datetime) -> bool:
    """Post the Event about ``left``; whether it is there now (posted before counts). A refusal is logged."""
    try:
        await rest.create(EVENTS, left_event(left, now), left.namespace)
    except Exception as exc:
        if is_already_exists(exc):
            return True
        why = "the dispatcher may not create events" if status_of(exc) == 403 else repr(exc)
        log.warning("the Event on the cancelled %s %s/%s was not posted: %s", left.kind, left.namespace, left.name,
                    why)
        return False
    return True
