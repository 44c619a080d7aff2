"""The ``muster`` job commands against the gateway app served by uvicorn on a free port (in-memory views)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from muster.client import ConfigurationError, load_settings
from schemas.intents import CancelJob, ResumeJob, SubmitJob, SuspendJob
from schemas.topics import INTENTS_TOPIC
from services.cli.contexts import config, remember
from services.cli.jobs import (
    cancel,
    describe,
    get,
    list_jobs,
    queues,
    resume,
    set_priority,
    submit,
    suspend,
    top,
)
from tests.gateway.builders import Harness, answering, feed, status_changed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"


def run(command: object, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(command, args, env=env)  # type: ignore[arg-type]
    return result.exit_code, result.output


def test_submit_get_list_describe_and_actions(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    code, out = run(submit, [str(EXAMPLES / "train-llm.yaml"), "--idempotency-key", "cli-1"], env)
    assert code == 0, out
    job_id, state = out.split()[:2]
    assert state == "submitted"
    code, out = run(submit, [str(EXAMPLES / "train-llm.yaml"), "--idempotency-key", "cli-1"], env)
    assert (code, out.split()[0]) == (0, job_id) and "already submitted" in out
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob) and sent.spec.replicas == 4

    feed(gw.ctx.status, status_changed(job_id, name="train-llm", state="pending", position=1,
                                       reason="QuotaExhausted", message="team-a uses 16 of 16 a100"))
    code, out = run(get, [job_id, "-o", "json"], env)
    assert code == 0 and json.loads(out)["state"] == "pending"
    code, out = run(list_jobs, [], env)
    assert code == 0 and job_id in out and "QuotaExhausted" in out
    code, out = run(describe, [job_id], env)
    assert code == 0
    assert "Position:       2 (1 = next)" in out and "team-a uses 16 of 16 a100" in out and "History:" in out
    assert out.count(" (in ") <= 1  # the estimated start is shown once, not twice with two roundings

    answering(gw)
    for command, message_type, told in ((suspend, SuspendJob, "suspended"), (resume, ResumeJob, "resumed"),
                                        (cancel, CancelJob, "cancelled")):
        code, out = run(command, [job_id], env)
        assert code == 0 and out.startswith(f"{job_id} {told}"), out
        assert isinstance(gw.publisher.on(INTENTS_TOPIC)[-1], message_type)


def test_a_refused_request_exits_non_zero_with_the_reason(served: tuple[Harness, dict[str, str]]) -> None:
    """The issue's case: a priority change of a job running on borrowed quota used to print "requested"."""
    gw, env = served
    feed(gw.ctx.status, status_changed("j1", state="running"))
    answering(gw, "refused", "runs_on_borrowed_quota", "the job runs on borrowed quota")
    code, out = run(set_priority, ["j1", "high"], env)
    assert code != 0 and "runs on borrowed quota" in out, out
    code, out = run(describe, ["j1"], env)
    assert code == 0 and "Last request:   change priority by alice" in out
    assert "refused (runs_on_borrowed_quota): the job runs on borrowed quota" in out
    answering(gw, "unchanged")
    code, out = run(set_priority, ["j1", "high"], env)
    assert (code, out.strip()) == (0, "j1 already has priority class high")


def test_list_hides_finished_jobs_unless_all(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    feed(gw.ctx.status, status_changed("old-job", state="succeeded"))
    assert "no jobs" in run(list_jobs, [], env)[1]
    assert "old-job" in run(list_jobs, ["--all"], env)[1]


def test_list_counts_what_it_hides_and_never_loses_a_pending_job(served: tuple[Harness, dict[str, str]]) -> None:
    """Finished jobs are filtered by the gateway, so a burst of them cannot push a pending job past --limit."""
    gw, env = served
    feed(gw.ctx.status, status_changed("waiting", state="pending", reason="waiting_for_preemption", attempt=2))
    for i in range(5):
        feed(gw.ctx.status, status_changed(f"done-{i}", state="succeeded"))
    for i in range(3):
        feed(gw.ctx.status, status_changed(f"run-{i}", state="running"))
    code, out = run(list_jobs, ["--limit", "2"], env)
    assert code == 0 and "2 of 4 shown" in out
    code, out = run(list_jobs, ["--limit", "4"], env)
    assert "waiting" in out and "done-" not in out and "shown" not in out
    assert "waiting_for_preemption" in out  # the reason is never cut short
    row = next(line for line in out.splitlines() if line.startswith("waiting"))
    assert row.split()[3] == "2"  # ATTEMPT
    assert "8 of 9 shown" in run(list_jobs, ["--all", "--limit", "8"], env)[1]


def test_queues_and_top_render(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    feed(gw.ctx.status, status_changed("r1", state="running", gpus=8))
    code, out = run(queues, [], env)
    assert code == 0 and "team-a" in out and "a100=16" in out and "team-b" not in out
    code, out = run(top, ["--once"], env)
    assert code == 0 and "8 GPUs allocated" in out and "r1" in out


def test_api_errors_become_clear_messages(served: tuple[Harness, dict[str, str]], tmp_path: Path) -> None:
    gw, env = served
    spec = yaml.safe_load((EXAMPLES / "train-llm.yaml").read_text())
    spec["queue"] = "team-b"
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(spec))
    code, out = run(submit, [str(other)], env)
    assert code == 1 and "403 forbidden [spec.queue]: queue 'team-b' belongs to another tenant" in out
    spec["queue"], spec["template"]["resources"]["gpus"] = "team-a", 1000
    other.write_text(yaml.safe_dump(spec))
    code, out = run(submit, [str(other)], env)
    assert code == 1 and "422 validation_failed [spec.template.resources.gpus]" in out
    code, out = run(get, ["nope"], env)
    assert code == 1 and "404 not_found" in out
    code, out = run(get, ["x"], {**env, "MUSTER_TOKEN": "wrong-token"})
    assert code == 1 and "401 unauthenticated" in out
    assert gw.publisher.sent == []


def test_a_refused_spec_lists_every_problem_and_the_field_it_likely_meant(
        served: tuple[Harness, dict[str, str]], tmp_path: Path) -> None:
    gw, env = served
    spec = yaml.safe_load((EXAMPLES / "train-llm.yaml").read_text())
    spec["replicsa"] = spec.pop("replicas")
    spec["template"]["resources"]["gpu_tpye"] = spec["template"]["resources"].pop("gpu_type")
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump(spec))
    code, out = run(submit, [str(typo)], env)
    assert code == 1, out
    assert "(2 problems)" in out
    assert "spec.replicsa: Extra inputs are not permitted (did you mean 'replicas'?)" in out
    assert "spec.template.resources.gpu_tpye: Extra inputs are not permitted (did you mean 'gpu_type'?)" in out
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    code, out = run(submit, [str(empty)], env)
    assert code == 1 and "empty.yaml is empty" in out
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    code, out = run(submit, [str(listed)], env)
    assert code == 1 and "not a list" in out
    assert gw.publisher.sent == []


