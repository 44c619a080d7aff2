"""The cycle's estimates of when waiting jobs start: fluid models of each GPU type's capacity over time.

Two models are kept apart. ``ahead`` serves decisions (``start_in_order``: how long a job would wait behind the
running jobs, this cycle's admissions and the blocked jobs walked before it, which preemption for the queue's
order weighs); the statuses' models (``pools``, and ``scoped_pools`` for jobs a node selector confines) serve
only the estimated start each status shows. So a cycle's decisions are the same whether or not it reports.
"""

from __future__ import annotations

from collections.abc import Callable

from .capacity import CapacityIndex
from .estimate import Pool, gpus_in, running_ends
from .model import Job, PendingReason, RunningJob, SchedulerConfig, gpu_resource
from .node_facts import ScopeKey, ScopeOf
from .quota import QuotaBook
from .quota_estimate import QuotaReleases
from .state import SchedulerState


class Forecast:
    """Fluid models of when waiting jobs start, built lazily per GPU type and committed into as the walk
    goes (a job's estimate queues behind those reported before it)."""

    __slots__ = ("_cap", "_cfg", "_estimate_of", "_now", "_scope", "_st", "_types_for", "admitted_runs",
                 "ahead", "pools", "quota_releases", "scoped_pools")

    def __init__(
        self,
        state: SchedulerState,
        cap: CapacityIndex,
        book: QuotaBook,
        now: float,
        config: SchedulerConfig,
        estimate_of: Callable[[Job], float],
        scope: ScopeOf,
        types_for: Callable[[Job], list[str]],
    ) -> None:
        self._st = state
        self._cap = cap
        self._now = now
        self._cfg = config
        self._estimate_of = estimate_of
        self._scope = scope
        self._types_for = types_for
        self.admitted_runs: dict[str, list[tuple[float, RunningJob]]] = {}  # GPU type -> this cycle's (end, run)
        self.pools: dict[str, Pool] = {}
        self.scoped_pools: dict[ScopeKey, Pool] = {}
        self.ahead: dict[str, Pool] = {}  # the model of ``start_in_order`` (decisions only)
        self.quota_releases = QuotaReleases(state, book, now, config.default_runtime_estimate_s)

    def admitted(self, run: RunningJob, gpu_type: str, end: float) -> None:
        """A job this cycle admits: it holds its GPUs until ``end`` in every model already built (a model
        built later finds it in ``admitted_runs``)."""
        self.admitted_runs.setdefault(gpu_type, []).append((end, run))
        pool = self.pools.get(gpu_type)
        if pool is not None:
            pool.occupy(run.job.gpus_at(run.replicas), end)
        if self.scoped_pools:
            for (t, _), scoped in self.scoped_pools.items():
                if t == gpu_type:
                    gpus = gpus_in(run, scoped.scope)
                    if gpus:
                        scoped.occupy(gpus, end)

    def pool(self, gpu_type: str) -> Pool:
        """The statuses' fluid model of one GPU type."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            pool = self.pools[gpu_type] = self._fresh_pool(gpu_type)
        return pool

    def pool_for(self, job: Job, gpu_type: str) -> Pool:
        """The statuses' fluid model for ``job`` on ``gpu_type``: the nodes of its pool when a node selector
        confines it, every node of the type otherwise."""
        if not job.node_selector:
            return self.pool(gpu_type)
        key = (gpu_type, job.selector_key)
        pool = self.scoped_pools.get(key)
        if pool is None:
            pool = self.scoped_pools[key] = self._fresh_pool(gpu_type, self._scope(job, gpu_type))
        return pool

    def _fresh_pool(self, gpu_type: str, scope: frozenset[str] | None = None) -> Pool:
        cap = self._cap
        if scope is None:
            free = sum(cap.group_free(k) for k in cap.buckets if k[1] == gpu_type)
            total = self._st.totals.get(gpu_resource(gpu_type), 0)
        else:
            usable = [n for n in scope if CapacityIndex.usable(cap.nodes[n])]
            free = sum(max(cap.free[n], 0) for n in usable)
            total = sum(cap.nodes[n].gpus for n in usable)
        source = running_ends(self._st, gpu_type, self._now, self._cfg.default_runtime_estimate_s, scope)
        pool = Pool(self._now, free, total, source, scope)
        for end, run in self.admitted_runs.get(gpu_type, ()):
            gpus = gpus_in(run, scope)
            if gpus:
                pool.release_at(end, gpus)
        return pool

    def start_in_order(self, job: Job, commit: bool) -> float | None:
        """When ``job`` should start without preempting anything: after the running jobs' estimated
        ends, this cycle's admissions and the blocked jobs considered before it (``commit`` adds
        ``job`` to those). Kept apart from the statuses' estimates, so that decisions taken from it
        are the same whether or not the cycle reports statuses. None: not known, also for a job confined
        by a node selector (a pool): the model holds every node of a GPU type and would promise it GPUs
        it can never use."""
        if job.node_selector:
            return None
        gpus = job.min_gpus
        best: tuple[float, str] | None = None
        for gpu_type in self._types_for(job):
            pool = self.ahead.get(gpu_type)
            if pool is None:
                pool = self.ahead[gpu_type] = self._fresh_pool(gpu_type)
            t = pool.probe(gpus)
            if t is not None and (best is None or t < best[0]):
                best = (t, gpu_type)
        if best is not None and commit:
            self.ahead[best[1]].commit(gpus, self._estimate_of(job))
        return None if best is None else best[0]

    def estimate_start(self, job: Job) -> float | None:
        """Fluid estimate of when the job starts if the jobs ahead of it start first."""
        gpus = job.min_gpus
        if gpus <= 0:
            return None
        types = self._types_for(job)
        if len(types) == 1:
            return self.pool_for(job, types[0]).commit(gpus, self._estimate_of(job))
        best: tuple[float, str] | None = None
        for gpu_type in types:
            t = self.pool_for(job, gpu_type).probe(gpus)
            if t is not None and (best is None or t < best[0]):
                best = (t, gpu_type)
        if best is None:
            return None
        return self.pool_for(job, best[1]).commit(gpus, self._estimate_of(job))

    def quota_start(self, job: Job, reason: PendingReason, capacity_start: float | None) -> float | None:
        """The later of the capacity estimate and the time quota frees up; None when quota never does."""
        released = self.quota_releases.start_time(job, reason, self._types_for(job))
        if released is None:
            return None
        return released if capacity_start is None else max(released, capacity_start)
