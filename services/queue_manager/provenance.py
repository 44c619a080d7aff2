"""Whether an intent's tenant is proven by where it came from. Pure: no I/O.

On an authenticated cluster (``services.runtime.kafka.acls``) only tenant ``t``'s principal may write
``muster.intents.<t>.v1``, so a record read there was written by ``t`` (or by the admin). Its claims
are accepted only as ``t``'s: a ``SubmitJob`` must name tenant ``t``; a request about an existing job
(cancel, suspend, resume, priority, scale) must be about one of ``t``'s jobs. Anything else is a
forgery and is dead-lettered with the reason ``tenant_not_proven``, before it touches the state.

The shared ``muster.intents.v1`` is written by the gateway alone (which authenticates HTTP users and
checks their tenant itself) and the admin; its intents carry the gateway's word. On the open,
unauthenticated development broker anyone may write any topic, and nothing here proves anything.

A ``SubmitJob`` read from a tenant's topic is also held to the rule the gateway and the client apply
(``services.spec.secret_env``): a plain environment value that looks like a secret is dead-lettered with
``plain_secret_env``, so a tenant's own producer cannot put a secret in clear text on the cluster's
topics beyond its own. The shared topic's submissions come from the gateway, which already refused them
(and whose recurring firings of definitions made before the rule must keep firing).

A request about a job this instance does not hold passes: it is ignored anyway (an unknown or finished
job), or it belongs to another shard's pool, whose instance judges it.
"""

from __future__ import annotations

from schemas.envelope import Message
from schemas.intents import SubmitJob
from schemas.topics import intents_topic_tenant
from services.queue_manager.state import QueueState
from services.spec.secret_env import spec_plain_secrets

TENANT_NOT_PROVEN = "tenant_not_proven"
PLAIN_SECRET_ENV = "plain_secret_env"


def plain_secret_refusal(topic: str, message: Message) -> str | None:
    """Why a submission on a tenant's intents topic is refused for carrying secret-looking plain values."""
    if intents_topic_tenant(topic) is None or not isinstance(message, SubmitJob):
        return None
    found = spec_plain_secrets(message.spec)
    return "; ".join(p.message() for p in found)[:2000] if found else None


def unproven(qs: QueueState, topic: str, message: Message) -> str | None:
    """Why ``message`` read from ``topic`` may not be accepted (None: its tenant is proven, or the topic
    proves nothing and asks nothing)."""
    tenant = intents_topic_tenant(topic)
    if tenant is None:
        return None
    if isinstance(message, SubmitJob):
        if not qs.config.owns_queue(message.spec.queue):
            return None  # another shard's submission: that shard refuses it
        if message.tenant != tenant:
            return f"a submission for tenant {message.tenant!r} on {topic}, which only tenant {tenant!r} writes"
        return None
    job_id = getattr(message, "job_id", None)
    entry = qs.jobs.get(job_id) if isinstance(job_id, str) else None
    if entry is None:
        return None
    owner = entry.submission.tenant
    if owner != tenant:
        return f"{message.TYPE} of job {job_id} (tenant {owner!r}) on {topic}, which only tenant {tenant!r} writes"
    return None
