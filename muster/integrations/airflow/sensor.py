"""``MusterJobSensor``: waits for an existing Muster job (one a submit-only step queued, or any job id) to
reach one of ``states``; fails with Muster's reason when the job ended otherwise. Deferrable by default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseSensorOperator

from muster.integrations.airflow.hook import DEFAULT_CONN_ID, MusterHook
from muster.integrations.airflow.submission import JobEnd
from muster.integrations.airflow.trigger import MusterJobTrigger
from schemas.status import TERMINAL_STATES


class MusterJobSensor(BaseSensorOperator):  # type: ignore[misc]  # Airflow is not typed for mypy here
    """Wait until job ``job_id`` (templated: ``{{ ti.xcom_pull('train', key='job_id') }}``) is in ``states``."""

    template_fields: Sequence[str] = ("job_id",)

    def __init__(self, *, job_id: str, states: Sequence[str] = ("succeeded",),
                 muster_conn_id: str = DEFAULT_CONN_ID, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.states = tuple(states)
        self.muster_conn_id = muster_conn_id
        self.deferrable = deferrable

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if not self.poke(context):
            self.defer(trigger=MusterJobTrigger(self.job_id, self.muster_conn_id, states=self.states,
                                                cancel_on_kill=False),
                       method_name="execute_complete")
        return self.job_id

    def poke(self, context: Any) -> bool:
        with MusterHook(self.muster_conn_id).client() as client:
            job = client.get(self.job_id)
        end = JobEnd(job.job_id, job.state, job.reason, job.message)
        if end.succeeded(frozenset(self.states)):
            return True
        if job.state in TERMINAL_STATES:
            raise AirflowException(end.failure() + f"; waited for {', '.join(self.states)}")
        return False

    def execute_complete(self, context: Any, event: Mapping[str, Any]) -> str:
        end = JobEnd.from_payload(event)
        if not end.succeeded(frozenset(self.states)):
            raise AirflowException(end.failure() + f"; waited for {', '.join(self.states)}")
        return end.job_id
