"""``muster apply -f`` and ``muster delete`` against the gateway app served on a free port (in-memory views),
and the file format they read (``services.cli.manifests``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from schemas.config import CohortConfig, ConfigItemDeleted, QueueConfig, QueueDefined, TenantConfig, TenantDefined
from schemas.topics import CONFIG_TOPIC
from services.cli.configure import apply, delete
from services.cli.manifests import ManifestError, parse_manifests, plan
from services.gateway.auth import TokenEntry, TokenTable
from tests.gateway.builders import TOKENS, Harness, feed, status_changed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config" / "team-c.yaml"


def run(command: object, args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(command, args, env=env, input=stdin)  # type: ignore[arg-type]
    return result.exit_code, result.output


def as_admin(env: dict[str, str]) -> dict[str, str]:
    return {**env, "MUSTER_TOKEN": TOKENS["root"]}


# ---------------------------------------------------------------------------------------------- the file


def test_the_example_parses_in_dependency_order() -> None:
    items = parse_manifests(EXAMPLE.read_text(encoding="utf-8"))
    assert [m.ref for m in items] == ["cohort/vision", "priority-class/team-c-urgent", "tenant/team-c",
                                      "queue/team-c"]
    queue = items[-1].item
    assert isinstance(queue, QueueConfig) and queue.quotas["gpu:a100"].nominal == 8


def test_cohorts_go_after_their_parent_whatever_the_file_order() -> None:
    text = "kind: Cohort\nname: child\nparent: mid\n---\nkind: Cohort\nname: mid\nparent: root\n---\n" \
           "kind: Cohort\nname: root\n"
    assert [m.item.name for m in parse_manifests(text)] == ["root", "mid", "child"]


@pytest.mark.parametrize(("text", "problem"), [
    ("kind: Queue\nname: q\nweight: -1\n", "document 1 (queue/q): weight: Input should be greater than 0"),
    ("kind: Queue\nname: q\ncolour: red\n", "colour: Extra inputs are not permitted"),
    ("kind: Widget\nname: w\n", "kind 'Widget' is not one of"),
    ("name: w\n", "kind None is not one of"),
    ("- a\n- b\n", "a configuration item is a mapping"),
    ("kind: Queue\nname: q\n---\nkind: Queue\nname: q\n", "queue/q is also defined by document 1"),
    ("apiVersion: v2\nkind: Queue\nname: q\n", "apiVersion 'v2'"),
    ("kind: [unclosed\n", "not valid YAML"),
    ("", "no configuration items"),
])
def test_invalid_files_are_refused_with_every_reason(text: str, problem: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifests(text)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    text = "kind: Queue\nname: a\nweight: 0\n---\nkind: Cohort\nname: ok\n---\nkind: Tenant\nname: t\n"
    with pytest.raises(ManifestError) as caught:
        parse_manifests(text)
    assert len(caught.value.problems) == 2  # the queue's weight, the tenant's missing namespace


def test_plan_says_created_configured_or_unchanged() -> None:
    items = parse_manifests("kind: Cohort\nname: a\nweight: 2\n---\nkind: Cohort\nname: b\n---\n"
                            "kind: Cohort\nname: c\n")
    current = {"cohort/a": CohortConfig(name="a"), "cohort/b": CohortConfig(name="b")}
    steps = [(m.ref, what, fields) for m, what, fields in plan(items, current)]
    assert steps == [("cohort/a", "configured", ["weight: 1.0 -> 2.0"]), ("cohort/b", "unchanged", []),
                     ("cohort/c", "created", [])]


# ---------------------------------------------------------------------------------------------- apply


def test_apply_creates_then_says_unchanged(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    code, out = run(apply, ["-f", str(EXAMPLE)], as_admin(env))
    assert code == 0, out
    assert out.splitlines() == ["cohort/vision created", "priority-class/team-c-urgent created",
                                "tenant/team-c created", "queue/team-c created"]
    published = gw.publisher.on(CONFIG_TOPIC)
    assert len(published) == 4 and isinstance(published[2], TenantDefined) and isinstance(published[3], QueueDefined)
    code, out = run(apply, ["-f", str(EXAMPLE)], as_admin(env))
    assert code == 0 and out.count("unchanged") == 4, out
    assert len(gw.publisher.on(CONFIG_TOPIC)) == 4  # nothing published again


def test_apply_reads_stdin_and_reports_changed_fields_on_a_dry_run(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    text = "kind: Queue\nname: team-a\ntenant: team-a\ncohort: research\nweight: 3\n" \
           "quotas: {gpu:a100: {nominal: 16, borrowing_limit: 8}}\n---\nkind: Cohort\nname: new-one\n"
    code, out = run(apply, ["-f", "-", "--dry-run"], as_admin(env), stdin=text)
    assert code == 0, out
    assert "cohort/new-one would be created (dry run)" in out
    assert "queue/team-a would be configured (dry run)" in out and "  weight: 1.0 -> 3.0" in out
    assert gw.publisher.on(CONFIG_TOPIC) == []
    code, out = run(apply, ["-f", "-"], as_admin(env), stdin=text)
    assert code == 0 and "queue/team-a configured" in out, out
    queue = gw.ctx.config.queue("team-a")
    assert queue is not None and queue.weight == 3


def test_an_invalid_file_sends_nothing(served: tuple[Harness, dict[str, str]], tmp_path: Path) -> None:
    gw, env = served
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Cohort\nname: fine\n---\nkind: Queue\nname: q\nweight: -1\n", encoding="utf-8")
    code, out = run(apply, ["-f", str(path)], as_admin(env))
    assert code == 1 and "nothing applied" in out and "weight" in out, out
    assert gw.publisher.on(CONFIG_TOPIC) == []


def test_the_api_refusal_of_a_reference_names_the_item(served: tuple[Harness, dict[str, str]]) -> None:
    _, env = served
    code, out = run(apply, ["-f", "-"], as_admin(env), stdin="kind: Queue\nname: q\ncohort: ghost\n")
    assert code == 1 and "queue/q" in out and "unknown_cohort" in out, out


def test_members_are_told_an_admin_token_is_needed(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served  # alice's token: a member of team-a
    code, out = run(apply, ["-f", str(EXAMPLE)], env)
    assert code == 1 and "needs an administrator's token" in out and "403 admin_required" in out, out
    code, out = run(delete, ["queue", "team-a-ops"], env)
    assert code == 1 and "needs an administrator's token" in out, out
    assert gw.publisher.on(CONFIG_TOPIC) == []


# ---------------------------------------------------------------------------------------------- delete


def test_delete_removes_an_idle_queue_and_says_when_there_is_none(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    code, out = run(delete, ["queue", "team-a-ops"], as_admin(env))
    assert (code, out.strip()) == (0, "queue/team-a-ops deleted")
    assert gw.publisher.on(CONFIG_TOPIC) == [ConfigItemDeleted(kind="queue", name="team-a-ops")]
    code, out = run(delete, ["queue", "team-a-ops"], as_admin(env))
    assert code == 1 and "no queue named 'team-a-ops'" in out
    code, out = run(delete, ["widget", "x"], as_admin(env))
    assert code == 2 and "Invalid value" in out


def test_delete_refuses_a_queue_with_unfinished_jobs(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    feed(gw.ctx.status, status_changed("p1", queue="team-a-ops", state="pending"))
    feed(gw.ctx.status, status_changed("r1", queue="team-a-ops", state="running"))
    feed(gw.ctx.status, status_changed("done", queue="team-a-ops", state="succeeded"))
    code, out = run(delete, ["queue", "team-a-ops"], as_admin(env))
    assert code == 1, out
    assert "queue/team-a-ops not deleted" in out and "1 pending, 1 running: p1, r1" in out and "orphan" in out
    assert gw.publisher.on(CONFIG_TOPIC) == []
    feed(gw.ctx.status, status_changed("p1", queue="team-a-ops", state="cancelled"))
    feed(gw.ctx.status, status_changed("r1", queue="team-a-ops", state="succeeded"))
    assert run(delete, ["queue", "team-a-ops"], as_admin(env))[0] == 0


# ---------------------------------------------------------------------------------------------- tenant administrators

TENANT_ADMIN_EXAMPLE = EXAMPLE.with_name("team-c-queues.yaml")


def as_tenant_admin(gw: Harness, env: dict[str, str]) -> dict[str, str]:
    """tara's token (tenant administrator of team-a), team-a allowed 24 A100s and the cohort research."""
    feed(gw.ctx.config, TenantDefined(item=TenantConfig(name="team-a", namespace="team-a",
                                                        queue_quota={"gpu:a100": 24}, queue_cohorts=["research"])))
    return {**env, "MUSTER_TOKEN": TOKENS["tara"]}


