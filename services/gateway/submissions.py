"""The gateway's small local record of recent submissions: jobs the status view may not show yet,
and the idempotency keys they were sent with."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import orjson

from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec

RECENT_LIMIT = 10_000


def spec_digest(spec: JobSpec) -> str:
    """A digest of a spec's content (key order does not matter): tells a retry from a different job."""
    return hashlib.sha256(orjson.dumps(spec.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True, slots=True)
class Submitted:
    submission: SubmitJob
    digest: str


class RecentSubmissions:
    """The last ``limit`` submissions this gateway published, by job id and by (tenant, idempotency key)."""

    def __init__(self, limit: int = RECENT_LIMIT) -> None:
        self._by_id: OrderedDict[str, Submitted] = OrderedDict()
        self._by_key: dict[tuple[str, str], str] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, job_id: str) -> Submitted | None:
        return self._by_id.get(job_id)

    def by_key(self, tenant: str, idempotency_key: str) -> Submitted | None:
        job_id = self._by_key.get((tenant, idempotency_key))
        return None if job_id is None else self._by_id.get(job_id)

    def all(self) -> list[Submitted]:
        return list(self._by_id.values())

    def record(self, submission: SubmitJob) -> Submitted:
        entry = Submitted(submission, spec_digest(submission.spec))
        self._by_id[submission.job_id] = entry
        self._by_id.move_to_end(submission.job_id)
        if submission.idempotency_key is not None:
            self._by_key[(submission.tenant, submission.idempotency_key)] = submission.job_id
        while len(self._by_id) > self._limit:
            _, old = self._by_id.popitem(last=False)
            key = old.submission.idempotency_key
            if key is not None and self._by_key.get((old.submission.tenant, key)) == old.submission.job_id:
                del self._by_key[(old.submission.tenant, key)]
        return entry
