"""Logging of every service: text by default, one JSON object per line with ``MUSTER_LOG_FORMAT=json``.

A JSON line carries time, level, service, logger and message, and while a consumer loop handles a message
the envelope's job id, attempt, correlation id, event id and type (``message_context``), plus the trace and
span ids when tracing is on. The service and the message in hand live in context variables, so every task
of a service, and every record handled, is named without passing anything around.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
from opentelemetry import trace

from schemas.envelope import Envelope

FORMAT_ENV = "MUSTER_LOG_FORMAT"
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_SERVICE: contextvars.ContextVar[str | None] = contextvars.ContextVar("muster_service", default=None)
_MESSAGE: contextvars.ContextVar[Envelope | None] = contextvars.ContextVar("muster_message", default=None)


def set_service(name: str) -> None:
    """Name the service of this context (and of the tasks it starts from now on)."""
    _SERVICE.set(name)


def current_service() -> str | None:
    return _SERVICE.get()


def enter_message(envelope: Envelope) -> contextvars.Token[Envelope | None]:
    """From now on (until ``leave_message``), log lines carry ``envelope``'s job id, attempt and chain."""
    return _MESSAGE.set(envelope)


def leave_message(token: contextvars.Token[Envelope | None]) -> None:
    _MESSAGE.reset(token)


@contextlib.contextmanager
def message_context(envelope: Envelope) -> Iterator[None]:
    """Log lines written while ``envelope`` is handled carry its job id, attempt and correlation id."""
    token = enter_message(envelope)
    try:
        yield
    finally:
        leave_message(token)


def message_fields(envelope: Envelope) -> dict[str, Any]:
    payload = envelope.payload
    fields: dict[str, Any] = {}
    job_id = getattr(payload, "job_id", None)
    if isinstance(job_id, str):
        fields["job_id"] = job_id
    attempt = getattr(payload, "attempt", None)
    if isinstance(attempt, int):
        fields["attempt"] = attempt
    fields["correlation_id"] = envelope.correlation_id or envelope.event_id
    if envelope.causation_id:
        fields["causation_id"] = envelope.causation_id
    fields["event_id"] = envelope.event_id
    fields["message_type"] = envelope.type
    return fields


def _trace_fields() -> dict[str, str]:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, service, logger, message, the message in
    hand's fields, trace ids, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": _SERVICE.get(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        envelope = _MESSAGE.get()
        if envelope is not None:
            line.update(message_fields(envelope))
        line.update(_trace_fields())
        if record.exc_info:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return orjson.dumps(line, default=str).decode()


def log_format(environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    chosen = (env.get(FORMAT_ENV) or "text").strip().lower()
    if chosen not in FORMATS:
        raise ValueError(f"{FORMAT_ENV} must be one of {', '.join(FORMATS)}, not {chosen!r}")
    return chosen


#: aiokafka's group coordinator logger, which logs a failed coordinator lookup as an ERROR before retrying it
COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"


class RetriedCoordinatorLookupFilter(logging.Filter):
    """aiokafka logs "Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError" as an
    ERROR while a broker that has just started (or just lost the coordinator) elects one, then retries and
    joins: a service that starts with the broker says it once or twice on every start. A lookup that failed
    with an error aiokafka retries is a WARNING here; one it gives up on, and every other error, stays an
    ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and "Coordinator Request failed" in str(record.msg):
            args = record.args if isinstance(record.args, tuple) else ()
            if args and all(getattr(arg, "retriable", False) for arg in args):
                record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


_RETRIED_LOOKUP = RetriedCoordinatorLookupFilter()


def configure_logging(level: str = "INFO", *, fmt: str | None = None, service: str | None = None) -> None:
    """Set up the root logger for a service process: ``fmt`` ("text" or "json", default from
    ``MUSTER_LOG_FORMAT``), writing to stderr. aiokafka's retried coordinator lookups are WARNINGs
    (``RetriedCoordinatorLookupFilter``)."""
    coordinator_log = logging.getLogger(COORDINATOR_LOGGER)
    if _RETRIED_LOOKUP not in coordinator_log.filters:
        coordinator_log.addFilter(_RETRIED_LOOKUP)
    handler = logging.StreamHandler()
    chosen = fmt or log_format()
    handler.setFormatter(JsonFormatter() if chosen == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    if service is not None:
        set_service(service)
