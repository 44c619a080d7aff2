"""The Kubernetes contract: every label, annotation and resource name Muster writes on, or reads from,
Kubernetes objects. Like the topics, it is a public interface (a labelled ``suspend: true`` Job is a
submission; a workload writes ``muster.dev/checkpointed``), so it lives beside them and every service,
kubesim and the chaos harness import it from here."""

from __future__ import annotations

MUSTER_PREFIX = "muster.dev/"
#: the value of ``DELETED_BY`` when Muster deletes a Job
MUSTER = "muster"

# -- resources and well-known labels --------------------------------------------------------------
GPU_RESOURCE = "nvidia.com/gpu"  # the extended resource, and the key of the GPU nodes' taint
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA's GPU feature discovery
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
#: MIG slices, as the NVIDIA device plugin's mixed strategy advertises them: nvidia.com/mig-<profile>
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
#: KAI-Scheduler's way of asking for a fraction of one GPU: a pod annotation, e.g. gpu-fraction: "0.5"
GPU_FRACTION = "gpu-fraction"

# -- nodes ------------------------------------------------------------------------------------------
GPU_TYPE = "muster.dev/gpu-type"  # node label of the GPU type (Jobs select by it); a Job annotation too
NODE_GROUP = "muster.dev/node-group"
#: on a node the cloud made for a ProvisioningRequest: the request's name (``<namespace>.<name>`` is not needed:
#: the request's name holds the job and attempt, unique across namespaces)
PROVISIONING_REQUEST = "muster.dev/provisioning-request"
#: the taint with which the dispatcher marks a bought node to give back: nothing new lands there, and the
#: cluster's autoscaler removes it
SCALE_DOWN = "muster.dev/scale-down"
POOL = "muster.dev/pool"
NVLINK_GROUPS = "muster.dev/nvlink-groups"  # node annotation: the NVLink / NUMA groups of its GPUs
#: node label: how many of its nvidia.com/gpu may hold fractional pods (GPU sharing); absent: none
SHARED_GPUS = "muster.dev/shared-gpus"
#: on a fractional job's pods: JSON list, position = completion index, of the shared GPU (index among the
#: node's shared GPUs) each pod was planned onto, beside ``muster.dev/placement``
GPU_SLOTS = "muster.dev/gpu-slots"
TOPOLOGY_PREFIX = "topology.muster.dev/"
BLOCK = TOPOLOGY_PREFIX + "block"
RACK = TOPOLOGY_PREFIX + "rack"

# -- a Job Muster runs: identity and placement (labels and annotations) -----------------------------
JOB_ID = "muster.dev/job-id"
ATTEMPT = "muster.dev/attempt"
QUEUE = "muster.dev/queue"  # also the label that makes a user's suspended Job a submission
CLUSTER = "muster.dev/cluster"
PLACEMENT = "muster.dev/placement"  # JSON list: the node of every completion index
GANG_SIZE = "muster.dev/gang-size"

# -- a user's suspended Job: how the gateway reads it as a submission -------------------------------
PRIORITY_CLASS = "muster.dev/priority-class"
RUNTIME_ESTIMATE = "muster.dev/runtime-estimate"
PREEMPTIBLE = "muster.dev/preemptible"
#: a duration: the job's ``idle_timeout_s`` (on a kube-native object; the dispatcher writes it on every workload
#: object it releases, where the node watcher reads it)
IDLE_TIMEOUT = "muster.dev/idle-timeout"
#: comma-separated names of environment entries whose plain values only look like secrets (``not_secret``)
PLAIN_ENV = "muster.dev/plain-env"
#: in a job spec's annotations: the user-created suspended Job (``<namespace>/<name>``) to release
SOURCE_JOB = "muster.dev/source-job"

# -- every workload kind: holding pods back until admission, and knowing them afterwards ------------
#: the scheduling gate Muster's pods are created with: the dispatcher sets each pod's planned node
#: (``nodeSelector`` on the hostname, allowed while a pod is gated) and then removes the gate
ADMISSION_GATE = "muster.dev/admission"
#: label on a pod: the role (pod set) of its job it belongs to
ROLE = "muster.dev/role"
#: annotation on a workload object Muster released: ``<kind>/<name>`` of that very object (a controller may
#: copy its object's annotations onto the objects it makes; only the one named here is the job's)
WORKLOAD = "muster.dev/workload"
#: label on the pods of a group of plain pods: the group's name (the pods sharing it are one job)
POD_GROUP = "muster.dev/pod-group"
#: annotation on each pod of a group: how many pods the group has
POD_GROUP_SIZE = "muster.dev/pod-group-size"

# -- the dispatcher's memory on its Jobs (the node-state watcher reads some) ------------------------
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


# -- capacity that grows: cluster-autoscaler's ProvisioningRequest ------------------------------------
PROVISIONING_API = "autoscaling.x-k8s.io/v1"
PROVISIONING_KIND = "ProvisioningRequest"
#: the class Muster asks for: all of the nodes or none, kept (booked) for the pods for a while once made
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: the request's parameter that names the node group to grow (Muster decided which one is cheapest)
NODE_GROUP_PARAMETER = "muster.dev/node-group"
