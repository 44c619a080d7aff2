"""Runtime estimates learnt from the jobs that already finished, never from a job's own future.

Jobs of one tenant that share a name stem (``train-resnet-17`` and ``train-resnet-18`` are both
``train-resnet``) and a GPU count tend to run about as long as each other: Helios' QSSF and Philly's
own analysis rest on that. ``RuntimeHistory`` keeps, per key, the full-size runtimes of the last
``WINDOW`` successful runs and answers with their median, from the most specific key that has one:

1. tenant, user, name stem, GPUs
2. tenant, name stem, GPUs
3. tenant, name stem (any GPU count)

A job none of these knows gets ``None`` (the caller's default applies). A tenant-wide median is left
out on purpose: it would rank jobs of different kinds as if they were alike.

A full-size runtime is what the job needed at its full size: the GPU-seconds it received over all its
attempts divided by its GPUs, so a job that was preempted, resumed or shrunk teaches the same figure.

The median is a point estimate, honest only where the samples agree. ``RuntimeSample`` reads the same
samples as a distribution, for the queue's order: how much more service a job that has already received
some is expected to need per completion (``per_completion``, the reciprocal of its Gittins index).
Where the samples agree that is close to the median minus the service received; where they spread over
orders of magnitude, as a cluster's runtimes do, a job that has run past the short ones is expected to
need much more, and a job whose key knows only a wide spread does not rank as if it were known to be short.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import deque
from collections.abc import Sequence

from .model import Job

WINDOW = 32  # samples kept per key: recent behaviour wins, memory stays bounded
MAX_KEYS = 100_000  # the oldest key is forgotten beyond this

# trailing run counters, dates, hashes and generated suffixes: "-17", "_0003", "-20261125", "-7f3a9c2e"
_SUFFIX = re.compile(r"(?:[-_.](?:\d+|[0-9a-f]{5,}))+$")

Key = tuple[str, ...]


def name_stem(name: str) -> str:
    """The part of a job name that repeats between runs of the same kind of job."""
    stem = _SUFFIX.sub("", name.strip().lower())
    return stem or name.strip().lower()


def _median(values: Sequence[float]) -> float:
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2.0


class RuntimeSample:
    """The sorted full-size runtimes of one key, read as the distribution of a job's runtime."""

    __slots__ = ("_fresh", "median", "values")

    def __init__(self, values: tuple[float, ...]) -> None:
        self.values = values  # sorted, at least one
        self.median = _median(values)
        self._fresh: float | None = None  # ``per_completion(0)``, asked for every job that has not run yet

    def per_completion(self, attained_s: float) -> float:
        """Least expected seconds of further service per completion for a job that has run ``attained_s``
        (at full size): over every quantum that ends at a sampled runtime beyond ``attained_s``, the expected
        service spent in it divided by the chance to finish within it (the job's Gittins index, inverted).
        A job that has outrun every sample is expected to run on about as long as it has run already."""
        fresh = attained_s <= 0.0
        if fresh and self._fresh is not None:
            return self._fresh
        xs = self.values
        i = bisect.bisect_right(xs, attained_s)
        beyond = len(xs) - i
        if beyond == 0:
            return attained_s
        best, spent = math.inf, 0.0
        for k in range(1, beyond + 1):
            quantum = xs[i + k - 1] - attained_s
            spent += quantum
            best = min(best, (spent + (beyond - k) * quantum) / k)
        if fresh:
            self._fresh = best
        return best


class RuntimeHistory:
    """Bounded per-key windows of full-size runtimes; deterministic, no clock."""

    __slots__ = ("_recent", "_samples", "_sorted")

    def __init__(self) -> None:
        self._recent: dict[Key, deque[float]] = {}
        self._sorted: dict[Key, list[float]] = {}
        self._samples: dict[Key, RuntimeSample] = {}  # read-only views of ``_sorted``, dropped when it changes

    @staticmethod
    def keys(job: Job) -> tuple[Key, Key, Key] | None:
        """The lookup keys of ``job``, most specific first; None for a job without a name."""
        if not job.name:
            return None
        tenant = job.tenant or job.queue
        stem = name_stem(job.name)
        gpus = str(job.total_gpus)
        return (tenant, job.user, stem, gpus), (tenant, "", stem, gpus), (tenant, stem)

    def observe(self, job: Job, runtime_s: float) -> None:
        """Record the full-size runtime of a job that has just succeeded."""
        keys = self.keys(job)
        if keys is None or runtime_s < 0:
            return
        for key in keys:
            recent = self._recent.get(key)
            if recent is None:
                if len(self._recent) >= MAX_KEYS:
                    oldest = next(iter(self._recent))
                    del self._recent[oldest], self._sorted[oldest]
                    self._samples.pop(oldest, None)
                recent = self._recent[key] = deque()
                self._sorted[key] = []
            ordered = self._sorted[key]
            if len(recent) >= WINDOW:
                gone = recent.popleft()
                del ordered[bisect.bisect_left(ordered, gone)]
            recent.append(runtime_s)
            bisect.insort(ordered, runtime_s)
            self._samples.pop(key, None)

    def estimate(self, job: Job) -> float | None:
        """The median full-size runtime of the most specific key that has samples, else None."""
        sample = self.sample(job)
        return None if sample is None else sample.median

    def sample(self, job: Job) -> RuntimeSample | None:
        """The samples ``estimate`` takes its median from, as a distribution; None where it has none."""
        keys = self.keys(job)
        if keys is None:
            return None
        for key in keys:
            ordered = self._sorted.get(key)
            if ordered:
                sample = self._samples.get(key)
                if sample is None:
                    sample = self._samples[key] = RuntimeSample(tuple(ordered))
                return sample
        return None

    def stem_key(self, job: Job) -> Key | None:
        """The widest key a job is found under (its pending jobs are re-ranked when it changes)."""
        keys = self.keys(job)
        return None if keys is None else keys[2]

    def __len__(self) -> int:
        return len(self._recent)
