"""``MusterJobTrigger``: waits in Airflow's triggerer until a Muster job ends, on the gateway's live stream.

Everything it needs is in its serialised arguments (the job id, the connection, the states waited for), so a
triggerer that restarts, or hands the trigger to another triggerer, picks the wait up where it was: the job is
read afresh when the stream opens. A broken stream is reconnected, however long the gateway is away. When a
user kills the deferred task (mark failed, clear), ``on_kill`` cancels the job; a triggerer's restart does not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from muster.client import JobEnded, NotFound
from muster.integrations.airflow.hook import DEFAULT_CONN_ID, MusterHook
from muster.integrations.airflow.submission import JobEnd
from schemas.status import TERMINAL_STATES


class MusterJobTrigger(BaseTrigger):  # type: ignore[misc]  # Airflow is not typed for mypy here
    """Fires once: when job ``job_id`` is in one of ``states`` (any end by default), or ended otherwise."""

    def __init__(self, job_id: str, muster_conn_id: str = DEFAULT_CONN_ID,
                 states: Sequence[str] = tuple(sorted(TERMINAL_STATES)), cancel_on_kill: bool = True,
                 kill_reason: str = "", must_exist: bool = True) -> None:
        super().__init__()
        self.job_id = job_id
        self.muster_conn_id = muster_conn_id
        self.states = tuple(states)
        self.cancel_on_kill = cancel_on_kill
        self.kill_reason = kill_reason
        self.must_exist = must_exist  # False: a job just produced onto Kafka, not yet known to the gateway

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"job_id": self.job_id, "muster_conn_id": self.muster_conn_id, "states": list(self.states),
                 "cancel_on_kill": self.cancel_on_kill, "kill_reason": self.kill_reason,
                 "must_exist": self.must_exist})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = MusterHook(self.muster_conn_id)
        async with await hook.async_client() as client:
            try:
                job = await client.wait(self.job_id, self.states, must_exist=self.must_exist)
                end = JobEnd(job.job_id, job.state, job.reason, job.message)
            except JobEnded as ended:
                end = JobEnd(ended.job.job_id, ended.job.state, ended.job.reason, ended.job.message)
            except NotFound:
                end = JobEnd(self.job_id, "unknown", error="the gateway does not know the job (deleted, or another "
                                                           "tenant's token)")
        yield TriggerEvent(end.payload())

    async def on_kill(self) -> None:
        """The user killed the deferred task: cancel its job (a finished job is left as it is)."""
        if not self.cancel_on_kill:
            return
        hook = MusterHook(self.muster_conn_id)
        async with await hook.async_client() as client:
            job = await client.get(self.job_id)
            if job.state not in TERMINAL_STATES:
                await client.cancel(self.job_id, self.kill_reason or "the Airflow task was killed")
