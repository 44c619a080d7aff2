"""Structured logs (MUSTER_LOG_FORMAT) and the envelope-derived traces, without Kafka."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas.envelope import caused_by, make_envelope
from schemas.status import JobStatusChanged
from services.runtime import tracing
from services.runtime.logs import (
    COORDINATOR_LOGGER,
    JsonFormatter,
    RetriedCoordinatorLookupFilter,
    configure_logging,
    log_format,
    message_context,
    set_service,
)
from tests.builders.messages import example_messages


def _status(job_id: str = "job-1") -> JobStatusChanged:
    base = next(m for m in example_messages() if isinstance(m, JobStatusChanged))
    return base.model_copy(update={"job_id": job_id})


def json_line(logger: logging.Logger, text: str, *, exc: bool = False) -> dict[str, object]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    try:
        if exc:
            try:
                raise ValueError("boom")
            except ValueError:
                logger.exception(text)
        else:
            logger.warning(text)
    finally:
        logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    parsed: dict[str, object] = json.loads(line)
    return parsed


async def test_json_line_names_the_service_and_outside_a_message_nothing_more() -> None:
    set_service("dispatcher")
    line = json_line(logging.getLogger("services.example"), "hello %s")
    assert {k: line[k] for k in ("level", "service", "logger", "message")} == {
        "level": "WARNING", "service": "dispatcher", "logger": "services.example", "message": "hello %s"}
    assert str(line["time"]).startswith("20") and "job_id" not in line and "trace_id" not in line


async def test_json_line_while_handling_carries_the_envelopes_job_attempt_and_chain() -> None:
    set_service("queue_manager")
    first = make_envelope(_status("job-7"), "gateway")
    second = make_envelope(_status("job-7"), "queue_manager", **caused_by(first))
    with message_context(second):
        line = json_line(logging.getLogger("services.example"), "handled", exc=True)
    assert line["job_id"] == "job-7" and line["attempt"] == second.payload.attempt  # type: ignore[attr-defined]
    assert line["correlation_id"] == first.event_id and line["causation_id"] == first.event_id
    assert line["event_id"] == second.event_id and line["message_type"] == "JobStatusChanged"
    assert "ValueError: boom" in str(line["exception"])


async def test_each_task_keeps_its_own_service_and_message() -> None:
    seen: dict[str, dict[str, object]] = {}

    async def service(name: str, job: str) -> None:
        set_service(name)
        with message_context(make_envelope(_status(job), name)):
            await asyncio.sleep(0.01)
            seen[name] = json_line(logging.getLogger("services.example"), "x")

    await asyncio.gather(service("dispatcher", "job-a"), service("node_watcher", "job-b"))
    assert (seen["dispatcher"]["job_id"], seen["node_watcher"]["job_id"]) == ("job-a", "job-b")
    assert seen["node_watcher"]["service"] == "node_watcher"


def test_log_format_is_text_unless_json_is_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    assert log_format({}) == "text" and log_format({"MUSTER_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(ValueError, match="MUSTER_LOG_FORMAT"):
        log_format({"MUSTER_LOG_FORMAT": "xml"})
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level

    def log_both() -> None:
        configure_logging("INFO", fmt="json", service="gateway")
        logging.getLogger("services.gateway.example").info("one line")
        configure_logging("INFO", fmt="text")
        logging.getLogger("services.gateway.example").info("plain")

    try:
        contextvars.copy_context().run(log_both)  # the service name stays in this test
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    json_out, text_out = capsys.readouterr().err.splitlines()[-2:]
    assert json.loads(json_out)["message"] == "one line" and json.loads(json_out)["service"] == "gateway"
    assert text_out.endswith("INFO services.gateway.example: plain")


def test_a_retried_coordinator_lookup_is_a_warning_and_a_final_one_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka logs every failed coordinator lookup as an ERROR, also those it retries (on every start)."""
    from aiokafka import errors

    coordinator = logging.getLogger(COORDINATOR_LOGGER)
    coordinator.addFilter(RetriedCoordinatorLookupFilter())
    try:
        with caplog.at_level(logging.INFO, logger=COORDINATOR_LOGGER):
            coordinator.error("Group Coordinator Request failed: %s", errors.GroupCoordinatorNotAvailableError())
            coordinator.error("Group Coordinator Request failed: %s", errors.UnknownError())  # not retried
            coordinator.error("Heartbeat failed: %s", errors.GroupCoordinatorNotAvailableError())
    finally:
        coordinator.filters.clear()
    assert [r.levelname for r in caplog.records] == ["WARNING", "ERROR", "ERROR"]


