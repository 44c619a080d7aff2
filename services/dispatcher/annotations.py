"""Annotations the dispatcher writes on (and reads back from) the Jobs it manages.

They make the Jobs themselves the dispatcher's durable memory: after a restart it lists its Jobs
and knows each one's decision, revision, restart budget, pending restart and preemption handshake.
The node-state watcher reads ``DELETED_BY`` / ``DELETE_REASON`` / ``PREEMPT_REQUESTED`` too.
"""

from __future__ import annotations

from services.runtime.kube.render import ATTEMPT, CLUSTER, GANG_SIZE, JOB_ID, PLACEMENT, QUEUE

#: the revision of the attempt: 0 for the first Job, n for the n-th re-creation (restart or rescale)
REVISION = "muster.dev/revision"
#: whole-gang restarts done so far in this attempt, and how many the spec allows
RESTARTS = "muster.dev/restarts"
MAX_RESTARTS = "muster.dev/max-restarts"
#: event id of the decision this Job carries out (JobAdmitted or JobScaled)
DECISION_EVENT = "muster.dev/decision-event"
#: correlation id of the job's decisions, so later reports join the same trace
CORRELATION = "muster.dev/correlation-id"
#: a restart of this failed Job is due at this time (ISO 8601)
RESTART_AT = "muster.dev/restart-at"
#: the preemption handshake: when it began, why, whether the job comes back, its grace period, its decision
PREEMPT_REQUESTED = "muster.dev/preempt-requested"
PREEMPT_REASON = "muster.dev/preempt-reason"
PREEMPT_REQUEUE = "muster.dev/preempt-requeue"
PREEMPT_GRACE = "muster.dev/preempt-grace-seconds"
PREEMPT_EVENT = "muster.dev/preempt-event"
#: set to "true" on the Job by the workload once its checkpoint is written
CHECKPOINTED = "muster.dev/checkpointed"
#: written just before Muster deletes a Job
DELETED_BY = "muster.dev/deleted-by"
DELETE_REASON = "muster.dev/delete-reason"
#: on a suspended new revision: the name of the revision it replaces; it is released once that one's pods are gone
REPLACES = "muster.dev/replaces"
#: in a job spec's annotations: the user-created suspended Job (``<namespace>/<name>``) to release
SOURCE_JOB = "muster.dev/source-job"

MUSTER = "muster"

__all__ = [
    "ATTEMPT", "CHECKPOINTED", "CLUSTER", "CORRELATION", "DECISION_EVENT", "DELETED_BY", "DELETE_REASON",
    "GANG_SIZE", "JOB_ID", "MAX_RESTARTS", "MUSTER", "PLACEMENT", "PREEMPT_EVENT", "PREEMPT_GRACE",
    "PREEMPT_REASON", "PREEMPT_REQUESTED", "PREEMPT_REQUEUE", "QUEUE", "REPLACES", "RESTARTS", "RESTART_AT",
    "REVISION",
    "SOURCE_JOB",
]
