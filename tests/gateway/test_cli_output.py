"""``-o text|wide|json|yaml`` on every read command of ``muster``: json and yaml carry the API's objects (the
same data), wide adds columns to text."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from schemas.topics import TOPICS
from services.cli.contexts import config, remember
from services.cli.jobs import describe, get, list_jobs, queues, recurring, submit
from services.cli.output import FORMATS
from services.cli.topics import topics
from tests.builders.clock import T0
from tests.gateway.builders import TOKENS, Harness, feed, status_changed

NIGHTLY = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "nightly-eval.yaml"


def run(command: object, args: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(command, args, env=env)  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    return result.output


def machine(command: object, args: list[str], env: dict[str, str]) -> Any:
    """The command's json output, checked equal to its yaml output."""
    as_json = json.loads(run(command, [*args, "-o", "json"], env))
    assert yaml.safe_load(run(command, [*args, "-o", "yaml"], env)) == as_json
    return as_json


@pytest.fixture
def busy(served: tuple[Harness, dict[str, str]]) -> dict[str, str]:
    gw, env = served
    feed(gw.ctx.status, status_changed("wait-1", name="train", state="pending", position=1, reason="quota_exhausted",
                                       message="team-a uses 16 of 16 a100", estimated_start=T0 + timedelta(hours=1)))
    feed(gw.ctx.status, status_changed("run-1", name="eval", state="running", cluster="east", minutes=1))
    return {**env, "COLUMNS": "250"}


def test_every_read_command_takes_the_four_formats() -> None:
    for command in (get, list_jobs, describe, queues, recurring, topics.commands["list"],
                    config.commands["get-contexts"]):
        option = next(p for p in command.params if p.name == "output")
        assert tuple(option.type.choices) == FORMATS, command.name  # type: ignore[attr-defined]
    for sub in ("list", "get"):
        option = next(p for p in recurring.commands[sub].params if p.name == "output")  # type: ignore[attr-defined]
        assert tuple(option.type.choices) == FORMATS  # type: ignore[attr-defined]


def test_jobs_as_json_yaml_text_and_wide(busy: dict[str, str]) -> None:
    jobs = machine(list_jobs, [], busy)
    assert [(j["job_id"], j["state"], j["position"]) for j in jobs] == [("wait-1", "pending", 1),
                                                                      ("run-1", "running", None)]
    assert jobs[0]["estimated_start"] == "2026-11-01T13:00:00Z"
    assert machine(get, ["run-1"], busy)["cluster"] == "east"

    text = run(list_jobs, [], busy)
    wide = run(list_jobs, ["-o", "wide"], busy)
    assert "CLUSTER" not in text and "MESSAGE" not in text
    header = wide.splitlines()[0].split()
    assert header[:4] == ["JOB", "NAME", "TENANT", "QUEUE"] and "CLUSTER" in header and "PRIORITY" in header
    row = next(line for line in wide.splitlines() if line.startswith("wait-1"))
    assert "train" in row and "2026-11-01 13:00:00Z" in row and "team-a uses 16 of 16 a100" in row
    assert "east" in next(line for line in wide.splitlines() if line.startswith("run-1"))
    assert "east" in run(get, ["run-1", "-o", "wide"], busy) and "east" not in run(get, ["run-1"], busy)


def test_describe_as_json_and_yaml(busy: dict[str, str]) -> None:
    explained = machine(describe, ["wait-1"], busy)
    assert (explained["reason"], explained["position"], explained["job"]["job_id"]) == ("quota_exhausted", 1,
                                                                                        "wait-1")
    assert explained["history"] and explained["summary"].startswith("pending at position 2")

    def fixed(out: str) -> list[str]:  # the lines that do not count time from the clock
        return [line for line in out.splitlines() if " ago)" not in line and "(in " not in line]

    wide = run(describe, ["wait-1", "-o", "wide"], busy)
    assert fixed(wide) == fixed(run(describe, ["wait-1"], busy))  # text and wide print the same description
    assert "Estimated start:" in wide and "Reason:         quota_exhausted" in wide


def test_queues_as_json_yaml_and_wide(busy: dict[str, str]) -> None:
    items = machine(queues, [], busy)
    team_a = next(q for q in items if q["name"] == "team-a")
    assert (team_a["quotas"]["gpu:a100"]["nominal"], team_a["quotas"]["gpu:a100"]["borrowing_limit"]) == (16, 8)
    assert team_a["jobs"] == {"pending": 1, "running": 1} and team_a["gpus_running"] == 8
    wide = run(queues, ["-o", "wide"], busy)
    assert "BORROWING LIMIT" in wide and "WEIGHT" in wide and "PRIVILEGED" in wide
    assert "BORROWING LIMIT" not in run(queues, [], busy)
    ops_row = next(line for line in wide.splitlines() if line.startswith("team-a-ops"))
    assert ops_row.split()[-1] == "yes"  # allow_privileged
    a_row = next(line for line in wide.splitlines() if line.startswith("team-a "))
    assert "a100=8" in a_row  # the borrowing limit


def test_recurring_jobs_as_json_yaml_and_wide(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    from schemas.config import PriorityClassConfig, PriorityClassDefined

    feed(gw.ctx.config, PriorityClassDefined(item=PriorityClassConfig(name="low", value=10)))
    bob = {**env, "MUSTER_TOKEN": TOKENS["bob"], "COLUMNS": "250"}
    run(submit, [str(NIGHTLY)], bob)
    [item] = machine(recurring, ["list"], bob)
    assert (item["name"], item["schedule"], item["user"]) == ("team-b.nightly-eval", "0 2 * * *", "bob")
    assert machine(recurring, ["get", "team-b.nightly-eval"], bob)["spec"]["name"] == "nightly-eval"
    wide = run(recurring, ["list", "-o", "wide"], bob)
    assert "USER" in wide and "CREATED" in wide and "bob" in wide
    assert "USER" not in run(recurring, ["list"], bob)


def test_topics_and_contexts(tmp_path: Path) -> None:
    listed = machine(topics, ["list"], {})
    assert [t["name"] for t in listed] == list(TOPICS)
    assert listed[0]["dlq"] == "muster.intents.v1.dlq" and listed[0]["external_producers"] is True
    wide = run(topics, ["list", "-o", "wide"], {})
    assert "dlq: muster.status.v1.dlq" in wide and "dlq:" not in run(topics, ["list"], {})

    env = {"MUSTER_CONFIG": str(tmp_path / "config.yaml")}
    remember("local", "http://127.0.0.1:8000", "secret-token", path=tmp_path / "config.yaml")
    (tmp_path / "prod-token").write_text("prod-secret")
    run(config, ["set-context", "prod", "--url", "https://muster.example", "--token-file",
                 str(tmp_path / "prod-token")], env)
    contexts = machine(config, ["get-contexts"], env)
    assert contexts["current-context"] == "local"
    assert [(c["name"], c["current"], c["token"]) for c in contexts["contexts"]] == [
        ("local", True, "inline"), ("prod", False, f"token-file {tmp_path / 'prod-token'}")]
    everything = "".join(run(config, ["get-contexts", "-o", fmt], env) for fmt in FORMATS)
    assert "secret-token" not in everything and "prod-secret" not in everything
    assert "token-file" in run(config, ["get-contexts", "-o", "wide"], env)
