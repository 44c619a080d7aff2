"""The annotations with which a Kubernetes object submitted to Muster sets its job's own fields: priority
class, runtime estimate, preemptibility, and the environment entries that only look like secrets. One reading
for every way in through the cluster: the gateway's ``batch/v1`` Jobs and every workload kind
(``services.spec.workload_spec``). Pure.

- ``muster.dev/priority-class``: the priority class (default ``normal``);
- ``muster.dev/runtime-estimate``: ``3600``, ``90m``, ``6h``, ``2d`` (``services.spec.durations``);
- ``muster.dev/preemptible``: ``true``/``yes``/``1`` (any case) or anything else for false; absent: true;
- ``muster.dev/plain-env``: comma-separated names of plain environment values that are not secrets;
- ``muster.dev/idle-timeout``: a duration as above: the job's ``idle_timeout_s`` (an interactive session).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from schemas.kube import IDLE_TIMEOUT, PREEMPTIBLE, PRIORITY_CLASS, RUNTIME_ESTIMATE
from services.spec.durations import parse_duration
from services.spec.kube_pods import plain_env_names

DEFAULT_PRIORITY_CLASS = "normal"
_TRUE = frozenset({"true", "yes", "1"})


@dataclass(frozen=True, slots=True)
class SubmissionAnnotations:
    """The job fields an object's annotations give."""

    priority_class: str
    runtime_estimate_s: float | None
    preemptible: bool
    plain_env: frozenset[str]
    idle_timeout_s: float | None = None


def parse_runtime_estimate(text: str) -> float:
    """``"3600"``, ``"90m"``, ``"6h"``, ``"2d"`` in seconds; ``ValueError`` naming the annotation otherwise."""
    return _duration(RUNTIME_ESTIMATE, text)


def _duration(annotation: str, text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError:
        raise ValueError(f"{annotation}: not a duration: {text!r}") from None


def submission_annotations(annotations: Mapping[str, str]) -> SubmissionAnnotations:
    """What the annotations say (see the module); ``ValueError`` for a runtime estimate that is no duration."""
    estimate, idle = annotations.get(RUNTIME_ESTIMATE), annotations.get(IDLE_TIMEOUT)
    return SubmissionAnnotations(
        priority_class=annotations.get(PRIORITY_CLASS, DEFAULT_PRIORITY_CLASS),
        runtime_estimate_s=None if estimate is None else parse_runtime_estimate(estimate),
        preemptible=str(annotations.get(PREEMPTIBLE, "true")).strip().lower() in _TRUE,
        plain_env=plain_env_names(annotations),
        idle_timeout_s=None if idle is None else _duration(IDLE_TIMEOUT, idle),
    )
