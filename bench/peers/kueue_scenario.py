"""Kueue's scheduler performance scenario (``test/performance/scheduler/configs/*/generator.yaml`` of
``sigs.k8s.io/kueue``), read and translated into Muster's configuration and a timed stream of submissions.

Kueue's generator makes, for each cohort set, ``count`` cohorts ``<class>-<i>``; in each, for each queue set,
``count`` ClusterQueues ``<class>-<set>-<i>-<cohort>`` with a nominal quota and a borrowing limit of one
resource, each with its own namespace and LocalQueue; and for each queue, for each workloads set, one
goroutine that waits ``creationIntervalMs`` before creating each workload (``<class>-<set>-<k>-<i>``), so
the n-th workload of a set is created n intervals after the start. A workload is one pod set of one pod
asking ``request`` of the resource, at ``priority``; the runner marks it finished ``runtimeMs`` after its
admission.

The translation (what differs is said in ``Scenario.differences``):

- a ClusterQueue is a Muster queue in the same cohort with the same nominal quota and borrowing limit, of
  GPUs (Kueue's resource is CPU: Muster quotas GPUs, and the figures are the same units);
- a workload's request of N is a gang of N one-GPU pods, admitted whole and placed on nodes (Kueue's is
  one pod that is never placed on a node: stricter for Muster);
- the nodes hold exactly the sum of the nominal quotas, 8 GPUs each;
- a priority is a priority class of that value; Kueue's ``withinClusterQueue: LowerPriority`` and
  ``reclaimWithinCohort: Any`` are Muster's own rules (a queue's job preempts lower-priority jobs of its queue;
  a queue reclaims its nominal quota from jobs borrowing it in the cohort); other policies cannot be
  expressed per queue in Muster and are reported.

A config with a ``topology`` (Kueue's TAS scenario, ``configs/tas``) is translated as it is instead: its
resource stays CPU (Muster quotas ``cpu`` in millicores, and each of a workload's ``podCount`` pods asks its
``request``), the nodes are the config's (blocks of racks of nodes with its CPU and memory, no GPU), and a
workload's ``tasConstraint`` on ``tasLevel`` is Muster's topology request on that level: ``required`` and
``preferred`` as they are; ``balanced`` (Kueue's even spread over slices of ``sliceSize`` pods) has no
equivalent in Muster and is asked as ``preferred`` (reported as a difference).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from bench.system.workload import GPU_TYPE, TENANT, Fleet
from schemas.config import (
    CohortConfig,
    CohortDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    ResourceQuotaConfig,
    TenantConfig,
    TenantDefined,
    gpu_resource,
)
from schemas.envelope import Message
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest, TopologySpec

#: Kueue's preemption policies that Muster applies to every queue (anything else is reported as a difference)
MUSTER_WITHIN_QUEUE = "LowerPriority"
MUSTER_RECLAIM = "Any"
GPUS_PER_NODE = 8


class ScenarioError(ValueError):
    """The generator configuration cannot be read or translated."""


Level = Literal["block", "rack", "node"]
Mode = Literal["required", "preferred"]


@dataclass(frozen=True)
class TasRequest:
    """A workload's topology constraint (``tasConstraint`` on ``tasLevel``), the level named as Muster names it."""

    level: Level
    constraint: str  # Kueue's: "required", "preferred" or "balanced"
    slice_size: int | None = None  # balanced: pods per slice

    @property
    def mode(self) -> Mode:
        """Muster's topology mode: balanced placement is asked as preferred (Muster has no even spread)."""
        return "required" if self.constraint == "required" else "preferred"


@dataclass(frozen=True)
class WorkloadTemplate:
    class_name: str
    runtime_s: float
    priority: int
    request: int  # per pod, in the scenario's unit: GPUs (whole units of the config), or CPU millicores (TAS)
    pods: int = 1  # Kueue's podCount (TAS scenarios); each pod asks ``request``
    topology: TasRequest | None = None
    cpu: bool = False  # the request is CPU millicores (a TAS config), not GPUs


@dataclass(frozen=True)
class TasTopology:
    """The nodes of a TAS config: ``blocks`` x ``racks_per_block`` x ``nodes_per_rack``, each with this CPU and
    memory (and no GPU)."""

    blocks: int
    racks_per_block: int
    nodes_per_rack: int
    cpu_m: int
    memory_mb: int

    @property
    def nodes(self) -> int:
        return self.blocks * self.racks_per_block * self.nodes_per_rack


@dataclass(frozen=True)
class WorkloadsSet:
    count: int
    interval_s: float
    templates: tuple[WorkloadTemplate, ...]