# --- traces ---------------------------------------------------------------------------------------------------


def test_tracing_is_off_unless_an_exporter_is_configured() -> None:
    try:
        assert tracing.configure_from_environment({}) is False and not tracing.enabled()
        assert tracing.configure_from_environment({"OTEL_TRACES_EXPORTER": "none",
                                                   "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is False
        assert tracing.configure_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
        assert tracing.enabled()
        assert tracing.configure_from_environment({"OTEL_TRACES_EXPORTER": "console"})
        assert tracing.configure_from_environment({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}) \
            is False
    finally:
        tracing.reset()
    tracing.sent("topic", make_envelope(_status(), "gateway"))  # off: nothing happens, nothing fails


async def test_spans_chain_through_correlation_and_causation_ids(spans: InMemorySpanExporter) -> None:
    set_service("gateway")
    submitted = make_envelope(_status("job-1"), "gateway")
    tracing.sent("intents", submitted)
    set_service("queue_manager")
    with tracing.handling(submitted, "intents"):
        recorded = make_envelope(_status("job-1"), "queue_manager", **caused_by(submitted))
        tracing.sent("jobs", recorded)  # inside the handler: the child of its span
    admitted = make_envelope(_status("job-1"), "queue_manager", correlation_id=recorded.correlation_id,
                             causation_id=recorded.event_id)
    tracing.sent("decisions", admitted)  # outside any handler (a cycle): the child of its cause's send span
    set_service("node_watcher")
    observed = make_envelope(_status("job-1"), "node_watcher", correlation_id=admitted.correlation_id,
                             causation_id=admitted.event_id)
    tracing.sent("runs", observed)

    by_name = {(s.resource.attributes["service.name"], s.name): s for s in spans.get_finished_spans()}
    root = by_name[("muster-gateway", "send JobStatusChanged")]
    handle = by_name[("muster-queue-manager", "handle JobStatusChanged")]
    assert root.parent is None and root.context is not None
    assert root.context.trace_id == int(submitted.event_id, 16) == tracing.trace_id_of(observed)
    assert root.context.span_id == tracing.send_span_id(submitted.event_id)
    assert handle.parent is not None and handle.parent.span_id == root.context.span_id
    sends = sorted((s for s in spans.get_finished_spans() if s.name.startswith("send")), key=lambda s: s.start_time)
    recorded_span, admitted_span, observed_span = sends[1:]
    assert recorded_span.parent is not None and handle.context is not None
    assert recorded_span.parent.span_id == handle.context.span_id
    assert admitted_span.parent is not None and admitted_span.parent.span_id == tracing.send_span_id(recorded.event_id)
    assert observed_span.parent is not None and observed_span.parent.span_id == tracing.send_span_id(admitted.event_id)
    assert observed_span.resource.attributes["service.name"] == "muster-node-watcher"
    assert {s.context.trace_id for s in spans.get_finished_spans() if s.context} == {root.context.trace_id}


async def test_a_handler_that_fails_marks_its_span(spans: InMemorySpanExporter) -> None:
    set_service("dispatcher")
    envelope = make_envelope(_status(), "queue_manager")
    with pytest.raises(RuntimeError), tracing.handling(envelope, "decisions"):
        raise RuntimeError("kube said no")
    (span,) = spans.get_finished_spans()
    assert span.status.status_code.name == "ERROR" and span.events[0].name == "exception"


def test_a_correlation_id_that_is_not_hex_still_names_one_trace() -> None:
    one = make_envelope(_status(), "x", correlation_id="order-42")
    two = make_envelope(_status(), "y", correlation_id="order-42")
    assert tracing.trace_id_of(one) == tracing.trace_id_of(two) != 0
