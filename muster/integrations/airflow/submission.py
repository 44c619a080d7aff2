"""What the Airflow provider submits and how it reads the answer, without Airflow: the job spec a task's
``spec`` makes, the idempotency keys of a task's submissions, and the task's outcome from the job's end.

A task of a DAG run submits its job under a key made of the DAG, the run, the task and its map index, so a
retried task (a worker lost, a task cleared) finds the job it already submitted instead of queueing a second
one. Only when that job ended without success (failed, cancelled, rejected) does a later try submit afresh,
under the next key of the chain (``<key>#2``, ``<key>#3``...): a cleared task after a success reruns nothing,
and a retry after a failure runs the job again. The keys live in Muster, so no state is kept in Airflow and
there is no window between submitting and remembering the submission.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from schemas.status import TERMINAL_STATES

#: a job whose key names it ended so: a later try of the task submits afresh under the next key
RESUBMIT_AFTER = frozenset({"failed", "cancelled", "rejected"})
#: the most submissions one task instance makes (a DAG's retries are far fewer)
MAX_SUBMISSIONS = 1000
#: the labels and annotations a task's job carries (``muster get``, the dashboard and filters show them)
LABEL_DAG = "airflow.apache.org/dag-id"
LABEL_TASK = "airflow.apache.org/task-id"
ANNOTATION_RUN = "airflow.apache.org/run-id"
ANNOTATION_MAP_INDEX = "airflow.apache.org/map-index"

_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class SpecError(ValueError):
    """The task's ``spec`` is not a job spec (not a mapping, unreadable YAML)."""


@dataclass(frozen=True)
class TaskRef:
    """The task instance a job is submitted for (its try number is left out: every try is the same task)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1

    def key(self, submission: int = 1) -> str:
        """The idempotency key of the task's ``submission``-th job (1 for the first)."""
        if submission < 1:
            raise ValueError("submissions count from 1")
        digest = hashlib.sha256("\x1f".join((self.dag_id, self.run_id, self.task_id, str(self.map_index)))
                                .encode()).hexdigest()[:40]
        base = f"airflow-{digest}"
        return base if submission == 1 else f"{base}#{submission}"


def load_spec(spec: Mapping[str, Any] | str) -> dict[str, Any]:
    """The job spec of a task: a mapping as given, or the YAML (or JSON) text a templated file rendered to."""
    if isinstance(spec, str):
        try:
            loaded = yaml.safe_load(spec)
        except yaml.YAMLError as exc:
            raise SpecError(f"the spec is not readable YAML: {exc}") from None
    else:
        loaded = spec
    if not isinstance(loaded, Mapping):
        raise SpecError(f"the spec must be a mapping (a job spec or a Kubernetes object), not {type(loaded).__name__}"
                        + (": a path must end in .yaml, .yml or .json to be read as a file"
                           if isinstance(spec, str) and "\n" not in spec.strip() else ""))
    return dict(loaded)


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label value: 63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends."""
    return _LABEL_UNSAFE.sub("-", text)[:63].strip("-_.")


def task_spec(spec: Mapping[str, Any], task: TaskRef, *, queue: str | None = None,
              after: Sequence[str] = ()) -> dict[str, Any]:
    """The spec submitted for ``task``: ``spec`` with the queue given, the task's labels and annotations, and an
    ``after`` entry for each job id in ``after`` (an upstream task's job, which must succeed first).

    A Kubernetes object (``apiVersion`` and ``kind``) is submitted as it is: its queue is its ``muster.dev/queue``
    label, and ``queue`` and ``after`` do not apply to it."""
    out = dict(spec)
    if "apiVersion" in out and "kind" in out:
        if queue is not None or after:
            raise SpecError("queue and after apply to a Muster job spec, not to a Kubernetes object: label the "
                            "object muster.dev/queue instead")
        return out
    if queue is not None:
        out["queue"] = queue
    out["labels"] = {**dict(out.get("labels") or {}), LABEL_DAG: label_value(task.dag_id),
                     LABEL_TASK: label_value(task.task_id)}
    annotations = {**dict(out.get("annotations") or {}), ANNOTATION_RUN: task.run_id}
    if task.map_index >= 0:
        annotations[ANNOTATION_MAP_INDEX] = str(task.map_index)
    out["annotations"] = annotations
    if after:
        named = {entry.get("job") for entry in out.get("after") or [] if isinstance(entry, Mapping)}
        out["after"] = [*list(out.get("after") or []),
                        *({"job": job_id, "on": "succeeded"} for job_id in after if job_id not in named)]
    return out


def resubmit(state: str) -> bool:
    """Whether a later try submits afresh when the task's latest job is in ``state``."""
    return state in RESUBMIT_AFTER


@dataclass(frozen=True)
class JobEnd:
    """How a task's job ended, as the trigger reports it to the task (a ``TriggerEvent``'s payload)."""

    job_id: str
    state: str
    reason: str = ""
    message: str = ""
    error: str = ""  # the wait itself failed (the job is unknown to the gateway): why

    def payload(self) -> dict[str, str]:
        return {"job_id": self.job_id, "state": self.state, "reason": self.reason, "message": self.message,
                "error": self.error}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> JobEnd:
        return cls(job_id=str(payload.get("job_id", "")), state=str(payload.get("state", "")),
                   reason=str(payload.get("reason", "")), message=str(payload.get("message", "")),
                   error=str(payload.get("error", "")))

    def succeeded(self, wanted: frozenset[str] = frozenset({"succeeded"})) -> bool:
        return not self.error and self.state in wanted

    def failure(self) -> str:
        """The task's error message when the job did not end as wanted: Muster's reason and message."""
        if self.error:
            return f"Muster job {self.job_id}: {self.error}"
        why = ": ".join(part for part in (self.reason, self.message) if part)
        ended = "ended" if self.state in TERMINAL_STATES else "is"
        return f"Muster job {self.job_id} {ended} {self.state}" + (f" ({why})" if why else "")