@dataclass(frozen=True)
class Queue:
    name: str
    cohort: str
    class_name: str
    nominal: int
    borrowing_limit: int | None
    reclaim_within_cohort: str
    within_queue: str
    sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True)
class Arrival:
    """One workload: created ``at_s`` after the start, in ``queue``."""

    at_s: float
    job_id: str
    name: str  # Kueue's workload name (unique within its queue's namespace)
    queue: str
    template: WorkloadTemplate

    @property
    def amount(self) -> int:
        """What the workload is charged, in the scenario's unit (GPUs, or CPU millicores)."""
        return self.template.request * self.template.pods


@dataclass(frozen=True)
class Scenario:
    queues: tuple[Queue, ...]
    differences: tuple[str, ...] = field(default=())
    topology: TasTopology | None = None  # a TAS config: CPU quotas and the config's own nodes

    @property
    def resource(self) -> str:
        """The quota resource the scenario is counted in: one GPU type, or CPU (millicores) for a TAS config."""
        return CPU_RESOURCE if self.topology is not None else gpu_resource(GPU_TYPE)

    @property
    def cohorts(self) -> list[str]:
        return sorted({q.cohort for q in self.queues})

    @property
    def priorities(self) -> dict[str, int]:
        """Muster's priority classes: ``p<value>`` for each priority the workloads use."""
        values = {t.priority for t in self.templates()}
        return {priority_class(v): v for v in sorted(values)}

    @property
    def nominal_total(self) -> int:
        """Every queue's nominal quota together, in the scenario's unit."""
        return sum(q.nominal for q in self.queues)

    @property
    def nodes(self) -> int:
        """The config's nodes (TAS), else nodes of ``GPUS_PER_NODE`` GPUs holding the nominal quotas (rounded up)."""
        if self.topology is not None:
            return self.topology.nodes
        return -(-self.nominal_total // GPUS_PER_NODE)

    def fleet(self) -> Fleet:
        """The nodes the decision-only and the Kafka runs place on."""
        topo = self.topology
        if topo is None:
            return Fleet(nodes=self.nodes)
        return Fleet(nodes=topo.nodes, gpus_per_node=0, nodes_per_rack=topo.nodes_per_rack,
                     racks_per_block=topo.racks_per_block, cpu_m=topo.cpu_m, memory_mb=topo.memory_mb)

    @property
    def classes(self) -> list[str]:
        """The workload classes in the order they first appear."""
        return list(dict.fromkeys(t.class_name for t in self.templates()))

    @property
    def queue_classes(self) -> dict[str, str]:
        return {q.name: q.class_name for q in self.queues}

    def arrivals(self) -> list[Arrival]:
        """Every workload with its creation offset, earliest first (ties: queue order, then set order)."""
        out: list[Arrival] = []
        for queue in self.queues:
            for set_index, wl_set in enumerate(queue.sets):
                n = 0
                for k in range(wl_set.count):
                    for i, template in enumerate(wl_set.templates):
                        n += 1
                        name = f"{template.class_name}-{set_index}-{k}-{i}"
                        out.append(Arrival(n * wl_set.interval_s, job_id(queue.name, name), name, queue.name,
                                           template))
        out.sort(key=lambda a: a.at_s)
        return out

    def templates(self) -> Iterator[WorkloadTemplate]:
        for q in self.queues:
            for s in q.sets:
                yield from s.templates


def priority_class(value: int) -> str:
    return f"p{value}" if value >= 0 else f"m{-value}"


def job_id(queue: str, name: str) -> str:
    """A Muster job id for workload ``name`` of ``queue`` (readable when short enough, else a digest)."""
    readable = f"{queue}--{name}"
    if len(readable) <= 48:
        return readable
    return "kueue-" + hashlib.sha256(readable.encode()).hexdigest()[:32]


_QUANTITY = re.compile(r"^\s*(\d+)\s*$")
_MILLI_QUANTITY = re.compile(r"^\s*(\d+)(m?)\s*$")
_MEMORY_QUANTITY = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti)?\s*$")
_MIB = {"Ki": 1 / 1024, None: 1 / (1024 * 1024), "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
CPU_RESOURCE = "cpu"
#: Kueue's TAS level labels (``nodeLabel``) as Muster's topology levels
TAS_LEVELS: dict[str, Level] = {"kubernetes.io/hostname": "node"}


def _whole(value: Any, what: str) -> int:
    """A whole-unit Kubernetes quantity (``"20"`` or ``20``); fractions (``500m``) cannot be GPUs."""
    match = _QUANTITY.match(str(value))
    if not match:
        raise ScenarioError(f"{what} {value!r}: only whole units translate into GPUs")
    return int(match.group(1))


def _millis(value: Any, what: str) -> int:
    """A CPU quantity (``"20"``, ``20``, ``"500m"``) in millicores."""
    match = _MILLI_QUANTITY.match(str(value))
    if not match:
        raise ScenarioError(f"{what} {value!r}: not a CPU quantity")
    return int(match.group(1)) * (1 if match.group(2) else 1000)


def _mebibytes(value: Any, what: str) -> int:
    match = _MEMORY_QUANTITY.match(str(value))
    if not match:
        raise ScenarioError(f"{what} {value!r}: not a memory quantity")
    return int(int(match.group(1)) * _MIB[match.group(2)])


def _topology(data: Any, where: str) -> tuple[TasTopology, dict[str, Level]]:
    """A TAS config's ``topology`` (levels block, rack, node, the last with the nodes' capacity): the nodes,
    and each level's node label -> Muster's level name."""
    levels = _field(data, "levels", where) if isinstance(data, dict) else None
    if not isinstance(levels, list) or [str(level.get("name")) for level in levels] != ["block", "rack", "node"]:
        raise ScenarioError(f"{where}: topology levels must be block, rack and node (as Kueue's TAS config has)")
    counts = [int(_field(level, "count", f"{where}, level {level['name']}")) for level in levels]
    capacity = _field(levels[-1], "capacity", f"{where}, level node")
    labels = {str(_field(level, "nodeLabel", f"{where}, level {level['name']}")): cast(Level, level["name"])
              for level in levels}
    labels.update({label: TAS_LEVELS[label] for label in labels if label in TAS_LEVELS})
    return TasTopology(blocks=counts[0], racks_per_block=counts[1], nodes_per_rack=counts[2],
                       cpu_m=_millis(_field(capacity, "cpu", f"{where}, node capacity"), f"{where}: node cpu"),
                       memory_mb=_mebibytes(capacity.get("memory", "256Gi"), f"{where}: node memory")), labels


def _field(item: dict[str, Any], key: str, where: str, default: Any = ...) -> Any:
    if key in item:
        return item[key]
    if default is ...:
        raise ScenarioError(f"{where}: {key!r} is missing")
    return default


def load(path: Path) -> Scenario:
    """Read Kueue's generator config at ``path``."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
    return parse(data, str(path))


def parse(data: Any, where: str = "generator config") -> Scenario:
    """Translate a parsed generator config (see the module's docstring)."""
    if not isinstance(data, dict) or not data.get("cohorts"):
        raise ScenarioError(f"{where}: a generator config needs at least one entry under 'cohorts'")
    differences: list[str] = []
    topology: TasTopology | None = None
    levels: dict[str, Level] = {}
    if data.get("topology"):
        topology, levels = _topology(data["topology"], f"{where}: topology")
    quantity = _whole if topology is None else _millis
    queues: list[Queue] = []
    for cohort_set in data["cohorts"]:
        c_where = f"{where}: cohort set {cohort_set.get('className', '?')!r}"
        for c in range(int(_field(cohort_set, "count", c_where))):
            cohort = f"{_field(cohort_set, 'className', c_where)}-{c}"
            for q_set_index, q_set in enumerate(_field(cohort_set, "queuesSets", c_where)):
                q_where = f"{c_where}, queue set {q_set.get('className', '?')!r}"
                sets = tuple(_workloads_set(s, f"{q_where}, workloads set {n}", levels if topology else None)
                             for n, s in enumerate(_field(q_set, "workloadsSets", q_where)))
                within = str(q_set.get("withinClusterQueue") or "Never")
                reclaim = str(q_set.get("reclaimWithinCohort") or "Never")
                limit = q_set.get("borrowingLimit")
                for i in range(int(_field(q_set, "count", q_where))):
                    queues.append(Queue(
                        name=f"{_field(q_set, 'className', q_where)}-{q_set_index}-{i}-{cohort}", cohort=cohort,
                        class_name=str(q_set["className"]), nominal=quantity(_field(q_set, "nominalQuota", q_where),
                                                                             f"{q_where}: nominalQuota"),
                        borrowing_limit=None if limit is None else quantity(limit, f"{q_where}: borrowingLimit"),
                        reclaim_within_cohort=reclaim, within_queue=within, sets=sets))
    for policy, expected, what in (("within_queue", MUSTER_WITHIN_QUEUE, "withinClusterQueue"),
                                   ("reclaim_within_cohort", MUSTER_RECLAIM, "reclaimWithinCohort")):
        other = sorted({getattr(q, policy) for q in queues} - {expected})
        if other:
            differences.append(f"{what} {', '.join(other)} is not expressible per queue: Muster's queues all "
                               f"behave as {expected}")
    balanced = sorted({t.class_name for q in queues for s in q.sets for t in s.templates
                       if t.topology is not None and t.topology.constraint == "balanced"})
    if balanced:
        differences.append(f"tasConstraint balanced ({', '.join(balanced)}) has no equivalent in Muster (an even "
                           "spread over slices): asked as preferred, as few domains as possible")
    return Scenario(tuple(queues), tuple(differences), topology)


def _workloads_set(item: dict[str, Any], where: str, levels: dict[str, Level] | None = None) -> WorkloadsSet:
    """One workloads set; ``levels`` (a TAS config's node labels -> level names): requests are CPU quantities
    and a workload may carry a topology constraint."""
    templates = []
    for t in _field(item, "workloads", where):
        t_where = f"{where}, class {t.get('className', '?')!r}"
        topology = None
        if levels is not None and t.get("tasConstraint"):
            label = str(_field(t, "tasLevel", t_where))
            if label not in levels:
                raise ScenarioError(f"{t_where}: tasLevel {label!r} is none of the topology's levels")
            constraint = str(t["tasConstraint"])
            if constraint not in ("required", "preferred", "balanced"):
                raise ScenarioError(f"{t_where}: tasConstraint {constraint!r} is not required, preferred or balanced")
            topology = TasRequest(levels[label], constraint, int(t["sliceSize"]) if t.get("sliceSize") else None)
        request = _field(t, "request", t_where)
        amount = _whole if levels is None else _millis
        templates.append(WorkloadTemplate(
            class_name=str(_field(t, "className", t_where)), runtime_s=float(_field(t, "runtimeMs", t_where)) / 1000,
            priority=int(t.get("priority", 0)),
            request=amount(request, f"{t_where}: request"),
            pods=int(t.get("podCount") or 1), topology=topology, cpu=levels is not None))
    return WorkloadsSet(count=int(_field(item, "count", where)),
                        interval_s=float(item.get("creationIntervalMs", 0)) / 1000, templates=tuple(templates))


def scaled(scenario: Scenario, fraction: float) -> Scenario:
    """The same scenario with each workloads set's count scaled by ``fraction`` (at least 1): a short run."""
    return replace(scenario, queues=tuple(
        replace(q, sets=tuple(replace(s, count=max(1, round(s.count * fraction))) for s in q.sets))
        for q in scenario.queues))


@dataclass(frozen=True)
class ScenarioLayout:
    """The scenario's queues, cohorts and priority classes as the gateway would publish them."""

    scenario: Scenario

    def messages(self) -> list[Message]:
        items: list[Message] = [CohortDefined(item=CohortConfig(name=c)) for c in self.scenario.cohorts]
        items += [PriorityClassDefined(item=PriorityClassConfig(name=n, value=v))
                  for n, v in self.scenario.priorities.items()]
        items.append(TenantDefined(item=TenantConfig(name=TENANT, namespace=TENANT)))
        resource = self.scenario.resource
        items += [QueueDefined(item=QueueConfig(
            name=q.name, cohort=q.cohort, tenant=TENANT,
            quotas={resource: ResourceQuotaConfig(nominal=q.nominal, borrowing_limit=q.borrowing_limit)}))
            for q in self.scenario.queues]
        return items


def pods_of(template: WorkloadTemplate) -> tuple[int, int]:
    """(pods, GPUs per pod): a request of N is a gang of N one-GPU pods; with a ``podCount``, that many
    pods of N GPUs."""
    return (template.request, 1) if template.pods == 1 else (template.pods, template.request)


def submission(arrival: Arrival, at: datetime | None = None) -> SubmitJob:
    """The workload as a Muster submission made ``at`` (now by default); no runtime estimate (Kueue's
    workloads carry none). In a TAS scenario its pods ask CPU and no GPU, with its topology constraint."""
    template = arrival.template
    if template.cpu:
        resources = ResourceRequest(gpus=0, cpu=f"{template.request}m", memory="1Gi")
        pods = template.pods
    else:
        pods, per_pod = pods_of(template)
        resources = ResourceRequest(gpus=per_pod, gpu_type=GPU_TYPE, cpu="1", memory="1Gi")
    topo = template.topology
    spec = JobSpec(name=arrival.job_id, queue=arrival.queue, priority_class=priority_class(template.priority),
                   replicas=pods, template=PodTemplate(image="registry.example/bench:1", resources=resources),
                   topology=TopologySpec(level=topo.level, mode=topo.mode) if topo is not None else None)
    return SubmitJob(job_id=arrival.job_id, tenant=TENANT, user="bench", spec=spec,
                     submitted_at=at or datetime.now(UTC))
