"""One submission, one trace: the spans of gateway, queue manager, dispatcher and node watcher about one job
connect into a single trace through the envelopes' correlation and causation ids (services/runtime/tracing.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas.config import MusterConfig
from services.runtime.kafka import KafkaSettings
from services.runtime.logs import JsonFormatter
from tests.e2e.builders import job_spec
from tests.e2e.system import running_system

pytestmark = pytest.mark.e2e

FOUR_SERVICES = {"muster-gateway", "muster-queue-manager", "muster-dispatcher", "muster-node-watcher"}


def service_of(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"])


def path_to_root(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    path = [span]
    while path[-1].parent is not None:
        path.append(by_id[path[-1].parent.span_id])
    return path


class JsonLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def json_logs() -> Iterator[JsonLines]:
    handler = JsonLines()
    logger = logging.getLogger("services")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def test_one_submission_is_one_connected_trace_across_four_services(
        spans: InMemorySpanExporter, json_logs: JsonLines, e2e_settings: KafkaSettings, e2e_config: MusterConfig,
        tmp_path: Path) -> None:
    async with running_system(e2e_settings, e2e_config, tmp_path) as system:
        job_id = await system.api.submit(job_spec("traced", gpus=2, duration_s=0.5))
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"

    finished = spans.get_finished_spans()
    about_job = [s for s in finished if s.attributes and s.attributes.get("muster.job_id") == job_id]
    assert {s.context.trace_id for s in about_job if s.context} == {about_job[0].context.trace_id}  # type: ignore[union-attr]
    trace_id = about_job[0].context.trace_id  # type: ignore[union-attr]
    trace = [s for s in finished if s.context is not None and s.context.trace_id == trace_id]
    by_id = {s.context.span_id: s for s in trace if s.context is not None}
    assert len(by_id) == len(trace), "two spans of the trace share an id"

    # connected: one root, the gateway's send of the submission, and every other span's parent is in the trace
    roots = [s for s in trace if s.parent is None]
    assert [(service_of(s), s.name) for s in roots] == [("muster-gateway", "send SubmitJob")]
    dangling = [s.name for s in trace if s.parent is not None and s.parent.span_id not in by_id]
    assert not dangling, f"spans whose parent is missing: {dangling}"
    assert {service_of(s) for s in trace} >= FOUR_SERVICES

    # the node watcher's observation of the run leads back to the submission through the admission
    (started,) = [s for s in trace if s.name == "send RunStarted"]
    assert service_of(started) == "muster-node-watcher"
    chain = [(service_of(s), s.name) for s in reversed(path_to_root(started, by_id))]
    assert chain[0] == ("muster-gateway", "send SubmitJob")
    assert ("muster-queue-manager", "send JobAdmitted") in chain
    assert chain[-1] == ("muster-node-watcher", "send RunStarted")

    def parent_of(service: str, name: str) -> tuple[str, str]:
        spans = [s for s in trace if service_of(s) == service and s.name == name]
        assert spans and spans[0].parent is not None, f"no {name} span of {service} with a parent"
        parent = by_id[spans[0].parent.span_id]
        return service_of(parent), parent.name

    # each consumer's handling span is the child of the send span of the message it handles
    assert parent_of("muster-queue-manager", "handle SubmitJob") == ("muster-gateway", "send SubmitJob")
    assert parent_of("muster-dispatcher", "handle JobAdmitted") == ("muster-queue-manager", "send JobAdmitted")
    assert parent_of("muster-queue-manager", "handle RunStarted") == ("muster-node-watcher", "send RunStarted")

    # the JSON log lines written while the job's messages were handled name it, its chain and its trace
    about = [line for line in json_logs.lines if line.get("job_id") == job_id]
    assert about, "no log line written while handling the job's messages carries its id"
    for line in about:
        assert line["correlation_id"] == f"{trace_id:032x}" and line["trace_id"] == f"{trace_id:032x}"
        assert line["service"] in {"queue_manager", "dispatcher", "quota_accountant", "gateway", "node_watcher"}
        assert {"time", "level", "logger", "message", "attempt", "event_id"} <= set(line)
