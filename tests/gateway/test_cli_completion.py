"""Shell completion: click's mechanism end to end (the ``_MUSTER_COMPLETE`` protocol a shell speaks), with job
ids, queues, recurring jobs and configuration names read from the gateway served on a free port; silent and
quick when the gateway cannot answer."""

from __future__ import annotations

import socket
import time

import pytest
from click.testing import CliRunner

from services.cli import completion
from services.cli.main import cli
from tests.gateway.builders import TOKENS, Harness, feed, status_changed


def complete(words: str, env: dict[str, str], shell: str = "bash") -> list[str]:
    """What ``muster <words><Tab>`` offers, as bash asks click for it (the last word is the incomplete one)."""
    parts = words.split(" ")
    result = CliRunner().invoke(cli, [], prog_name="muster", env={
        **env, "_MUSTER_COMPLETE": f"{shell}_complete", "COMP_WORDS": "muster " + words,
        "COMP_CWORD": str(len(parts))})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    if shell == "bash":
        return [line.split(",", 1)[1] for line in lines if line.startswith("plain,")]
    return lines


@pytest.fixture
def jobs(served: tuple[Harness, dict[str, str]]) -> dict[str, str]:
    gw, env = served
    feed(gw.ctx.status, status_changed("train-0001", state="running"))
    feed(gw.ctx.status, status_changed("train-0002", state="pending"))
    feed(gw.ctx.status, status_changed("eval-0003", state="succeeded"))
    feed(gw.ctx.status, status_changed("bobs-0004", tenant="team-b", queue="team-b", state="pending"))
    return env


def test_subcommands_complete_without_a_gateway() -> None:
    offered = complete("des", {"MUSTER_URL": "", "MUSTER_CLI_CONFIG": ""})
    assert offered == ["describe"]
    assert {"apply", "delete", "completion"} <= set(complete("", {"MUSTER_URL": "", "MUSTER_CLI_CONFIG": ""}))


def test_job_ids_come_from_the_gateway_as_the_caller_sees_them(jobs: dict[str, str]) -> None:
    assert sorted(complete("describe ", jobs)) == ["eval-0003", "train-0001", "train-0002"]  # not bob's
    assert sorted(complete("get tr", jobs)) == ["train-0001", "train-0002"]
    assert sorted(complete("cancel ", jobs)) == ["train-0001", "train-0002"]  # unfinished ones only
    assert complete("suspend e", jobs) == []


def test_zsh_gets_each_jobs_state_as_its_description(jobs: dict[str, str]) -> None:
    lines = complete("describe train-0001", jobs, shell="zsh")
    assert lines[:3] == ["plain", "train-0001", "running train (team-a)"]


def test_queues_recurring_and_configuration_names(served: tuple[Harness, dict[str, str]]) -> None:
    _, env = served
    assert sorted(complete("list --queue team-a", env)) == ["team-a", "team-a-ops"]
    admin = {**env, "MUSTER_TOKEN": TOKENS["root"]}
    assert sorted(complete("delete priority-class ", admin)) == ["high", "normal"]
    assert complete("delete cohort r", admin) == ["research"]
    assert complete("recurring get ", env) == []


def test_an_unreachable_gateway_completes_nothing_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections and never answers: a hung gateway
    try:
        monkeypatch.setattr(completion, "TIMEOUT_S", 0.3)
        env = {"MUSTER_URL": f"http://127.0.0.1:{listener.getsockname()[1]}", "MUSTER_TOKEN": "t",
               "MUSTER_CLI_CONFIG": ""}
        started = time.monotonic()
        assert complete("describe ", env) == []
        assert time.monotonic() - started < 3
    finally:
        listener.close()
    assert complete("describe ", {"MUSTER_URL": "", "MUSTER_TOKEN": "", "MUSTER_CLI_CONFIG": "",
                                  "HOME": "/nonexistent"}) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_command_prints_clicks_script(shell: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert "_MUSTER_COMPLETE" in result.output and f"{shell}_complete" in result.output
