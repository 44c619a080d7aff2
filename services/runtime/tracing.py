"""OpenTelemetry traces that follow one job through the services, joined by the envelopes' ids alone.

Nothing is added to the wire: the trace of a message is derived from its envelope. Its trace id is the
envelope's correlation id (the event id of the chain's first message, 32 hex digits, used as is; any
other correlation id is hashed), so every message of one job's chain lands in one trace. Each produced
envelope gets a ``send <type>`` span whose span id is derived from its event id; a consumer's
``handle <type>`` span is the child of the send span of the envelope it handles, and a message produced
outside a handler (a queue manager cycle's decision, a node watcher's observation of a Job the
dispatcher annotated) is the child of the send span of the message its ``causation_id`` names. So the
spans of gateway → queue manager → dispatcher → node watcher connect without any service knowing the
others' spans.

Off unless configured: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) exports
over OTLP/HTTP in batches; ``OTEL_TRACES_EXPORTER=console`` prints spans to stdout; ``OTEL_SDK_DISABLED``
turns it all off. ``OTEL_TRACES_SAMPLER`` and ``OTEL_RESOURCE_ATTRIBUTES`` work as the SDK documents.
Each service reports as ``service.name`` ``muster-<service>``.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from schemas.envelope import Envelope
from services.runtime.logs import current_service, message_fields

log = logging.getLogger(__name__)

_HEX_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
#: (trace id, span id) the next span started in this context takes (``_ChosenIds``)
_CHOSEN: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("muster_span_ids", default=None)


class _ChosenIds(RandomIdGenerator):
    """Random ids, except for a span whose ids were derived from its envelope."""

    def generate_span_id(self) -> int:
        chosen = _CHOSEN.get()
        return chosen[1] if chosen is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        chosen = _CHOSEN.get()
        return chosen[0] if chosen is not None else super().generate_trace_id()


class _Tracing:
    def __init__(self, processors: Sequence[SpanProcessor]) -> None:
        self.processors = list(processors)
        self.providers: dict[str, TracerProvider] = {}

    def tracer(self) -> trace.Tracer:
        service = current_service() or "unknown"
        provider = self.providers.get(service)
        if provider is None:
            resource = Resource.create({"service.name": f"muster-{service.replace('_', '-')}",
                                        "service.namespace": "muster"})
            provider = TracerProvider(resource=resource, id_generator=_ChosenIds())
            for processor in self.processors:
                provider.add_span_processor(processor)
            self.providers[service] = provider
        return provider.get_tracer("muster")

    def shutdown(self) -> None:
        for processor in self.processors:
            with contextlib.suppress(Exception):
                processor.force_flush()
                processor.shutdown()


_active: _Tracing | None = None


def configure(*, exporter: SpanExporter | None = None, batch: bool = True) -> None:
    """Trace into ``exporter`` (tests: an in-memory exporter with ``batch=False``)."""
    global _active
    reset()
    if exporter is not None:
        processor: SpanProcessor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        _active = _Tracing([processor])


def configure_from_environment(environ: dict[str, str] | None = None) -> bool:
    """Trace as the OTEL_* variables say (see the module); True when spans are exported."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    choice = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if choice == "none" or (not endpoint and choice not in ("otlp", "console")):
        return False
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        configure(exporter=ConsoleSpanExporter())
    else:  # the exporter reads its endpoint, headers, timeout and compression from the OTEL_* variables
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        configure(exporter=OTLPSpanExporter())
    log.info("tracing on: %s", "console" if choice == "console" else f"OTLP to {endpoint}")
    return True


def reset() -> None:
    """Stop tracing (flushing what is buffered)."""
    global _active
    if _active is not None:
        _active.shutdown()
    _active = None


def enabled() -> bool:
    return _active is not None


def _derived(*parts: str, bits: int) -> int:
    digest = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1


def trace_id_of(envelope: Envelope) -> int:
    """The trace of ``envelope``'s chain: its correlation id (or, first of a chain, its event id)."""
    correlation = envelope.correlation_id or envelope.event_id
    if _HEX_TRACE_ID.match(correlation) and int(correlation, 16):
        return int(correlation, 16)
    return _derived("correlation", correlation, bits=128)


def send_span_id(event_id: str) -> int:
    """The span id of the send span of the envelope with ``event_id``."""
    return _derived("send", event_id, bits=64)


def _remote(trace_id: int, span_id: int) -> Context:
    return trace.set_span_in_context(NonRecordingSpan(SpanContext(trace_id, span_id, is_remote=True,
                                                                  trace_flags=_SAMPLED)), Context())


def _attributes(envelope: Envelope, topic: str) -> dict[str, Any]:
    fields = message_fields(envelope)
    attributes: dict[str, Any] = {"messaging.system": "kafka", "messaging.destination.name": topic,
                                  "messaging.message.id": envelope.event_id, "muster.producer": envelope.producer}
    attributes.update({f"muster.{k}": v for k, v in fields.items() if k != "event_id"})
    return attributes


def sent(topic: str, envelope: Envelope) -> None:
    """Record the production of ``envelope``: a ``send`` span under the span in hand when it is of the same
    chain, else under the send span of the envelope's cause (or a root for the first of a chain)."""
    tracing = _active
    if tracing is None:
        return
    trace_id = trace_id_of(envelope)
    current = trace.get_current_span().get_span_context()
    parent: Context | None = None  # the current context
    if not (current.is_valid and current.trace_id == trace_id):
        parent = _remote(trace_id, send_span_id(envelope.causation_id)) if envelope.causation_id else Context()
    token = _CHOSEN.set((trace_id, send_span_id(envelope.event_id)))
    try:
        span = tracing.tracer().start_span(f"send {envelope.type}", context=parent, kind=SpanKind.PRODUCER,
                                           attributes=_attributes(envelope, topic))
    finally:
        _CHOSEN.reset(token)
    span.end()


@contextlib.contextmanager
def handling(envelope: Envelope, topic: str) -> Iterator[None]:
    """A ``handle`` span, child of the envelope's send span, current while the handler runs."""
    tracing = _active
    if tracing is None:
        yield
        return
    parent = _remote(trace_id_of(envelope), send_span_id(envelope.event_id))
    with tracing.tracer().start_as_current_span(f"handle {envelope.type}", context=parent, kind=SpanKind.CONSUMER,
                                                attributes=_attributes(envelope, topic)):
        yield
