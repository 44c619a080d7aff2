"""What the dashboard needs beyond the API's views, and the feeds that keep it and the live streams current.

- ``NodeView``: the latest state of every node (``muster.capacity``).
- ``RecordView``: each job's durable record (``muster.jobs``): its spec, user and placement.
- ``LedgerView``: chargeback records per job and the GPU-hour budget per tenant (``muster.usage``).
- ``Admissions``: when jobs were admitted, for the admissions-per-minute chart.
- ``PlotSeries`` (``dashboard_series``): GPUs allocated per queue over time, preemptions over time and waits
  for first admission, bounded, for the dashboard's plots.
- ``RunLog`` (``job_runs``): each job's Kubernetes objects and run events (``muster.dispatches``, ``muster.runs``).

``DashboardFeeds`` wraps the gateway's change callbacks of the compacted tables: each folds the change
into its view, then publishes what changed to the ``LiveHub``. Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from schemas.api import JobRow
from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.envelope import Envelope
from schemas.jobs import JobRecord, JobRecorded
from schemas.status import JobStatusChanged
from schemas.usage import BudgetStatusReported, BurstSpendReported, ChargebackRecorded, QueueUsageReported
from services.gateway.dashboard_series import PlotSeries
from services.gateway.job_runs import RunLog
from services.gateway.live import Change, LiveHub
from services.gateway.presenters import job_from_status

#: chargeback records kept per job (the most recent attempts)
CHARGES_PER_JOB = 32
#: admissions remembered for the per-minute chart
ADMISSION_WINDOW = timedelta(minutes=15)
_ADMITTED = frozenset({"admitted", "running"})


Shape = tuple[str, str]  # (cluster, GPU type)


class NodeView:
    """The latest ``NodeState`` per ``cluster/node``, and how many nodes of each size every
    (cluster, GPU type) has (what submissions are checked against, kept as nodes change)."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeState] = {}
        self.sizes: dict[Shape, dict[int, int]] = {}  # (cluster, GPU type) -> GPUs per node -> nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def apply(self, key: str, envelope: Envelope | None) -> None:
        payload = envelope.payload if envelope is not None else None
        self._count(self._nodes.get(key), -1)
        if payload is None or isinstance(payload, NodeRemoved):
            self._nodes.pop(key, None)
        elif isinstance(payload, NodeStateObserved):
            self._nodes[key] = payload.state
            self._count(payload.state, +1)

    def _count(self, node: NodeState | None, sign: int) -> None:
        if node is None:
            return
        shape = (node.cluster, node.gpu_type)
        sizes = self.sizes.setdefault(shape, {})
        sizes[node.gpus_allocatable] = sizes.get(node.gpus_allocatable, 0) + sign
        if not sizes[node.gpus_allocatable]:
            del sizes[node.gpus_allocatable]
            if not sizes:
                del self.sizes[shape]

    def nodes(self) -> list[NodeState]:
        return [self._nodes[key] for key in sorted(self._nodes)]


class RecordView:
    """The latest ``JobRecord`` per job."""

    def __init__(self) -> None:
        self._records: dict[str, JobRecord] = {}

    def __len__(self) -> int:
        return len(self._records)

    def apply(self, key: str, envelope: Envelope | None) -> None:
        if envelope is None:
            self._records.pop(key, None)
        elif isinstance(envelope.payload, JobRecorded):
            self._records[envelope.payload.job_id] = envelope.payload.record

    def get(self, job_id: str) -> JobRecord | None:
        return self._records.get(job_id)

    def user(self, job_id: str) -> str | None:
        record = self._records.get(job_id)
        return record.submission.user if record is not None else None

    def items(self) -> list[tuple[str, JobRecord]]:
        return list(self._records.items())


class LedgerView:
    """Chargeback records by job, and the latest budget status per tenant."""

    def __init__(self) -> None:
        self._charges: dict[str, dict[int, ChargebackRecorded]] = {}
        self._budgets: dict[str, BudgetStatusReported] = {}
        self._bursts: dict[str, BurstSpendReported] = {}

    def apply(self, key: str, envelope: Envelope | None) -> None:
        payload = envelope.payload if envelope is not None else None
        if isinstance(payload, ChargebackRecorded):
            attempts = self._charges.setdefault(payload.job_id, {})
            attempts[payload.attempt] = payload
            while len(attempts) > CHARGES_PER_JOB:
                del attempts[min(attempts)]
        elif isinstance(payload, BudgetStatusReported):
            self._budgets[payload.tenant] = payload
        elif payload is None and key.startswith("budget/"):
            self._budgets.pop(key.removeprefix("budget/"), None)
        elif isinstance(payload, BurstSpendReported):
            self._bursts[payload.queue] = payload
        elif payload is None and key.startswith("burst/"):
            self._bursts.pop(key.removeprefix("burst/"), None)

    def charges(self, job_id: str) -> list[ChargebackRecorded]:
        attempts = self._charges.get(job_id, {})
        return [attempts[a] for a in sorted(attempts)]

    def budget(self, tenant: str) -> BudgetStatusReported | None:
        return self._budgets.get(tenant)

    def burst(self, queue: str) -> BurstSpendReported | None:
        return self._bursts.get(queue)


