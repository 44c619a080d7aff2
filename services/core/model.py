"""Value types of the scheduling core: jobs, nodes, queues, decisions, pending reasons.

Everything here is an immutable, standard-library-only dataclass. Units:
GPUs are whole devices, CPU is in millicores, memory in MiB, time in seconds
(``now`` is always passed in by the caller; the core never reads a clock).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum, StrEnum
from fractions import Fraction
from types import MappingProxyType

ANY_GPU = ""  # a job whose gpu_type is ANY_GPU accepts any GPU type

#: Topology levels between nodes, from widest to narrowest. A gang never spans clusters.
TOPOLOGY_LEVELS: tuple[str, ...] = ("cluster", "zone", "block", "rack", "node")

_EMPTY: Mapping[str, str] = MappingProxyType({})
_EMPTY_COUNTS: Mapping[str, int] = MappingProxyType({})


#: a GPU type's quota resource is this prefix and the type (the wire names them the same way:
#: ``schemas.config.gpu_resource``; the core imports nothing but the standard library)
GPU_PREFIX = "gpu:"


def gpu_resource(gpu_type: str) -> str:
    """The quota resource name of one GPU type (flavor), e.g. ``gpu:a100``."""
    return f"{GPU_PREFIX}{gpu_type}"


def is_gpu_resource(resource: str) -> bool:
    """Whether a quota resource name is a GPU type's (not ``cpu`` or ``memory``). The cycle's own loops test
    ``startswith(GPU_PREFIX)`` inline: a call per resource there shows in the queue manager's call-count
    guard (``tests/bench/test_queue_manager_cost.py``)."""
    return resource.startswith(GPU_PREFIX)


#: A quota amount: whole units (int) or, for GPU sharing, an exact share of GPUs (Fraction).
Amount = int | Fraction

#: A fraction of one GPU a pod may ask for: a multiple of FRACTION_STEP below one GPU.
FRACTION_STEP = Fraction(1, 8)
#: Compute slices of a MIG-capable GPU (A100, H100, H200, B200): a ``<g>g.<mem>`` slice is g of them.
MIG_COMPUTE_SLICES = 7

_MIG_PROFILE = re.compile(r"^([1-9][0-9]?)g\.[0-9]+gb(\+[a-z0-9]+)?$")


def valid_fraction(share: Fraction) -> bool:
    """Whether ``share`` is a fraction of one GPU a pod may ask for (1/8, 1/4, ..., 7/8)."""
    return 0 < share < 1 and (share / FRACTION_STEP).denominator == 1


def mig_share(profile: str, slices: int = MIG_COMPUTE_SLICES) -> Fraction:
    """The share of a whole GPU one MIG slice of ``profile`` is charged: its compute slices out of the
    GPU's ``slices`` (``1g.10gb`` of an A100 80GB: 1/7; ``3g.40gb``: 3/7; ``7g.80gb``: one GPU)."""
    m = _MIG_PROFILE.match(profile)
    if m is None:
        raise ValueError(f"not a MIG profile: {profile!r}")
    return min(Fraction(int(m.group(1)), slices), Fraction(1))


def mig_resource(profile: str) -> str:
    """The extended resource the NVIDIA device plugin (mixed strategy) advertises for a MIG profile."""
    return f"nvidia.com/mig-{profile}"


CPU = "cpu"  # millicores
MEMORY = "memory"  # MiB


class TopologyMode(str, Enum):
    REQUIRED = "required"
    PREFERRED = "preferred"


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """All pods of a gang inside one domain of ``level`` (required) or as few as possible (preferred)."""

    level: str  # one of TOPOLOGY_LEVELS except "cluster" (a gang is always inside one cluster)
    mode: TopologyMode = TopologyMode.REQUIRED


