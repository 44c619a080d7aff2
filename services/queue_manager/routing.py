"""Which consumed records a sharded queue manager can pass over without decoding them.

Every shard reads every input (each has its own consumer group), but acts only on its own pools' jobs.
Fully decoding and validating another shard's submission and run events costs a shard about as much as
a third of one of its own jobs, so with n shards most of each one's intake would be other shards' work.
A record is passed over only when a look at its key, or at the raw JSON of its payload, proves that the
shard would ignore it after decoding:

- a submission (``SubmitJob``) whose ``spec.queue`` belongs to another shard's pool;
- any other intent, run event or dispatch report about a job this shard does not hold (``qs.jobs``):
  a job's events follow its submission on the same partition, so a job of this shard is known by then.
  Except a request on a tenant's own intents topic about an id that carries another tenant's tag: every
  shard decodes it and dead-letters it (``provenance``), whether or not some shard holds that job, so that
  which records are dead-lettered never tells a tenant whether another tenant's id exists.

Anything that does not parse, or lacks the fields looked at, is decoded as usual, so a malformed record
still reaches a dead-letter topic (from the shard that owns the queue it names, or from every shard).
An instance that owns every pool passes nothing over. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import orjson

from schemas.intents import SubmitJob
from schemas.topics import intents_topic_tenant, is_intents_topic
from services.queue_manager.queue_state import QueueState
from services.spec.ids import id_tenant_tag, tenant_tag


def passes_over(qs: QueueState, topic: str, key: bytes | None, value: bytes | None) -> bool:
    """Whether this shard would ignore the record anyway (see the module docstring)."""
    if not qs.config.shard.sharded or value is None:
        return False
    if not is_intents_topic(topic):
        return key is not None and key.decode(errors="replace") not in qs.jobs
    try:
        data: Any = orjson.loads(value)
        payload = data["payload"]
        if data["type"] == SubmitJob.TYPE:
            queue = payload["spec"]["queue"]
            return isinstance(queue, str) and not qs.config.owns_queue(queue)
        job_id = payload["job_id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return False
    if not isinstance(job_id, str):
        return False
    writer = intents_topic_tenant(topic)
    tag = id_tenant_tag(job_id)
    if writer is not None and tag is not None and tag != tenant_tag(writer):
        return False  # another tenant's id: judged (and refused) alike whether some shard holds it or not
    return job_id not in qs.jobs