def test_settings_come_from_the_environment_or_the_cli_file(tmp_path: Path) -> None:
    nested = tmp_path / "project" / "src"
    nested.mkdir(parents=True)
    (tmp_path / ".muster").mkdir()
    (tmp_path / ".muster" / "cli.yaml").write_text("url: http://127.0.0.1:8080/\ntoken: from-file\n")
    no_contexts = {"MUSTER_CONFIG": str(tmp_path / "none.yaml")}
    settings = load_settings(no_contexts, cwd=nested)
    assert (settings.url, settings.token) == ("http://127.0.0.1:8080", "from-file")
    assert "from-file" not in repr(settings)
    settings = load_settings({**no_contexts, "MUSTER_URL": "http://gw:1", "MUSTER_TOKEN": "env"}, cwd=nested)
    assert (settings.url, settings.token) == ("http://gw:1", "env")
    with pytest.raises(ConfigurationError, match="MUSTER_URL"):
        load_settings(no_contexts, cwd=tmp_path.parent.parent / "nowhere")


def test_contexts_reach_the_gateway_from_any_folder(tmp_path: Path) -> None:
    """`muster up` remembers a context; `muster config` manages them; --context / MUSTER_CONTEXT pick one."""
    env = {"MUSTER_CONFIG": str(tmp_path / "config.yaml")}
    remember("local", "http://127.0.0.1:8000", "up-token", path=tmp_path / "config.yaml")
    assert oct((tmp_path / "config.yaml").stat().st_mode & 0o777) == "0o600"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert load_settings(env, cwd=elsewhere).token == "up-token"
    (tmp_path / "prod-token").write_text("prod-secret\n")
    code, out = run(config, ["set-context", "prod", "--url", "https://muster.example/", "--token-file",
                             str(tmp_path / "prod-token")], env)
    assert code == 0, out
    assert load_settings(env, cwd=elsewhere).token == "up-token"  # still the current one
    assert load_settings({**env, "MUSTER_CONTEXT": "prod"}, cwd=elsewhere).url == "https://muster.example"
    assert run(config, ["use-context", "prod"], env)[0] == 0
    assert load_settings(env, cwd=elsewhere).token == "prod-secret"
    code, out = run(config, ["get-contexts"], env)
    assert "* prod" in out and "  local" in out
    code, out = run(config, ["use-context", "staging"], env)
    assert code == 1 and "no context 'staging'" in out
    with pytest.raises(ConfigurationError, match="known: local, prod"):
        load_settings({**env, "MUSTER_CONTEXT": "staging"}, cwd=elsewhere)
    (tmp_path / ".muster").mkdir()
    (tmp_path / ".muster" / "cli.yaml").write_text("url: http://127.0.0.1:9/\ntoken: project\n")
    assert load_settings(env, cwd=tmp_path).token == "project"  # a project's own file wins over the current context
    assert load_settings({**env, "MUSTER_CONTEXT": "local"}, cwd=tmp_path).token == "up-token"  # a named one wins
    assert run(config, ["delete-context", "prod"], env)[0] == 0
    assert run(config, ["current-context"], env)[0] == 1


def test_every_subcommand_of_muster_resolves_to_a_command() -> None:
    """The ``muster`` group's lazy table (``SUBCOMMANDS``): every entry imports to a click command under
    its name, and ``muster --help`` lists them all."""
    import click

    from services.cli.main import SUBCOMMANDS, cli

    ctx = click.Context(cli)
    assert isinstance(cli, click.Group)
    for name in SUBCOMMANDS:
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command), name
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert all(name in result.output for name in SUBCOMMANDS)


def test_unreachable_gateway(tmp_path: Path) -> None:
    env = {"MUSTER_URL": "http://127.0.0.1:9", "MUSTER_TOKEN": "t", "MUSTER_CLI_CONFIG": ""}
    code, out = run(queues, [], env)
    assert code == 1 and "cannot reach the gateway" in out