def test_a_tenant_admin_applies_and_deletes_its_tenants_queues(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    env = as_tenant_admin(gw, env)
    text = "kind: Queue\nname: team-a-dev\ntenant: team-a\ncohort: research\nquotas: {gpu:a100: {nominal: 8}}\n"
    code, out = run(apply, ["-f", "-"], env, stdin=text)
    assert (code, out.strip()) == (0, "queue/team-a-dev created"), out
    code, out = run(apply, ["-f", "-"], env, stdin=text.replace("nominal: 8", "nominal: 9"))
    assert code == 1 and "queue/team-a-dev" in out and "tenant_quota_exceeded" in out, out
    assert "may give its queues 24 gpu:a100" in out and "already take 16" in out, out
    code, out = run(delete, ["queue", "team-a-dev"], env)
    assert (code, out.strip()) == (0, "queue/team-a-dev deleted"), out
    assert [type(m).__name__ for m in gw.publisher.on(CONFIG_TOPIC)] == ["QueueDefined", "ConfigItemDeleted"]


def test_a_tenant_admin_is_refused_other_kinds_and_tenants(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    env = as_tenant_admin(gw, env)
    code, out = run(apply, ["-f", str(EXAMPLE)], env)  # a cohort, a tenant, a priority class, a queue
    assert code == 1 and "needs an administrator's token (or a tenant administrator's" in out, out
    code, out = run(apply, ["-f", "-"], env, stdin="kind: Queue\nname: team-b\ntenant: team-a\n")
    assert code == 1 and "queue/team-b" in out and "403 other_tenant" in out, out
    code, out = run(delete, ["queue", "team-b"], env)
    assert code == 1 and "403 other_tenant" in out and "administrator's token" not in out, out
    assert gw.publisher.on(CONFIG_TOPIC) == []


def test_the_tenant_admin_example_fits_its_tenants_quota(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    assert run(apply, ["-f", str(EXAMPLE)], as_admin(env))[0] == 0
    gw.ctx.tokens = TokenTable([TokenEntry(token="token-of-team-c-admin", tenant="team-c", user="cora",
                                           role="tenant-admin")])
    env = {**env, "MUSTER_TOKEN": "token-of-team-c-admin"}
    code, out = run(apply, ["-f", str(TENANT_ADMIN_EXAMPLE)], env)
    assert (code, out.strip()) == (0, "queue/team-c-dev created"), out
    text = TENANT_ADMIN_EXAMPLE.read_text(encoding="utf-8").replace("nominal: 8", "nominal: 9")
    code, out = run(apply, ["-f", "-"], env, stdin=text)
    assert code == 1 and "422 tenant_quota_exceeded" in out, out