class Admissions:
    """(time, tenant) of each admission of a job's attempt seen in the last ``ADMISSION_WINDOW``."""

    def __init__(self) -> None:
        self._times: deque[tuple[datetime, str]] = deque()

    def observe(self, previous: JobStatusChanged | None, status: JobStatusChanged) -> None:
        """``status`` replaced ``previous`` (None: first seen): an admission when it holds an attempt that
        ``previous`` did not (nothing is kept per job: the window's admissions only)."""
        if status.state not in _ADMITTED:
            return
        if previous is not None and previous.state in _ADMITTED and previous.attempt >= status.attempt:
            return
        self._times.append((status.updated_at, status.tenant))
        horizon = status.updated_at - ADMISSION_WINDOW
        while self._times and self._times[0][0] < horizon:
            self._times.popleft()

    def per_minute(self, now: datetime, visible: Callable[[str], bool], minutes: int = 15) -> list[int]:
        """Admissions in each of the last ``minutes`` minutes, oldest first."""
        counts = [0] * minutes
        for at, tenant in self._times:
            age = int((now - at).total_seconds() // 60)
            if 0 <= age < minutes and visible(tenant):
                counts[minutes - 1 - age] += 1
        return counts


@dataclass
class DashboardState:
    hub: LiveHub = field(default_factory=LiveHub)
    nodes: NodeView = field(default_factory=NodeView)
    records: RecordView = field(default_factory=RecordView)
    ledger: LedgerView = field(default_factory=LedgerView)
    admissions: Admissions = field(default_factory=Admissions)
    runs: RunLog = field(default_factory=RunLog)
    series: PlotSeries = field(default_factory=PlotSeries)


def job_row(status: JobStatusChanged, user: str | None) -> JobRow:
    return JobRow(**job_from_status(status).model_dump(), user=user)


def job_change(status: JobStatusChanged, user: str | None) -> Change:
    return Change("job", status.job_id, job_row(status, user).model_dump_json(), status.tenant,
                  {"queue": status.queue, "state": status.state, "tenant": status.tenant})


ChangeCallback = Callable[[str, Envelope | None], None]


@dataclass
class DashboardFeeds:
    """Change callbacks for the gateway's compacted tables: fold into the views, then tell the open streams.

    ``status`` and ``usage`` are the API's own folds (``StatusView.apply``, ``UsageView.apply``).
    """

    state: DashboardState
    status_apply: ChangeCallback
    usage_apply: ChangeCallback
    status_of: Callable[[str], JobStatusChanged | None]
    tenant_of_queue: Callable[[str], str | None]

    def status(self, key: str, envelope: Envelope | None) -> None:
        previous = self.status_of(key)
        self.status_apply(key, envelope)
        current = self.status_of(key)
        self.state.series.observe(previous, current)
        if current is not None:
            self.state.admissions.observe(previous, current)
        if current is None and envelope is None:
            self.state.runs.forget(key)
        hub = self.state.hub
        if not hub.listening:
            return
        if current is None:
            hub.publish(Change("job", key, None))
        else:
            hub.publish(job_change(current, self.state.records.user(key)))

    def usage(self, key: str, envelope: Envelope | None) -> None:
        self.usage_apply(key, envelope)
        self.state.ledger.apply(key, envelope)
        payload = envelope.payload if envelope is not None else None
        if isinstance(payload, QueueUsageReported) and self.state.hub.listening:
            # a queue nobody owns (not configured) is shown to administrators only
            tenant = self.tenant_of_queue(payload.queue) or ""
            self.state.hub.publish(Change("queue", payload.queue, payload.model_dump_json(), tenant))

    def capacity(self, key: str, envelope: Envelope | None) -> None:
        self.state.nodes.apply(key, envelope)
        if self.state.hub.listening:
            payload = envelope.payload if envelope is not None else None
            data = payload.state.model_dump_json() if isinstance(payload, NodeStateObserved) else None
            self.state.hub.publish(Change("node", key, data))

    def jobs(self, key: str, envelope: Envelope | None) -> None:
        self.state.records.apply(key, envelope)
        self.state.runs.apply_record(envelope)

    def runs(self, key: str, envelope: Envelope | None) -> None:
        """A report of ``muster.dispatches`` or ``muster.runs``: folded into the run log; the job's row is sent
        again so an open job page reads its objects and events anew."""
        job_id = self.state.runs.apply(envelope)
        if job_id is None or not self.state.hub.listening:
            return
        current = self.status_of(job_id)
        if current is not None:
            self.state.hub.publish(job_change(current, self.state.records.user(job_id)))

