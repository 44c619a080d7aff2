"""The client's pure parts: Server-Sent Events decoding, typed stream events, the wait rule, contexts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from muster.client import Client, ConfigurationError, JobEnded, JobsChanged, JobsRemoved, ProtocolError, StreamOpened
from muster.client.config import context_settings, load_settings
from muster.client.stream import JobWaiter, SseDecoder, normalise_states, typed_event
from schemas.api import JobView
from schemas.status import TERMINAL_STATES
from tests.builders.clock import T0


def view(state: str, minutes: int = 0, job_id: str = "j1") -> JobView:
    return JobView(job_id=job_id, tenant="team-a", queue="team-a", name="train", state=state,
                   priority_class="normal", replicas=1, gpus=1, submitted_at=T0,
                   updated_at=T0 + timedelta(minutes=minutes))


def decode(lines: list[str]) -> list[tuple[str, object]]:
    decoder = SseDecoder()
    return [event for line in lines if (event := decoder.line(line)) is not None]


def test_sse_events_comments_and_multi_line_data() -> None:
    lines = [": ping", "", "event: ready", 'data: {"at": "2026-11-01T12:00:00Z",', 'data:  "kinds": ["job"]}', "",
             "event: removed", 'data: ["a-1"]', "", 'data: {"x": 1}', ""]
    assert decode(lines) == [("ready", {"at": "2026-11-01T12:00:00Z", "kinds": ["job"]}), ("removed", ["a-1"]),
                             ("message", {"x": 1})]
    with pytest.raises(ProtocolError, match="not JSON"):
        decode(["event: jobs", "data: [oops", ""])


def test_typed_events() -> None:
    opened = typed_event("ready", {"at": "2026-11-01T12:00:00Z", "kinds": ["job", "queue"]})
    assert isinstance(opened, StreamOpened) and opened.kinds == ("job", "queue")
    changed = typed_event("jobs", [{**view("running").model_dump(mode="json"), "user": "alice"}])
    assert isinstance(changed, JobsChanged) and changed.jobs[0].user == "alice"
    assert typed_event("removed", ["a-1"]) == JobsRemoved(("a-1",))
    assert typed_event("something-new", {"a": 1}) is None  # a newer gateway's event is skipped
    with pytest.raises(ProtocolError, match="unreadable 'jobs'"):
        typed_event("jobs", [{"job_id": "a-1"}])


def test_the_wait_rule() -> None:
    assert normalise_states(None) == TERMINAL_STATES
    assert normalise_states("running") == {"running"}
    with pytest.raises(ValueError):
        normalise_states([])
    waiter = JobWaiter("j1", frozenset({"running"}))
    assert waiter.seen(view("pending")) is None
    assert waiter.seen(view("running", job_id="other")) is None  # another job's view
    assert waiter.seen(view("running", 2)) is not None
    late = JobWaiter("j1", frozenset({"succeeded"}))
    assert late.seen(view("running", 5)) is None
    assert late.seen(view("failed", 3)) is None  # older than what was seen: a read racing the stream
    with pytest.raises(JobEnded):
        late.seen(view("cancelled", 6))


def write_contexts(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "prod-token").write_text("prod-secret\n")
    config = {"current-context": "local", "contexts": {
        "local": {"url": "http://127.0.0.1:8000/", "token": "local-token"},
        "prod": {"url": "https://muster.example", "token-file": str(tmp_path / "prod-token")},
    }}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return {"MUSTER_CONFIG": str(tmp_path / "config.yaml")}


def test_contexts_name_where_a_client_connects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = write_contexts(tmp_path)
    assert context_settings(None, env) == context_settings("local", env)
    assert (context_settings(None, env).url, context_settings(None, env).token) == ("http://127.0.0.1:8000",
                                                                                  "local-token")
    assert context_settings("prod", env).token == "prod-secret"
    with pytest.raises(ConfigurationError, match="known: local, prod"):
        context_settings("staging", env)
    assert load_settings({**env, "MUSTER_CONTEXT": "prod"}, cwd=tmp_path).url == "https://muster.example"
    monkeypatch.setenv("MUSTER_CONFIG", env["MUSTER_CONFIG"])
    with Client.from_context("prod") as client:
        assert client.url == "https://muster.example" and "prod-secret" not in repr(client)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"contexts": {}}))
    with pytest.raises(ConfigurationError, match="no current context"):
        Client.from_context()
