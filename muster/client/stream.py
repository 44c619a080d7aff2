"""The gateway's live stream (``GET /v1/stream``, Server-Sent Events) as typed events, and the rule ``wait``
applies to the job changes it sees. Pure: no I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from muster.client.errors import JobEnded, ProtocolError
from schemas.api import JobRow, JobView, StreamReady
from schemas.capacity import NodeState
from schemas.status import TERMINAL_STATES
from schemas.usage import QueueUsageReported

KINDS = ("job", "queue", "node")


@dataclass(frozen=True)
class StreamOpened:
    """The stream is open: read current state now (``get``, ``list_jobs``), then apply the changes that
    follow (compare ``updated_at``: a change may repeat what the read returned)."""

    at: datetime
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class JobsChanged:
    """Jobs changed; each is its latest view (changes of one job within a batch are coalesced)."""

    jobs: tuple[JobRow, ...]


@dataclass(frozen=True)
class JobsRemoved:
    """Jobs no longer known to the gateway."""

    job_ids: tuple[str, ...]


@dataclass(frozen=True)
class QueuesChanged:
    """Queue usage reports (the quota accountant's latest per queue)."""

    usage: tuple[QueueUsageReported, ...]


class NodeChange(BaseModel):
    """A node's latest state; ``state`` is None when the node was removed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # "<cluster>/<node>"
    state: NodeState | None


@dataclass(frozen=True)
class NodesChanged:
    nodes: tuple[NodeChange, ...]


StreamEvent = StreamOpened | JobsChanged | JobsRemoved | QueuesChanged | NodesChanged

_JOBS: TypeAdapter[list[JobRow]] = TypeAdapter(list[JobRow])
_IDS: TypeAdapter[list[str]] = TypeAdapter(list[str])
_QUEUES: TypeAdapter[list[QueueUsageReported]] = TypeAdapter(list[QueueUsageReported])
_NODES: TypeAdapter[list[NodeChange]] = TypeAdapter(list[NodeChange])


def typed_event(event: str, data: Any) -> StreamEvent | None:
    """The typed form of one decoded event; None for an event this client does not know (a newer gateway)."""
    try:
        if event == "ready":
            ready = StreamReady.model_validate(data)
            return StreamOpened(ready.at, tuple(ready.kinds))
        if event == "jobs":
            return JobsChanged(tuple(_JOBS.validate_python(data)))
        if event == "removed":
            return JobsRemoved(tuple(_IDS.validate_python(data)))
        if event == "queues":
            return QueuesChanged(tuple(_QUEUES.validate_python(data)))
        if event == "nodes":
            return NodesChanged(tuple(_NODES.validate_python(data)))
    except ValidationError as exc:
        raise ProtocolError(f"unreadable {event!r} event on the stream: {exc}") from None
    return None


class SseDecoder:
    """Server-Sent Events, line by line: ``line()`` returns (event name, decoded JSON data) when a blank
    line ends an event; comments (``: ping``) and partial events return None."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []

    def line(self, text: str) -> tuple[str, Any] | None:
        if not text:
            if not self._data:
                self._event = "message"
                return None
            event, data = self._event, "\n".join(self._data)
            self._event, self._data = "message", []
            try:
                return event, json.loads(data)
            except ValueError:
                raise ProtocolError(f"event {event!r} on the stream is not JSON: {data[:200]!r}") from None
        if text.startswith(":"):
            return None
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None


def normalise_states(states: str | Iterable[str] | None) -> frozenset[str]:
    """What ``wait`` waits for: one state, several, or (None) any terminal state."""
    if states is None:
        return frozenset(TERMINAL_STATES)
    wanted = frozenset([states] if isinstance(states, str) else states)
    if not wanted:
        raise ValueError("wait for at least one state")
    return wanted


class JobWaiter:
    """Follows one job's views: ``seen`` returns the view once it is in one of ``states``, raises ``JobEnded``
    when the job finished otherwise, and returns None while it is still on its way."""

    def __init__(self, job_id: str, states: frozenset[str]) -> None:
        self.job_id = job_id
        self.states = states
        self.last: JobView | None = None

    def seen(self, job: JobView) -> JobView | None:
        if job.job_id != self.job_id:
            return None
        if self.last is not None and job.updated_at < self.last.updated_at:
            return None  # an older view than one already seen (a read racing the stream)
        self.last = job
        if job.state in self.states:
            return job
        if job.state in TERMINAL_STATES:
            raise JobEnded(job, self.states)
        return None

    def changed(self, event: StreamEvent) -> JobView | None:
        """The job's view if ``event`` brings it in a wanted state."""
        if isinstance(event, JobsChanged):
            for job in event.jobs:
                done = self.seen(job)
                if done is not None:
                    return done
        return None