@dataclass(frozen=True, slots=True)
class Role:
    """A companion role of a job: ``replicas`` pods of one shape that start with the job's main role and
    are placed beside it in its cluster (an MPI launcher, a Ray head or second worker group, an LWS
    leader, a submitter). Fixed in size; whole GPUs of the job's GPU type, or none."""

    name: str
    replicas: int = 1
    gpus_per_pod: int = 0
    cpu_m: int = 0
    memory_mb: int = 0
    #: the role's pods inside the domain at this level where the main role's pods are (None: anywhere in
    #: the job's cluster)
    topology: TopologyRequest | None = None

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_pod


@dataclass(frozen=True, slots=True)
class Job:
    """A gang of ``replicas`` identical pods (the main role); elastic when ``min_replicas < replicas``.

    A job of several roles has ``companions`` too: fixed-size pod sets admitted, charged, placed,
    preempted and estimated together with the main role (all or nothing). ``role`` names the main role
    ("" for a job of one role)."""

    job_id: str
    queue: str
    submit_time: float
    replicas: int = 1
    gpus_per_pod: int = 1
    gpu_type: str = ANY_GPU
    cpu_m: int = 0
    memory_mb: int = 0
    min_replicas: int | None = None  # None: not elastic (== replicas)
    priority: int = 0
    priority_class: str = ""
    user: str = ""
    tenant: str = ""
    runtime_estimate: float | None = None  # seconds; the policy may use only this, never the truth
    preemptible: bool = True
    checkpointable: bool = False
    grace_period_s: float = 30.0
    topology: TopologyRequest | None = None
    cluster: str | None = None  # pin to one cluster
    node_selector: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    tolerations: frozenset[str] = frozenset()  # taint keys this job tolerates
    max_wait_s: float | None = None
    max_runtime_s: float | None = None
    attempt: int = 0
    name: str = ""  # the name its submitter gave it: runtimes are learnt per name stem (see ``runtimes``)
    attained_gpu_s: float = 0.0  # GPU-seconds of service its earlier attempts received
    queued_at: float | None = None  # when it last entered the queue (None: at submit_time)
    last_run_s: float = 0.0  # how long its latest attempt ran before it was stopped
    #: nodes where earlier attempts failed for infrastructure reasons: placed elsewhere unless nothing else fits
    avoid_nodes: frozenset[str] = frozenset()
    #: GPU sharing (``gpus_per_pod`` is then 0). Without ``mig_profile``: the fraction of one shareable GPU
    #: each pod takes (a multiple of FRACTION_STEP). With it: what each pod's MIG slices are charged in
    #: whole GPUs (default ``mig_per_pod * mig_share(mig_profile)``), the slices counted per profile.
    gpu_share: Amount = 0  # a Fraction when set (0 stays an int: cheap to hash in the cycle's cache keys)
    mig_profile: str = ""
    mig_per_pod: int = 0  # MIG slices of ``mig_profile`` per pod
    role: str = ""  # the name of the main role (a job of several roles)
    companions: tuple[Role, ...] = ()
    #: a serving or interactive job (a Deployment, a StatefulSet): it never completes, and its size is its
    #: owner's to change while it runs; growing it to the size asked is always worth a resize
    serving: bool = False
    #: whole GPUs of the companion roles (``companion_gpus``), summed once
    _companion_gpus: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.companions:
            object.__setattr__(self, "_companion_gpus", sum(c.replicas * c.gpus_per_pod for c in self.companions))
            names = [c.name for c in self.companions]
            if "" in names or self.role in names or len(set(names)) != len(names):
                raise ValueError("companion roles need names of their own, unique and unlike the main role's")
            if (self.gpu_share or self.mig_profile) and any(c.gpus_per_pod for c in self.companions):
                raise ValueError("the companions of a job that shares GPUs ask for no GPUs")
        if self.mig_profile:
            if self.gpus_per_pod or self.mig_per_pod < 1 or self.gpu_share < 0:
                raise ValueError("a MIG job asks for mig_per_pod >= 1 slices and no whole GPUs")
            if not self.gpu_share:  # charged by the standard rule unless its GPU type says otherwise
                object.__setattr__(self, "gpu_share", self.mig_per_pod * mig_share(self.mig_profile))
        elif self.gpu_share and (self.gpus_per_pod or not valid_fraction(Fraction(self.gpu_share))):
            raise ValueError(f"a fractional job asks for a multiple of {FRACTION_STEP} below 1 GPU, no whole GPUs")

    @property
    def fraction(self) -> Amount:
        """The fraction of one shared GPU each pod takes (0: not a fractional job)."""
        return 0 if self.mig_profile else self.gpu_share

    @property
    def shares_gpus(self) -> bool:
        """A fractional or MIG job: it holds parts of GPUs, never whole ones."""
        return bool(self.gpu_share or self.mig_profile)

    @property
    def gpu_amount(self) -> Amount:
        """GPUs each pod is charged for (quota, fair share, GPU-hours): whole GPUs or its share."""
        return self.gpus_per_pod or self.gpu_share  # never both (``__post_init__``)

    @property
    def waiting_since(self) -> float:
        return self.submit_time if self.queued_at is None else self.queued_at

    @property
    def min_size(self) -> int:
        return self.replicas if self.min_replicas is None else self.min_replicas

    @property
    def elastic(self) -> bool:
        return self.min_size < self.replicas

    @property
    def needs_gpus(self) -> bool:
        """Whether any pod of the job asks for a GPU (whole, shared or a MIG slice)."""
        return bool(self.gpus_per_pod or self.gpu_share or self.mig_profile
                    or (self.companions and self.companion_gpus))

    @property
    def companion_gpus(self) -> int:
        """Whole GPUs of the companion roles (they never shrink or grow)."""
        return self._companion_gpus

    @property
    def total_gpus(self) -> int:
        """Whole GPUs of the whole job at full size, every role."""
        if self.companions:
            return self.replicas * self.gpus_per_pod + self.companion_gpus
        return self.replicas * self.gpus_per_pod

    def gpus_at(self, pods: int) -> int:
        """Whole GPUs of the job with ``pods`` pods in its main role."""
        return pods * self.gpus_per_pod + self.companion_gpus if self.companions else pods * self.gpus_per_pod

    def amount_at(self, pods: int) -> Amount:
        """GPUs the job is charged with ``pods`` pods in its main role: whole GPUs or shares, every role."""
        per_pod = self.gpus_per_pod or self.gpu_share
        return pods * per_pod + self.companion_gpus if self.companions else pods * per_pod

    @property
    def min_gpus(self) -> int:
        """Whole GPUs the job needs to start: its main role at its minimum (at least one pod), every companion."""
        return self.gpus_at(max(self.min_size, 1))

    def companion_view(self, c: Role) -> Job:
        """A companion role seen as a fixed-size job of its own (to place it): the job's identity, queue,
        node selector and tolerations, the companion's pods."""
        return replace(self, replicas=c.replicas, min_replicas=None, gpus_per_pod=c.gpus_per_pod, cpu_m=c.cpu_m,
                       memory_mb=c.memory_mb, topology=c.topology, role=c.name, companions=(), gpu_share=0,
                       mig_profile="", mig_per_pod=0)

    def shape(self, role: str) -> tuple[int, int, int]:
        """(GPUs, CPU millicores, MiB) of one pod of ``role`` ("" or the main role's name: the main role)."""
        if role and role != self.role:
            for c in self.companions:
                if c.name == role:
                    return c.gpus_per_pod, c.cpu_m, c.memory_mb
        return self.gpus_per_pod, self.cpu_m, self.memory_mb

    @property
    def selector_key(self) -> tuple[tuple[str, str], ...]:
        """The node selector as a sorted tuple: a cache key (empty without a selector)."""
        return tuple(sorted(self.node_selector.items())) if self.node_selector else ()

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` matches the job's node selector."""
        return all(labels.get(k) == v for k, v in self.node_selector.items())


@dataclass(frozen=True, slots=True)
class Node:
    """One schedulable machine as the node-state watcher reports it."""

    name: str
    cluster: str
    gpu_type: str
    gpus: int  # allocatable GPUs
    cpu_m: int = 0  # allocatable CPU; 0 means "not tracked"
    memory_mb: int = 0  # allocatable memory; 0 means "not tracked"
    topology: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # zone / block / rack
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # for node selectors, pools
    nvlink_groups: tuple[int, ...] = ()  # sizes of the GPU groups inside the node, e.g. (4, 4)
    taints: frozenset[str] = frozenset()  # taint keys; a job must tolerate every one
    healthy: bool = True
    schedulable: bool = True
    unhealthy_since: float | None = None  # when it stopped being healthy (None: healthy, or not known)
    #: how many of its ``gpus`` may be shared by fractional pods (a shared GPU holding fractions takes
    #: no whole-GPU pod until its last fraction leaves)
    shared_gpus: int = 0
    #: MIG slices per profile (the ``nvidia.com/mig-<profile>`` resources), on GPUs not counted in ``gpus``
    mig: Mapping[str, int] = field(default_factory=lambda: _EMPTY_COUNTS)

    def domain(self, level: str) -> tuple[str, ...]:
        """The identity of this node's domain at a topology level, e.g. ("c1", "z1", "b2")."""
        path = [self.cluster]
        for lvl in TOPOLOGY_LEVELS[1:]:
            if lvl == "node":
                path.append(self.name)
            else:
                path.append(self.topology.get(lvl, ""))
            if lvl == level:
                break
        return tuple(path)


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota of one resource for one queue: nominal, how much more it may borrow, how much it may lend."""

    nominal: int
    borrowing_limit: int | None = None  # None: may borrow without limit from its cohort
    lending_limit: int | None = None  # None: all unused nominal can be lent


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    cohort: str | None = None
    weight: float = 1.0  # fair-share weight
    quotas: Mapping[str, ResourceQuota] = field(default_factory=lambda: MappingProxyType({}))
    user_limit_gpus: int | None = None  # per-user GPU cap inside the queue
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class CohortSpec:
    name: str
    parent: str | None = None
    weight: float = 1.0


# ---------------------------------------------------------------- placements and decisions


@dataclass(frozen=True, slots=True)
class NodeAssignment:
    """``pods`` pods of a job on ``node``; ``groups[i]`` is the NVLink group index of pod i (or -1).

    A fractional job's pods each take ``fraction`` of the shared GPU ``slots[i]`` (an index among the
    node's shared GPUs); a MIG job's pods each take ``mig_per_pod`` slices of ``mig_profile``.
    """

    node: str
    pods: int
    groups: tuple[int, ...] = ()
    fraction: Amount = 0  # a Fraction for a fractional job
    slots: tuple[int, ...] = ()
    mig_profile: str = ""
    mig_per_pod: int = 0
    role: str = ""  # a companion role's name; "" for the job's main role


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job's pods go, inside one cluster: its main role's pods, then its companions' (``role`` set)."""

    cluster: str
    nodes: tuple[NodeAssignment, ...]

    @property
    def pods(self) -> int:
        """Pods of the main role (what ``replicas`` counts)."""
        return sum(a.pods for a in self.nodes if not a.role)

    @property
    def main(self) -> tuple[NodeAssignment, ...]:
        """The main role's assignments."""
        return tuple(a for a in self.nodes if not a.role)

    @property
    def companions(self) -> tuple[NodeAssignment, ...]:
        return tuple(a for a in self.nodes if a.role)

    def with_main(self, main: tuple[NodeAssignment, ...]) -> Placement:
        """This placement with the main role's assignments replaced (a resize keeps the companions)."""
        return Placement(self.cluster, (*main, *self.companions))

    def main_shrunk(self, replicas: int, kept: Mapping[str, int] | None = None) -> Placement:
        """This placement with its main role cut to ``replicas`` pods. ``kept`` (node -> pods still there) says
        where the pods that stay run: those nodes keep up to that many first, then the plan's order fills
        the rest; None keeps the plan's first ``replicas`` pods."""
        main = self.main
        quota = [min(a.pods, kept.get(a.node, 0)) for a in main] if kept is not None else [0] * len(main)
        left = replicas - sum(quota)
        if left < 0:  # more kept than wanted: keep the plan's first ones
            quota, left = [0] * len(main), replicas
        for i, a in enumerate(main):
            more = min(a.pods - quota[i], left)
            quota[i] += more
            left -= more
        cut = tuple(replace(a, pods=k, groups=a.groups[:k], slots=a.slots[:k])
                    for a, k in zip(main, quota, strict=True) if k > 0)
        return self.with_main(cut)


@dataclass(frozen=True, slots=True)
class RunningJob:
    """An admitted job holding capacity; ``terminating`` while a preemption waits for its grace period."""

    job: Job
    placement: Placement
    replicas: int
    start_time: float
    borrowed: bool = False
    terminating: bool = False
    bought: bool = False  # runs on nodes bought for it: outside its queue's quota (``Admit.bought``)
    served_gpu_s: float = 0.0  # GPU-seconds this attempt received before its current size (``sized_at``)
    sized_at: float | None = None  # when it took its current size (None: at start_time)
    stopping_since: float | None = None  # when it was asked to stop: checkpoint and teardown are no service

    @property
    def gpus(self) -> int:
        """Whole GPUs it holds, every role (0 for a job that shares GPUs)."""
        return self.job.gpus_at(self.replicas)

    @property
    def gpu_amount(self) -> float:
        """GPUs it is charged for: whole GPUs, or the shares of GPUs its pods hold."""
        return float(self.replicas * self.job.gpu_amount + self.job.companion_gpus)

    def attained(self, now: float) -> float:
        """GPU-seconds of service the job has received by ``now``, earlier attempts included."""
        since = self.start_time if self.sized_at is None else self.sized_at
        until = now if self.stopping_since is None else min(now, self.stopping_since)
        return self.job.attained_gpu_s + self.served_gpu_s + max(until - since, 0.0) * self.gpu_amount


@dataclass(frozen=True, slots=True)
class Reservation:
    """``nodes`` are kept for ``job_id`` from ``time``; later jobs may use them only if they end first."""

    job_id: str
    time: float
    nodes: frozenset[str]


class DecisionKind(str, Enum):
    ADMIT = "admit"
    PREEMPT = "preempt"
    SCALE = "scale"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Admit:
    job_id: str
    attempt: int
    placement: Placement
    replicas: int
    borrowed: bool = False  # admitted on capacity borrowed from the cohort
    #: placed on nodes bought for it (``growth``): paid by its queue's burst budget, not charged to its quota
    bought: bool = False
    kind: DecisionKind = DecisionKind.ADMIT


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop a running job (whole gang). ``requeue`` is False when it must not come back (max runtime)."""

    job_id: str
    attempt: int
    reason: str  # a PreemptReason value
    grace_period_s: float
    preemptor: str | None = None
    requeue: bool = True
    kind: DecisionKind = DecisionKind.PREEMPT


@dataclass(frozen=True, slots=True)
class Scale:
    """Grow or shrink an elastic job to ``replicas`` with the given full placement."""

    job_id: str
    attempt: int
    replicas: int
    placement: Placement
    kind: DecisionKind = DecisionKind.SCALE


@dataclass(frozen=True, slots=True)
class Reject:
    job_id: str
    reason: str  # a PendingReason value
    message: str
    kind: DecisionKind = DecisionKind.REJECT


Decision = Admit | Preempt | Scale | Reject


@dataclass(frozen=True, slots=True)
class GrowableGroup:
    """A node group that can grow (the cloud buys nodes like ``template`` after ``provision_delay_s``) and
    shrink back to ``min_nodes`` (a node idle for ``idle_s``). ``price_per_gpu_hour`` is what a bought node
    costs per GPU and hour, from ready until it is given back."""

    name: str
    template: Node  # a node of the group: cluster, GPU type and count, CPU, memory, labels, taints
    min_nodes: int
    max_nodes: int
    provision_delay_s: float
    price_per_gpu_hour: float = 0.0
    idle_s: float = 600.0


@dataclass(frozen=True, slots=True)
class BurstBudget:
    """What a queue may spend on bought nodes per window (``window_s`` of virtual time, windows aligned on
    multiples of it): GPU-hours and/or money (None: not limited by that measure). A queue without a budget
    never has nodes bought for it."""

    gpu_hours: float | None = None
    money: float | None = None
    window_s: float = 30 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Provision:
    """Buy ``nodes`` nodes of ``group`` for ``job_id`` (the cloud's answer is expected at ``ready_at``).
    ``gpu_hours`` and ``money`` are what the queue's budget is charged up front: the bought GPUs from ready
    until the job's estimated end plus the group's idle time (trued up to the real cost when each node is
    given back)."""

    job_id: str
    queue: str
    group: str
    nodes: int
    ready_at: float
    gpu_hours: float
    money: float


@dataclass(frozen=True, slots=True)
class Release:
    """Give a bought node back: it has been idle for its group's ``idle_s`` and the group is above its minimum."""

    node: str
    group: str


class PreemptReason(str, Enum):
    PRIORITY = "higher_priority"  # same queue, higher priority job needs the capacity
    RECLAIM = "quota_reclaim"  # lender takes back capacity another queue borrowed
    FAIR_SHARE = "fair_share"
    MAX_RUNTIME = "max_runtime_exceeded"
    NODE_UNHEALTHY = "node_unhealthy"
    QUEUE_ORDER = "queue_order"  # same queue and priority: a job well ahead of it in the queue's order
    CONSOLIDATION = "consolidation"  # moved (requeued, placed again) so a gang blocked by fragmentation fits


class PendingReason(str, Enum):
    """Machine-readable answer to "why is my job pending"."""

    QUEUED = "queued"  # ahead of it are other jobs in order
    QUEUE_QUOTA = "queue_quota_exhausted"
    COHORT_QUOTA = "cohort_quota_exhausted"
    # a non-preemptible job would take its queue above nominal: it may never run on borrowed quota
    NON_PREEMPTIBLE_QUOTA = "non_preemptible_over_nominal"
    # within its queue's nominal quota, but that quota is lent out and cannot be reclaimed right now
    QUOTA_LENT = "nominal_quota_lent"
    USER_LIMIT = "user_limit_reached"
    BUDGET = "budget_exhausted"
    CAPACITY = "insufficient_capacity"
    TOPOLOGY = "topology_unsatisfiable"
    RESERVATION = "waiting_for_reservation"  # holds a reservation; starts when it frees up
    BEHIND_RESERVATION = "blocked_by_reservation"  # would delay a reserved job
    NO_MATCHING_NODES = "no_matching_nodes"  # never fits anywhere (gpu type, selector, size)
    UNKNOWN_QUEUE = "unknown_queue"
    MAX_WAIT_EXCEEDED = "max_wait_exceeded"
    PREEMPTING = "waiting_for_preemption"  # victims are being stopped for it
    PROTECTED = "waiting_for_min_runtime"  # victims exist but are younger than the minimum runtime
    SUSPENDED = "suspended"
    PROVISIONING = "waiting_for_provisioning"  # nodes are being bought for it (``growth``)


@dataclass(frozen=True, slots=True)
class PendingInfo:
    """Status of one pending job after a cycle."""

    job_id: str
    reason: PendingReason
    message: str
    position: int | None = None  # 0-based position inside its queue, when known
    estimated_start: float | None = None  # absolute time, from runtime estimates; None when unknown


@dataclass(frozen=True, slots=True)
class CycleResult:
    decisions: tuple[Decision, ...]
    pending: Mapping[str, PendingInfo]  # only jobs whose status was (re)computed this cycle
    #: nodes to buy and to give back (only with growable node groups: ``SchedulerState.growth``)
    provisions: tuple[Provision, ...] = ()
    releases: tuple[Release, ...] = ()


class Policy(StrEnum):
    """The named presets of ``policy.PRESETS``: each fixes some flags of ``SchedulerConfig``."""

    MUSTER = "muster"  # every mechanism on
    FIFO = "fifo"  # first come, first served inside each queue: a blocked head blocks its own queue only
    FIFO_GLOBAL = "fifo-global"  # strict global FIFO: one blocked head blocks every queue
    TIRESIAS = "tiresias"  # Tiresias' 2D-LAS: least attained GPU-service first, preemptive, no estimates
    PRIORITY = "priority"  # priority, then submit time; everything else as muster
    MUSTER_NO_BACKFILL = "muster-no-backfill"  # muster without backfill reservations

    @classmethod
    def _missing_(cls, value: object) -> Policy | None:
        # ``drf``, this preset's first name, said what it did not do (fair share is in muster too)
        return cls.MUSTER_NO_BACKFILL if value == "drf" else None


class QueueOrderKind(StrEnum):
    """The order of equal-priority jobs inside a queue (``ordering``)."""

    REMAINING = "remaining"  # least estimated remaining GPU-time first
    SUBMIT = "submit"  # first come, first served
    LAS = "las"  # least attained GPU-service, in two levels, as Tiresias


def _known(kind: type[StrEnum], value: object, field_name: str) -> StrEnum:
    try:
        return kind(value)  # type: ignore[arg-type]  # a plain string given for the enum, or anything wrong
    except ValueError:
        raise ValueError(f"unknown {field_name} {value!r}; known: {', '.join(k.value for k in kind)}") from None


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Policy knobs. ``policy`` names a preset (``policy.PRESETS``), which fixes some flags; a flag named in
    ``explicit`` keeps its own value over the preset's (``policy.resolve``). ``policy`` and ``queue_order``
    also take their names as plain strings (``"tiresias"``), and an unknown name is refused here."""

    policy: Policy = Policy.MUSTER
    fair_share: bool = True
    fair_share_half_life_s: float = 7 * 24 * 3600.0
    # a queue under its fair share may preempt borrowed work of a queue over it (whole gangs, cheapest first)
    fair_share_preemption: bool = True
    fair_share_tolerance: float = 0.05  # ... only when the victim's queue's share is this much above its own
    backfill: bool = True
    preemption: bool = True
    elastic: bool = True
    bin_packing: bool = True
    min_runtime_s: float = 300.0  # a job that has run less than this is not a victim (anti-thrash)
    # how long a node may stay unhealthy before its jobs are stopped (Kubernetes' not-ready toleration)
    node_unhealthy_grace_s: float = 300.0
    starvation_age_s: float = 24 * 3600.0  # waiting longer than this boosts a job above fair share
    default_runtime_estimate_s: float = 3600.0
    max_admissions_per_cycle: int = 1000
    backfill_depth: int = 200  # how many blocked jobs per queue the cycle may look past
    status_depth: int = 100  # pending status (position, estimate) computed for this many per queue
    max_preemption_attempts: int = 16  # blocked jobs per cycle that may look for victims
    max_growth_per_cycle: int = 256  # elastic jobs per cycle that may grow
    # what resizing a running elastic job costs it (a checkpoint and a restart at the new size): it grows
    # only when that saves it more time than this, by its estimated remaining work
    resize_cost_s: float = 300.0
    # order of equal-priority jobs inside a queue: "remaining" (least estimated remaining GPU-time first),
    # "submit" (first come, first served) or "las" (least attained GPU-service, in two levels, as Tiresias)
    queue_order: QueueOrderKind = QueueOrderKind.REMAINING
    learn_runtimes: bool = True  # estimate runtimes from finished jobs of the same name stem (``runtimes``)
    # a job waiting longer than this many times its estimated runtime goes to the front of its queue
    # ("remaining" order; at most starvation_age_s either way): it bounds how much a short job may delay it
    slowdown_limit: float = 3.0
    # preempt a running job of the same queue and priority that is far behind a waiting one in the
    # queue's order (checkpointable victims only, each after min_runtime_s of its attempt: that bounds the
    # restarts a job can be put through to one per min_runtime_s of its run)
    reorder_preemption: bool = True
    reorder_ratio: float = 4.0  # "remaining" order: the victim's remaining work is this many times more
    # ... and only for a job that would otherwise wait more than this many times its own runtime (0: always)
    reorder_wait_ratio: float = 1.0
    max_reorder_restarts: int = 0  # a job requeued this many times is no longer preempted for order (0: no cap)
    las_threshold_gpu_s: float = 16 * 3600.0  # "las": attained GPU-seconds that move a job to the lower level
    las_promote_knob: float = 0.0  # "las": waiting this many times its last run moves a job up again (0: off)
    # "remaining": least remaining work inside Tiresias' two levels of attained service (a job past
    # las_threshold_gpu_s goes behind every job below it, whatever the estimates say)
    remaining_in_levels: bool = True
    # "remaining": a learnt estimate's samples read as a distribution (the expected further service per
    # completion, a Gittins index) instead of their median: a wide spread is not ranked as if it were known
    runtime_distribution: bool = True
    # "remaining": jobs promoted past their slowdown bound take every other place among their priority, not
    # all the first places: each is still reached, but an overloaded queue does not become first come, first
    # served (every waiting job is soon promoted there), and new short work keeps half of what frees up
    promotion_interleaved: bool = True
    # "remaining": a job promoted past its slowdown bound may preempt, for its queue's order, the running jobs of
    # its queue and priority that started after it was promoted (they overtook it; checkpointable, each after
    # min_runtime_s): the bound is kept, and what frees up while a gang waits for whole nodes cannot be taken for
    # ever by the smaller jobs walked after it. As any preemption for order, only for a job that would otherwise
    # wait longer than reorder_wait_ratio times its runtime, and never from a job that would be entitled to preempt
    # it right back (the preemptor more than reorder_ratio behind it). On four weeks of partitioned Philly: average
    # completion time 1.07x -> 0.99x Tiresias', every size class's queueing within 1.5x of Tiresias'; the Pollux
    # workloads 0.897x -> 0.904x (docs/benchmarks.md, "Promoted jobs take back what overtook them")
    overtaken_preemption: bool = True
    # move small checkpointable jobs when a gang waits only because the free GPUs are scattered
    # (``consolidation``): at most this many jobs per cycle, each restarted fewer than this many times,
    # and only when the gang's GPUs x its wait saved exceed the moved GPUs x the cost of one move
    consolidation: bool = True
    consolidation_max_moves: int = 4
    consolidation_max_job_attempts: int = 3
    consolidation_move_cost_s: float = 300.0  # a checkpoint and a restart
    # buy nodes of growable node groups for a job blocked on capacity (``growth``), only when that starts it
    # more than provision_margin_s sooner than existing capacity would, and its queue's burst budget allows
    provisioning: bool = True
    provision_margin_s: float = 300.0
    # bought nodes are kept for the job they were bought for this long after they are ready
    provision_booking_s: float = 600.0
    # a request not answered this long after its expected ready time counts as failed (``growth.overdue``)
    provision_timeout_s: float = 900.0
    # after a failed request, nothing more is bought for the job this long (it waits for existing capacity)
    provision_retry_s: float = 1800.0
    # the flags an operator set explicitly (``MUSTER_SCHEDULER_<FLAG>``): a preset never overrides them
    explicit: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if type(self.policy) is not Policy:
            object.__setattr__(self, "policy", _known(Policy, self.policy, "scheduling policy"))
        if type(self.queue_order) is not QueueOrderKind:
            object.__setattr__(self, "queue_order", _known(QueueOrderKind, self.queue_order, "queue_order"))
