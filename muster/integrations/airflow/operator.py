"""``MusterJobOperator``: one step of a DAG as a Muster job, submitted once and waited for deferrably.

::

    from muster.integrations.airflow.operator import MusterJobOperator

    train = MusterJobOperator(task_id="train", spec="jobs/train.yaml")          # a templated file
    evaluate = MusterJobOperator(task_id="evaluate", spec={"name": "eval", ...})  # or a mapping
    train >> evaluate

The spec is a Muster job spec or a Kubernetes object of a workload kind (JobSet, RayJob, TrainJob...), given
as a mapping or as a ``.yaml``/``.yml``/``.json`` file that Airflow renders with Jinja like any template.

- **Once per task**: the submission is keyed by the DAG run, the task and its map index; a retried or cleared
  task finds its job again (running: it waits on; succeeded: done at once) and submits afresh only after that
  job failed, was cancelled or rejected (``submission.py``), or when the spec changed since (a fixed DAG).
- **Deferrable** by default: while the job queues and runs, the task waits in the triggerer, not in a worker.
- **Fails with Muster's reason** (``AirflowException``) when the job fails, is cancelled or rejected.
- **Cancels the job** when the task is killed (``on_kill``; for a deferred task, the trigger's ``on_kill``).
- **XCom**: ``job_id`` (pushed as soon as the job is submitted) and ``state``; the return value is the job id.
- ``muster_queue`` puts the job in that Muster queue (the spec's ``queue`` otherwise).
- ``submit_via="kafka"`` produces the job onto the tenant's intents topic (``KafkaSubmitter``; the connection's
  extra names the tenant and the Kafka settings, see ``hook.py``) instead of posting it to the gateway; it is
  still waited for through the gateway. A Muster job spec only (a Kubernetes object goes through the gateway).
- ``wait_for_completion=False`` submits and succeeds at once. With ``after_tasks``, the job waits in Muster for
  the jobs of those upstream tasks to succeed: a chain of submit-only steps queues the whole pipeline in Muster
  at once (estimated, fair-shared and admitted as one), and a last step (or ``MusterJobSensor``) waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from muster.client import AsyncClient, Client, Conflict, JobView, NotFound, SubmitAccepted
from muster.integrations.airflow.hook import DEFAULT_CONN_ID, MusterHook
from muster.integrations.airflow.submission import (
    MAX_SUBMISSIONS,
    JobEnd,
    TaskRef,
    load_spec,
    resubmit,
    task_spec,
)
from muster.integrations.airflow.trigger import MusterJobTrigger
from schemas.status import TERMINAL_STATES


def task_ref(context: Mapping[str, Any]) -> TaskRef:
    """The task instance of ``context`` as the submission's key sees it."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return TaskRef(ti.dag_id, ti.run_id, ti.task_id, -1 if map_index is None else int(map_index))


