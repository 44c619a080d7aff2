"""Pure parts of the gateway: tokens, job ids, the status / config / usage views, recent submissions."""

from __future__ import annotations

import re

import pytest
from pydantic import TypeAdapter

from schemas.config import ConfigItemDeleted, QueueConfig, QueueDefined
from schemas.envelope import JobId
from schemas.intents import SubmitJob
from services.gateway.auth import Principal, TokenTable, token_digest
from services.gateway.submissions import RecentSubmissions
from services.gateway.views import ConfigView, StatusView
from services.spec.ids import keyed_job_id, kube_job_id, name_prefix, random_job_id, tenant_tag
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import T0, feed, status_changed

_JOB_ID = TypeAdapter(JobId)


def test_tokens_file_with_hashes_and_plain_tokens() -> None:
    text = f"""
tokens:
  - {{token_sha256: "{token_digest('s3cret-token-1')}", tenant: team-a, user: alice, role: member}}
  - {{token: "dev-token-2345", tenant: ops, user: root, role: admin}}
"""
    table = TokenTable.parse(text)
    assert table.authenticate("s3cret-token-1") == Principal("team-a", "alice", "member")
    assert table.authenticate("dev-token-2345") == Principal("ops", "root", "admin")
    assert table.authenticate("s3cret-token-") is None
    assert table.authenticate("") is None


def test_tokens_file_errors_name_the_entry_but_never_the_token() -> None:
    with pytest.raises(ValueError) as exc:
        TokenTable.parse("- {token: 'leaky-secret-value', token_sha256: 'abc', tenant: a, user: b}", "t.yaml")
    assert "t.yaml" in str(exc.value) and "leaky-secret-value" not in str(exc.value)
    with pytest.raises(ValueError, match="list"):
        TokenTable.parse("tokens: 5")
    assert len(TokenTable.parse("")) == 0


def test_principal_ownership() -> None:
    assert Principal("a", "u", "member").owns("a")
    assert not Principal("a", "u", "member").owns("b")
    assert Principal("ops", "u", "admin").owns("b")


@pytest.mark.parametrize("name", ["train", "x" * 63, "a.b.c", "9lives", "---"])
def test_job_ids_are_valid_dns_labels(name: str) -> None:
    for job_id in (keyed_job_id(name, "t", "k"), random_job_id(name, "t"), random_job_id(name),
                   kube_job_id("ns", name, "uid", tenant="t"), kube_job_id("ns", name, "uid", tenant=None)):
        assert _JOB_ID.validate_python(job_id) == job_id
        assert len(job_id) <= 48


def test_keyed_ids_depend_on_tenant_and_key_only() -> None:
    assert keyed_job_id("train", "a", "k") == keyed_job_id("train", "a", "k")
    assert keyed_job_id("train", "a", "k") != keyed_job_id("train", "b", "k")
    assert keyed_job_id("train", "a", "k") != keyed_job_id("train", "a", "k2")
    assert re.fullmatch(rf"train-{tenant_tag('a')}-[0-9a-f]{{8}}", keyed_job_id("train", "a", "k"))
    assert random_job_id("train", "a") != random_job_id("train", "a")
    assert name_prefix("My.Job") == "my-job"
    assert kube_job_id("ns", "j", "uid-1", tenant="a") != kube_job_id("ns", "j", "uid-2", tenant="a")


def test_status_view_keeps_latest_and_distinct_history_and_forgets_tombstones() -> None:
    view = StatusView(history_limit=3)
    feed(view, status_changed("j", state="pending", reason="Queued"))
    feed(view, status_changed("j", state="pending", reason="Queued", position=1))  # same state: no new entry
    feed(view, status_changed("j", state="admitted", minutes=1))
    feed(view, status_changed("j", state="running", minutes=2))
    feed(view, status_changed("j", state="succeeded", minutes=3))
    current = view.get("j")
    assert current is not None and current.state == "succeeded"
    assert [h.state for h in view.history("j")] == ["admitted", "running", "succeeded"]
    view.apply("j", None)
    assert view.get("j") is None and view.history("j") == [] and len(view) == 0


def test_config_view_defines_replaces_and_deletes() -> None:
    view = ConfigView()
    feed(view, QueueDefined(item=QueueConfig(name="q", tenant="a")))
    feed(view, QueueDefined(item=QueueConfig(name="q", tenant="b")))
    queue = view.queue("q")
    assert queue is not None and queue.tenant == "b"
    assert view.has_priority_class("anything")  # none configured: not enforced
    feed(view, ConfigItemDeleted(kind="queue", name="q"))
    assert view.queue("q") is None
    feed(view, QueueDefined(item=QueueConfig(name="q")))
    view.apply("queue/q", None)
    assert view.queues() == []


def test_recent_submissions_are_bounded_and_indexed_by_key() -> None:
    recent = RecentSubmissions(limit=2)
    subs = [SubmitJob(job_id=f"j{i}", tenant="a", user="u", spec=job_spec(), submitted_at=T0,
                      idempotency_key=f"k{i}") for i in range(3)]
    for sub in subs:
        recent.record(sub)
    assert len(recent) == 2
    assert recent.get("j0") is None and recent.by_key("a", "k0") is None
    found = recent.by_key("a", "k2")
    assert found is not None and found.submission.job_id == "j2"
