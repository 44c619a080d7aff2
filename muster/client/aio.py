"""``AsyncClient``: the gateway's API for asyncio programs, with typed answers and typed errors."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
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
from muster.client.sync import RECONNECT_PAUSE_S, STREAM_READ_TIMEOUT_S
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


class AsyncClient:
    """The asyncio twin of ``Client``: the same operations, awaited. Use ``async with``, or ``await aclose()``."""

    def __init__(self, url: str, token: str, *, timeout: float = 10.0, verify: ssl.SSLContext | str | bool = True,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport, verify=verify,
                                       headers={"Authorization": f"Bearer {token}"})

    @classmethod
    def from_settings(cls, settings: ClientSettings, **options: Any) -> Self:
        return cls(settings.url, settings.token, **options)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> Self:
        """As the ``muster`` command connects (see ``Client.from_env``)."""
        return cls.from_settings(load_settings(environ), **options)

    @classmethod
    def from_context(cls, name: str | None = None, **options: Any) -> Self:
        """The named context of ``~/.config/muster/config.yaml`` (the current one when ``name`` is None)."""
        return cls.from_settings(context_settings(name), **options)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"

    async def send(self, call: Call[T]) -> T:
        """Send one call; its answer read into its model, or the typed error of a refusal."""
        try:
            response = await self._http.request(call.method, call.path, params=call.params, json=call.json,
                                                headers=call.headers)
        except httpx.HTTPError as exc:
            raise TransportError(f"cannot reach the gateway at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        return call.parse(response.json())

    # ------------------------------------------------------------------------------ jobs

    async def submit(self, spec: JobSpec | Mapping[str, Any], *, idempotency_key: str | None = None) -> Submitted:
        """Queue a job; with ``idempotency_key`` a retry is the same job (``duplicate`` true)."""
        return await self.send(ops.submit(spec, idempotency_key))

    async def submit_workload(self, obj: Mapping[str, Any], *, queue: str | None = None,
                              related: Sequence[Mapping[str, Any]] = (),
                              idempotency_key: str | None = None) -> Submitted:
        """Queue a Kubernetes object of a workload kind (JobSet, RayJob, LeaderWorkerSet...) through Muster, as
        ``Client.submit_workload``."""
        return await self.send(ops.submit_workload(obj, queue=queue, related=related,
                                                   idempotency_key=idempotency_key))

    async def get(self, job_id: str) -> JobView:
        return await self.send(ops.get_job(job_id))

    async def list_jobs(self, *, queue: str | None = None, state: str | None = None, tenant: str | None = None,
                        active: bool | None = None, limit: int = 100, offset: int = 0) -> JobList:
        """One page of the jobs the caller may see, newest first; ``total`` counts every match."""
        return await self.send(ops.list_jobs(queue=queue, state=state, tenant=tenant, active=active, limit=limit,
                                             offset=offset))

    async def iter_jobs(self, *, queue: str | None = None, state: str | None = None, tenant: str | None = None,
                        active: bool | None = None, page_size: int = 500) -> AsyncIterator[JobView]:
        """Every matching job, page by page (each once, even when new submissions shift the pages)."""
        seen: set[str] = set()
        offset = 0
        while True:
            page = await self.list_jobs(queue=queue, state=state, tenant=tenant, active=active, limit=page_size,
                                        offset=offset)
            for job in page.items:
                if job.job_id not in seen:
                    seen.add(job.job_id)
                    yield job
            offset += len(page.items)
            if not page.items or offset >= page.total:
                return

    async def describe(self, job_id: str) -> Explanation:
        """Why the job is where it is: reason, message, queue position, estimated start, history."""
        return await self.send(ops.describe(job_id))

    async def events(self, job_id: str) -> JobEvents:
        """The job's Kubernetes objects per attempt and its events, oldest first."""
        return await self.send(ops.events(job_id))

    async def cancel(self, job_id: str, reason: str = "", *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        """Cancel a job (a running one is stopped). Like every request about a job, it waits up to ``wait``
        seconds for the queue manager's answer: ``outcome`` ``applied`` or ``unchanged``; a refusal raises
        ``Conflict`` with the reason as its ``error``; ``pending``: no answer yet (``action_outcome`` tells it
        later). ``wait=0`` returns at once."""
        return await self.send(ops.cancel(job_id, reason, wait))

    async def suspend(self, job_id: str, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return await self.send(ops.suspend(job_id, wait))

    async def resume(self, job_id: str, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return await self.send(ops.resume(job_id, wait))

    async def set_priority(self, job_id: str, priority_class: str, *,
                           wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return await self.send(ops.set_priority(job_id, priority_class, wait))

    async def scale(self, job_id: str, replicas: int, *, wait: float = ops.ACTION_WAIT_S) -> ActionAccepted:
        return await self.send(ops.scale(job_id, replicas, wait))

    async def action_outcome(self, job_id: str, event_id: str) -> ActionAccepted:
        """The outcome of an earlier request (``NotFound`` with ``not_answered`` while it has none)."""
        return await self.send(ops.action_outcome(job_id, event_id))

    async def queues(self) -> list[QueueView]:
        return await self.send(ops.queues())

    # ------------------------------------------------------------------------------ recurring jobs

    async def recurring_jobs(self, tenant: str | None = None) -> list[RecurringView]:
        return await self.send(ops.recurring_jobs(tenant))

    async def recurring(self, name: str) -> RecurringView:
        return await self.send(ops.recurring(name))

    async def suspend_recurring(self, name: str) -> RecurringChange:
        return await self.send(ops.recurring_action(name, "suspend"))

    async def resume_recurring(self, name: str) -> RecurringChange:
        return await self.send(ops.recurring_action(name, "resume"))

    async def delete_recurring(self, name: str) -> RecurringChange:
        return await self.send(ops.recurring_action(name, "delete"))

    # ------------------------------------------------------------------------------ configuration

    async def config(self) -> ConfigDocument:
        """The configuration (members see their own tenant and queues, and the shared items)."""
        return await self.send(ops.config())

    async def define(self, kind: ConfigKind, item: ConfigItem) -> ConfigChange:
        """Create or replace a configuration item (administrators; others get ``Forbidden``). ``changed`` is
        false when the gateway already held an equal item (nothing was published)."""
        return await self.send(ops.define(kind, item))

    async def undefine(self, kind: ConfigKind, name: str) -> ConfigChange:
        """Delete a configuration item (administrators). ``Conflict`` while other items refer to it, or while
        unfinished jobs are in the queue or of the priority class (``error`` ``in_use`` / ``has_unfinished_jobs``)."""
        return await self.send(ops.undefine(kind, name))

    # ------------------------------------------------------------------------------ live changes

    async def watch(self, *, kinds: Iterable[str] = KINDS, job_id: str | None = None, queue: str | None = None,
                    tenant: str | None = None) -> AsyncGenerator[StreamEvent, None]:
        """The live stream: ``StreamOpened`` first, then every change the caller may see, until the gateway
        ends the stream or the caller stops iterating. Raises ``TransportError`` when it breaks."""
        params = ops.stream_params(kinds=tuple(kinds), job_id=job_id, queue=queue, tenant=tenant)
        timeout = httpx.Timeout(self._http.timeout.connect, read=STREAM_READ_TIMEOUT_S)
        decoder = SseDecoder()
        try:
            async with self._http.stream("GET", "/v1/stream", params=params, timeout=timeout) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from_response(response)
                async for line in response.aiter_lines():
                    decoded = decoder.line(line)
                    event = None if decoded is None else typed_event(*decoded)
                    if event is not None:
                        yield event
        except httpx.HTTPError as exc:
            raise TransportError(f"the stream from the gateway at {self.url} broke: {exc!r}") from exc

    async def wait(self, job_id: str, states: str | Iterable[str] | None = None,
                   timeout: float | None = None, *,  # noqa: ASYNC109 (the same call as Client.wait)
                   must_exist: bool = True) -> JobView:
        """Until the job is in one of ``states`` (default: any terminal state): its view then.

        Follows the live stream (no polling), reading the job each time the stream opens; reconnects when
        the stream ends or breaks. Raises ``WaitTimeout`` after ``timeout`` seconds, ``JobEnded`` when the
        job finished in a state not waited for, ``NotFound`` when the gateway does not know the job, unless
        ``must_exist`` is False (a job just produced onto Kafka): then it is waited for too.
        """
        waiter = JobWaiter(job_id, normalise_states(states))
        try:
            async with asyncio.timeout(timeout):
                while True:
                    done = await self._follow(waiter, must_exist)
                    if done is not None:
                        return done
                    await asyncio.sleep(RECONNECT_PAUSE_S)
        except TimeoutError:
            raise WaitTimeout(job_id, waiter.states, timeout or 0.0, waiter.last) from None

    async def _follow(self, waiter: JobWaiter, must_exist: bool) -> JobView | None:
        """One stream's worth of ``wait``: the job's view once wanted, None when the stream ended or broke."""
        try:
            async with contextlib.aclosing(self.watch(kinds=("job",), job_id=waiter.job_id)) as events:
                async for event in events:
                    if isinstance(event, StreamOpened | JobsRemoved):
                        done = await self._read(waiter, must_exist)
                    else:
                        done = waiter.changed(event)
                    if done is not None:
                        return done
        except TransportError:
            return None
        return None

    async def _read(self, waiter: JobWaiter, must_exist: bool) -> JobView | None:
        try:
            job = await self.get(waiter.job_id)
        except NotFound:
            if must_exist:
                raise
            return None
        return waiter.seen(job)

    async def submit_and_wait(self, spec: JobSpec | Mapping[str, Any], states: str | Iterable[str] | None = None, *,
                              idempotency_key: str | None = None,
                              timeout: float | None = None) -> JobView:  # noqa: ASYNC109 (as Client's)
        """``submit`` then ``wait`` for the job it queued."""
        accepted = await self.submit(spec, idempotency_key=idempotency_key)
        if not isinstance(accepted, SubmitAccepted):
            raise ValueError(f"the spec has a schedule: it defined the recurring job {accepted.name}, "
                             "which has nothing to wait for")
        return await self.wait(accepted.job_id, states, timeout)
