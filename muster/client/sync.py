"""``Client``: the gateway's API, synchronously, with typed answers and typed errors."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from muster.client import operations as ops
from muster.client.config import ClientSettings, context_settings, load_settings
from muster.client.errors import NotFound, TransportError, WaitTimeout, error_from_response
from muster.client.operations import Call, ConfigItem, ConfigKind, Submitted
from muster.client.stream import (
    KINDS,
    JobsRemoved,
    JobWaiter,
    SseDecoder,
    StreamEvent,
    StreamOpened,
    normalise_states,
    typed_event,
)
from schemas.api import (
    ActionAccepted,
    ConfigChange,
    ConfigDocument,
    Explanation,
    JobEvents,
    JobList,
    JobView,
    QueueView,
    RecurringChange,
    RecurringView,
    SubmitAccepted,
)
from schemas.jobspec import JobSpec

T = TypeVar("T")

#: how long a stream read may wait: the gateway sends a keep-alive comment every 15 s
STREAM_READ_TIMEOUT_S = 45.0
#: the pause before ``wait`` opens the stream again after it ended or broke
RECONNECT_PAUSE_S = 0.5


class Client:
    """Synchronous client of the gateway's ``/v1`` API.

    Every answer is the API's own pydantic model (``schemas.api``); every refusal raises a subclass of
    ``ApiError`` carrying the API's error body. Use it as a context manager, or call ``close()``.
    """

    def __init__(self, url: str, token: str, *, timeout: float = 10.0, verify: ssl.SSLContext | str | bool = True,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport, verify=verify,
                                  headers={"Authorization": f"Bearer {token}"})

    @classmethod
    def from_settings(cls, settings: ClientSettings, **options: Any) -> Self:
        return cls(settings.url, settings.token, **options)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> Self:
        """As the ``muster`` command connects: ``MUSTER_URL``/``MUSTER_TOKEN``, ``MUSTER_CONTEXT``, the
        project's ``.muster/cli.yaml``, then the current context."""
        return cls.from_settings(load_settings(environ), **options)

    @classmethod
    def from_context(cls, name: str | None = None, **options: Any) -> Self:
        """The named context of ``~/.config/muster/config.yaml`` (the current one when ``name`` is None)."""
        return cls.from_settings(context_settings(name), **options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def send(self, call: Call[T]) -> T:
        """Send one call; its answer read into its model, or the typed error of a refusal."""
        try:
            response = self._http.request(call.method, call.path, params=call.params, json=call.json,
                                          headers=call.headers)
        except httpx.HTTPError as exc:
            raise TransportError(f"cannot reach the gateway at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        return call.parse(response.json())

    # ------------------------------------------------------------------------------ jobs

    def submit(self, spec: JobSpec | Mapping[str, Any], *, idempotency_key: str | None = None) -> Submitted:
        """Queue a job. With ``idempotency_key`` a retry (after a timeout, a 503...) is the same job:
        ``duplicate`` is then true and nothing is queued twice."""
        return self.send(ops.submit(spec, idempotency_key))

    def submit_workload(self, obj: Mapping[str, Any], *, queue: str | None = None,
                        related: Sequence[Mapping[str, Any]] = (), idempotency_key: str | None = None) -> Submitted:
        """Queue a Kubernetes object of a workload kind (JobSet, TrainJob, RayJob, RayCluster, LeaderWorkerSet,
        Deployment, StatefulSet, a ``List`` of Pods) through Muster: the gateway queues it with the roles read
        from it, and the dispatcher creates it, held back, in the tenant's namespace once it is admitted. The
        queue is ``queue``, else the object's ``muster.dev/queue`` label; a TrainJob's training runtime goes in
        ``related``. ``InvalidWorkload`` before anything is sent when the object cannot be a job."""
        return self.send(ops.submit_workload(obj, queue=queue, related=related, idempotency_key=idempotency_key))

    def get(self, job_id: str) -> JobView:
        return self.send(ops.get_job(job_id))

    def list_jobs(self, *, queue: str | None = None, state: str | None = None, tenant: str | None = None,
                  active: bool | None = None, limit: int = 100, offset: int = 0) -> JobList:
        """One page of the jobs the caller may see, newest first; ``total`` counts every match."""
        return self.send(ops.list_jobs(queue=queue, state=state, tenant=tenant, active=active, limit=limit,
                                       offset=offset))

    def iter_jobs(self, *, queue: str | None = None, state: str | None = None, tenant: str | None = None,
                  active: bool | None = None, page_size: int = 500) -> Iterator[JobView]:
        """Every matching job, page by page (each once, even when new submissions shift the pages)."""
        seen: set[str] = set()
        offset = 0
        while True:
            page = self.list_jobs(queue=queue, state=state, tenant=tenant, active=active, limit=page_size,
                                  offset=offset)
            for job in page.items:
                if job.job_id not in seen:
                    seen.add(job.job_id)
                    yield job
            offset += len(page.items)
            if not page.items or offset >= page.total:
                return

    def describe(self, job_id: str) -> Explanation:
        """Why the job is where it is: reason, message, queue position, estimated start, history."""
        return self.send(ops.describe(job_id))

    def events(self, job_id: str) -> JobEvents:
        """The job's Kubernetes objects per attempt and its events, oldest first."""
        return self.send(ops.events(job_id))

    def cancel(self, job_id: str, reason: str = "", *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        """Cancel a job (a running one is stopped). Like every request about a job, it waits up to ``wait``
        seconds for the queue manager's answer: ``outcome`` ``applied`` or ``unchanged``; a refusal raises
        ``Conflict`` with the reason as its ``error``; ``pending``: no answer yet (``action_outcome`` tells it
        later). ``wait=0`` returns at once."""
        return self.send(ops.cancel(job_id, reason, wait))

    def suspend(self, job_id: str, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return self.send(ops.suspend(job_id, wait))

    def resume(self, job_id: str, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return self.send(ops.resume(job_id, wait))

    def set_priority(self, job_id: str, priority_class: str, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return self.send(ops.set_priority(job_id, priority_class, wait))

    def scale(self, job_id: str, replicas: int, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return self.send(ops.scale(job_id, replicas, wait))

    def action_outcome(self, job_id: str, event_id: str) -> ActionAccepted:
        """The outcome of an earlier request (``NotFound`` with ``not_answered`` while it has none)."""
        return self.send(ops.action_outcome(job_id, event_id))

    def queues(self) -> list[QueueView]:
        return self.send(ops.queues())

    # ------------------------------------------------------------------------------ recurring jobs

    def recurring_jobs(self, tenant: str | None = None) -> list[RecurringView]:
        return self.send(ops.recurring_jobs(tenant))

    def recurring(self, name: str) -> RecurringView:
        return self.send(ops.recurring(name))

    def suspend_recurring(self, name: str) -> RecurringChange:
        return self.send(ops.recurring_action(name, "suspend"))

    def resume_recurring(self, name: str) -> RecurringChange:
        return self.send(ops.recurring_action(name, "resume"))

    def delete_recurring(self, name: str) -> RecurringChange:
        return self.send(ops.recurring_action(name, "delete"))

    # ------------------------------------------------------------------------------ configuration

    def config(self) -> ConfigDocument:
        """The configuration (members see their own tenant and queues, and the shared items)."""
        return self.send(ops.config())

    def define(self, kind: ConfigKind, item: ConfigItem) -> ConfigChange:
        """Create or replace a configuration item (administrators; others get ``Forbidden``). ``changed`` is
        false when the gateway already held an equal item (nothing was published)."""
        return self.send(ops.define(kind, item))

    def undefine(self, kind: ConfigKind, name: str) -> ConfigChange:
        """Delete a configuration item (administrators). ``Conflict`` while other items refer to it, or while
        unfinished jobs are in the queue or of the priority class (``error`` ``in_use`` / ``has_unfinished_jobs``)."""
        return self.send(ops.undefine(kind, name))

    # ------------------------------------------------------------------------------ live changes

    def watch(self, *, kinds: Iterable[str] = KINDS, job_id: str | None = None, queue: str | None = None,
              tenant: str | None = None) -> Iterator[StreamEvent]:
        """The live stream: ``StreamOpened`` first, then every change the caller may see, until the gateway
        ends the stream (on shutdown) or the caller stops iterating. Raises ``TransportError`` when it breaks."""
        for event in self._stream(tuple(kinds), job_id, queue, tenant, STREAM_READ_TIMEOUT_S):
            if event is not None:
                yield event

    def _stream(self, kinds: tuple[str, ...], job_id: str | None, queue: str | None, tenant: str | None,
                read_timeout: float) -> Iterator[StreamEvent | None]:
        """The stream's events, and None for every line that completes none (keep-alives included), so a
        caller with a deadline gets control back at least every keep-alive."""
        params = ops.stream_params(kinds=kinds, job_id=job_id, queue=queue, tenant=tenant)
        timeout = httpx.Timeout(self._http.timeout.connect, read=read_timeout)
        decoder = SseDecoder()
        try:
            with self._http.stream("GET", "/v1/stream", params=params, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_from_response(response)
                for line in response.iter_lines():
                    decoded = decoder.line(line)
                    yield None if decoded is None else typed_event(*decoded)
        except httpx.HTTPError as exc:
            raise TransportError(f"the stream from the gateway at {self.url} broke: {exc!r}") from exc

    def wait(self, job_id: str, states: str | Iterable[str] | None = None, timeout: float | None = None, *,
             must_exist: bool = True) -> JobView:
        """Block until the job is in one of ``states`` (default: any terminal state) and return its view.

        Follows the live stream (no polling), reading the job once each time the stream opens; reconnects
        when the stream ends or breaks. Raises ``WaitTimeout`` after ``timeout`` seconds, ``JobEnded`` when
        the job finished in a state not waited for, ``NotFound`` when the gateway does not know the job,
        unless ``must_exist`` is False (a job just produced onto Kafka, which the gateway learns of from
        the queue manager's status): then it is waited for too.
        """
        waiter = JobWaiter(job_id, normalise_states(states))
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float:
            if deadline is None:
                return STREAM_READ_TIMEOUT_S
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(job_id, waiter.states, timeout or 0.0, waiter.last)
            return min(remaining, STREAM_READ_TIMEOUT_S)

        while True:
            try:
                for event in self._stream(("job",), job_id, None, None, left()):
                    left()
                    if isinstance(event, StreamOpened | JobsRemoved):
                        done = self._read(waiter, must_exist)
                    else:
                        done = None if event is None else waiter.changed(event)
                    if done is not None:
                        return done
            except TransportError:
                left()
            time.sleep(min(RECONNECT_PAUSE_S, left()))

    def _read(self, waiter: JobWaiter, must_exist: bool) -> JobView | None:
        try:
            job = self.get(waiter.job_id)
        except NotFound:
            if must_exist:
                raise
            return None
        return waiter.seen(job)

    def submit_and_wait(self, spec: JobSpec | Mapping[str, Any], states: str | Iterable[str] | None = None, *,
                        idempotency_key: str | None = None, timeout: float | None = None) -> JobView:
        """``submit`` then ``wait`` for the job it queued."""
        accepted = self.submit(spec, idempotency_key=idempotency_key)
        if not isinstance(accepted, SubmitAccepted):
            raise ValueError(f"the spec has a schedule: it defined the recurring job {accepted.name}, "
                             "which has nothing to wait for")
        return self.wait(accepted.job_id, states, timeout)