class MusterJobOperator(BaseOperator):  # type: ignore[misc]  # Airflow is not typed for mypy here
    """Submit ``spec`` to Muster once for this task and wait until the job ends (see the module's text)."""

    template_fields: Sequence[str] = ("spec", "muster_queue")
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {"spec": "yaml"}
    ui_color = "#e8d7f1"

    def __init__(self, *, spec: Mapping[str, Any] | str, muster_conn_id: str = DEFAULT_CONN_ID,
                 muster_queue: str | None = None, wait_for_completion: bool = True, deferrable: bool = True,
                 after_tasks: Sequence[str] = (), cancel_on_kill: bool = True, submit_via: str = "gateway",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if submit_via not in ("gateway", "kafka"):
            raise ValueError(f"submit_via is 'gateway' or 'kafka', not {submit_via!r}")
        self.submit_via = submit_via
        self.spec = spec
        self.muster_conn_id = muster_conn_id
        self.muster_queue = muster_queue  # BaseOperator's ``queue`` is the executor's queue, another thing
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.after_tasks = tuple(after_tasks)
        self.cancel_on_kill = cancel_on_kill
        self.job_id: str | None = None

    def execute(self, context: Any) -> str:
        task = task_ref(context)
        after = [self._upstream_job(context, task_id) for task_id in self.after_tasks]
        spec = task_spec(load_spec(self.spec), task, queue=self.muster_queue, after=after)
        hook = MusterHook(self.muster_conn_id)
        with hook.client() as client:
            if self.submit_via == "kafka":
                job_id, ended = asyncio.run(self._submit_over_kafka(hook, task, spec))
            else:
                job_id, ended = self._submit(client, task, spec)
            self.job_id = job_id
            context["ti"].xcom_push(key="job_id", value=job_id)
            if not self.wait_for_completion:
                return job_id
            if ended is not None:  # an earlier try's job, already finished: nothing to wait for
                end = JobEnd(ended.job_id, ended.state, ended.reason, ended.message)
            elif self.deferrable:
                self.defer(trigger=MusterJobTrigger(job_id, self.muster_conn_id, cancel_on_kill=self.cancel_on_kill,
                                                    kill_reason=self._kill_reason(task),
                                                    must_exist=self.submit_via == "gateway"),
                           method_name="execute_complete")
            else:
                # any end: the terminal states are waited for, so JobEnded is never raised
                job = client.wait(job_id, must_exist=self.submit_via == "gateway")
                end = JobEnd(job.job_id, job.state, job.reason, job.message)
        return self._finish(context, end)

    def execute_complete(self, context: Any, event: Mapping[str, Any]) -> str:
        """Resumed by the trigger's event: succeed with the job id, or fail with Muster's reason."""
        return self._finish(context, JobEnd.from_payload(event))

    def on_kill(self) -> None:
        """The task was killed while it waited in a worker: cancel the job it submitted."""
        if self.job_id is None or not self.cancel_on_kill:
            return
        hook = MusterHook(self.muster_conn_id)
        with hook.client() as client:
            if client.get(self.job_id).state not in TERMINAL_STATES:
                client.cancel(self.job_id, f"the Airflow task {self.task_id} was killed")

    def _submit(self, client: Client, task: TaskRef, spec: dict[str, Any]) -> tuple[str, JobView | None]:
        """Submit under the task's first key whose job did not end without success (see ``submission.py``): the
        job id, and the job's view when it is an earlier try's job that already succeeded."""
        for n in range(1, MAX_SUBMISSIONS + 1):
            try:
                accepted = client.submit(spec, idempotency_key=task.key(n))
            except Conflict as exc:
                if exc.error != "idempotency_key_reused":
                    raise
                # the spec changed since an earlier try submitted under this key (a fixed DAG, a task cleared
                # with other params): the changed spec is another job
                self.log.warning("The spec changed since an earlier try of this task: %s; submitting afresh",
                                 exc.detail)
                continue
            if not isinstance(accepted, SubmitAccepted):
                raise AirflowException("the spec has a schedule: it defines a recurring job, which a task cannot "
                                       "wait for; remove schedule (Airflow schedules the DAG)")
            if not accepted.duplicate:
                self.log.info("Submitted Muster job %s (%s)", accepted.job_id, accepted.location)
                return accepted.job_id, None
            followed = self._follow_earlier(client.get(accepted.job_id))
            if followed is not None:
                return followed
        raise AirflowException(f"this task submitted {MAX_SUBMISSIONS} jobs already: not one more")

    async def _submit_over_kafka(self, hook: MusterHook, task: TaskRef,
                                 spec: dict[str, Any]) -> tuple[str, JobView | None]:
        """As ``_submit``, producing onto the tenant's intents topic (``KafkaSubmitter``): a key's job id is the
        gateway's (a hash of tenant and key), so the gateway tells whether that job exists and how it ended. A
        job the gateway does not know yet is produced (again: the queue manager queues one id once)."""
        url, token, options = hook.gateway()
        async with AsyncClient(url, token, **options) as client, hook.kafka_submitter() as submitter:
            for n in range(1, MAX_SUBMISSIONS + 1):
                intent = submitter.intent(spec, idempotency_key=task.key(n))
                try:
                    job = await client.get(intent.job_id)
                except NotFound:
                    produced = await submitter.send(submitter.envelope(intent))
                    self.log.info("Produced Muster job %s onto %s (partition %d, offset %d)", produced.job_id,
                                  produced.topic, produced.partition, produced.offset)
                    return produced.job_id, None
                followed = self._follow_earlier(job)
                if followed is not None:
                    return followed
        raise AirflowException(f"this task submitted {MAX_SUBMISSIONS} jobs already: not one more")

    def _follow_earlier(self, job: JobView) -> tuple[str, JobView | None] | None:
        """An earlier try's job under the current key: followed (its id, and its view once it has ended) unless
        it ended without success, when None says to submit afresh under the next key."""
        if resubmit(job.state):
            self.log.info("Muster job %s of an earlier try ended %s: submitting afresh", job.job_id, job.state)
            return None
        self.log.info("Muster job %s was submitted by an earlier try of this task (%s): following it",
                      job.job_id, job.state)
        return job.job_id, job if job.state in TERMINAL_STATES else None

    @staticmethod
    def _upstream_job(context: Any, task_id: str) -> str:
        job_id = context["ti"].xcom_pull(task_ids=task_id, key="job_id")
        if not job_id:
            raise AirflowException(f"after_tasks names {task_id!r}, which pushed no Muster job id: is it a "
                                   "MusterJobOperator upstream of this task?")
        return str(job_id)

    def _kill_reason(self, task: TaskRef) -> str:
        return f"the Airflow task {task.dag_id}.{task.task_id} of run {task.run_id} was killed"

    def _finish(self, context: Any, end: JobEnd) -> str:
        context["ti"].xcom_push(key="state", value=end.state)
        if not end.succeeded():
            raise AirflowException(end.failure())
        self.log.info("Muster job %s succeeded", end.job_id)
        return end.job_id
