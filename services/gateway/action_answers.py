"""The queue manager's answers to requests about jobs, as the gateway sees them go by in job statuses
(``JobStatusChanged.last_action``), by the request's event id; and waiting for one.

A request (cancel, suspend, resume, priority, scale) is published as an intent, and the gateway returns its
envelope's event id. The queue manager answers in the job's next status: applied, unchanged, or refused with
a reason. The compacted status topic keeps only a job's last answer, so the answers seen are remembered here
(bounded: the most recent ``limit``), and a handler may wait, bounded, for the answer to the request it just
published.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from schemas.envelope import Envelope
from schemas.status import ActionOutcome, JobStatusChanged

#: answers remembered (each a few hundred bytes)
ANSWERS_LIMIT = 10_000


class ActionAnswers:
    """Answers by request event id, with the job each is about."""

    def __init__(self, limit: int = ANSWERS_LIMIT) -> None:
        self._limit = limit
        self._answers: OrderedDict[str, tuple[str, ActionOutcome]] = OrderedDict()
        self._waiting: dict[str, list[asyncio.Future[ActionOutcome]]] = {}

    def __len__(self) -> int:
        return len(self._answers)

    def apply(self, key: str, envelope: Envelope | None) -> None:
        """A change of the status view (``GatewayContext.status_changed``)."""
        if envelope is None or not isinstance(envelope.payload, JobStatusChanged):
            return
        status = envelope.payload
        if status.last_action is not None:
            self.add(status.job_id, status.last_action)

    def add(self, job_id: str, answer: ActionOutcome) -> None:
        self._answers[answer.event_id] = (job_id, answer)
        self._answers.move_to_end(answer.event_id)
        while len(self._answers) > self._limit:
            self._answers.popitem(last=False)
        for waiter in self._waiting.pop(answer.event_id, []):
            if not waiter.done():
                waiter.set_result(answer)

    def get(self, job_id: str, event_id: str) -> ActionOutcome | None:
        """The answer to request ``event_id`` about ``job_id`` (None: not seen, or about another job)."""
        found = self._answers.get(event_id)
        return found[1] if found is not None and found[0] == job_id else None

    async def wait(self, job_id: str, event_id: str, timeout_s: float) -> ActionOutcome | None:
        """The answer, waiting for it at most ``timeout_s`` seconds (None: no answer by then)."""
        answer = self.get(job_id, event_id)
        if answer is not None or timeout_s <= 0:
            return answer
        waiter: asyncio.Future[ActionOutcome] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(event_id, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return None
        finally:
            waiters = self._waiting.get(event_id)
            if waiters is not None:
                if waiter in waiters:
                    waiters.remove(waiter)
                if not waiters:
                    self._waiting.pop(event_id, None)
