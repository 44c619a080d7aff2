"""Whether an intent's tenant is proven by where it came from. Pure: no I/O.

On an authenticated cluster (``services.runtime.kafka.acls``) only tenant ``t``'s principal may write
``muster.intents.<t>.v1``, so a record read there was written by ``t`` (or by the admin). Its claims
are accepted only as ``t``'s, and the job ids it names are judged by their tenant tag
(``services.spec.ids``), never by whether the job exists, so that nothing here tells ``t`` whether another
tenant's job exists:

- a ``SubmitJob`` must name tenant ``t`` and a job id with ``t``'s tag, so no tenant can claim an id
  another tenant will use (a keyed submission's id is predictable); while another known tenant's name gives
  the same tag (``tag_sharers``), none of ``t``'s is accepted there;
- a request (cancel, suspend, resume, priority, scale) about a job id with another tenant's tag is refused
  whether or not that job exists, unless the job is one of ``t``'s (an id made before ids carried tags may
  look tagged by chance);
- a request about an id with ``t``'s tag, or with no tag (made before ids carried tags), passes when the job
  is ``t``'s or this instance does not hold it: it is then ignored (an unknown or finished job) or belongs to
  another shard's pool, whose instance judges it. One about a job this instance holds for another tenant is
  dropped without a word (``ignored``), as one about an unknown job is, so the two look the same.

What ``unproven`` refuses is a forgery: it is dead-lettered with the reason ``tenant_not_proven``, before it
touches the state, with a detail that names only what the writer sent.

The shared ``muster.intents.v1`` is written by the gateway alone (which authenticates HTTP users, checks
their tenant and mints the ids itself) and the admin; its intents carry the gateway's word. On the open,
unauthenticated development broker anyone may write any topic, and nothing here proves anything.

A ``SubmitJob`` read from a tenant's topic is also held to the rule the gateway and the client apply
(``services.spec.secret_env``): a plain environment value that looks like a secret is dead-lettered with
``plain_secret_env``, so a tenant's own producer cannot put a secret in clear text on the cluster's
topics beyond its own. The shared topic's submissions come from the gateway, which already refused them
(and whose recurring firings of definitions made before the rule must keep firing).

A sharded instance passes over a request about a job it does not hold before decoding it
(``services.queue_manager.routing``), so with several shards only the shard holding a job judges requests
about it: one with another tenant's tag about a job no shard holds is passed over by all, not dead-lettered,
and so still tells that such a job does not exist (``docs/limitations.md``). One instance judges every id.

``TagWatch`` finds tenants of the configuration whose names give one tag, for the service to report.
"""

from __future__ import annotations

from schemas.config import QueueConfig, TenantConfig
from schemas.envelope import Message
from schemas.intents import SubmitJob
from schemas.topics import intents_topic_tenant
from services.queue_manager.queue_state import QueueState
from services.spec.config_items import ConfigItems
from services.spec.ids import id_tenant_tag, job_id_of_tenant, tag_sharers, tenant_tag
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
        return _unproven_submission(qs, topic, tenant, message)
    job_id = getattr(message, "job_id", None)
    if not isinstance(job_id, str) or _owner(qs, job_id) == tenant:
        return None
    tag = id_tenant_tag(job_id)
    if tag is not None and tag != tenant_tag(tenant):
        return (f"{message.TYPE} of job {job_id}, an id of another tenant's, on {topic}, which only tenant "
                f"{tenant!r} writes")
    return None


def ignored(qs: QueueState, topic: str, message: Message) -> str | None:
    """Why a request read from a tenant's topic that ``unproven`` let pass is dropped without a dead letter:
    it is about a job this instance holds for another tenant (None: it is not). An unknown job's request is
    dropped the same way later, so the writer cannot tell them apart."""
    tenant = intents_topic_tenant(topic)
    job_id = getattr(message, "job_id", None)
    if tenant is None or isinstance(message, SubmitJob) or not isinstance(job_id, str):
        return None
    owner = _owner(qs, job_id)
    if owner is None or owner == tenant:
        return None
    return f"{message.TYPE} of job {job_id} on {topic}: not a job of tenant {tenant!r}"


def known_tenants(config: ConfigItems) -> set[str]:
    """Every tenant the configuration knows: those defined, and those queues belong to."""
    return {*config.tenants, *(q.tenant for q in config.queues.values())}


def configured_tenant(message: Message | None) -> str | None:
    """The tenant a configuration record defines, or gives a queue to; None for any other record."""
    item = getattr(message, "item", None)
    if isinstance(item, TenantConfig):
        return item.name
    if isinstance(item, QueueConfig):
        return item.tenant
    return None


class TagWatch:
    """Tells, once per tenant, when a tenant the configuration names has the tag of another it knows: their
    job ids cannot be told apart, and the tenant topics of both refuse submissions until one is renamed."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def note(self, config: ConfigItems, message: Message | None) -> list[str]:
        """What to report after ``message`` was folded into ``config``: one line per pair newly found."""
        tenant = configured_tenant(message)
        if tenant is None or tenant in self._seen:
            return []
        self._seen.add(tenant)
        return [f"tenants {tenant!r} and {other!r} have the same job id tag {tenant_tag(tenant)}: their ids cannot "
                "be told apart, so submissions on either one's intents topic are dead-lettered; rename one of them"
                for other in tag_sharers(tenant, known_tenants(config))]


def _owner(qs: QueueState, job_id: str) -> str | None:
    entry = qs.jobs.get(job_id)
    return None if entry is None else entry.submission.tenant


def _unproven_submission(qs: QueueState, topic: str, tenant: str, message: SubmitJob) -> str | None:
    if not qs.config.owns_queue(message.spec.queue):
        return None  # another shard's submission: that shard refuses it
    if message.tenant != tenant:
        return f"a submission for tenant {message.tenant!r} on {topic}, which only tenant {tenant!r} writes"
    if not job_id_of_tenant(message.job_id, tenant):
        return (f"a submission as job {message.job_id} on {topic}: the ids of tenant {tenant!r}'s jobs carry its tag "
                f"(<name>-{tenant_tag(tenant)}-<suffix>, made by services.spec.ids or KafkaSubmitter)")
    if tag_sharers(tenant, known_tenants(qs.config)):
        return (f"a submission on {topic}: tenant {tenant!r}'s job ids cannot be told apart from another tenant's "
                "(their names give the same tag), so none is accepted here until an administrator renames one")
    return None
