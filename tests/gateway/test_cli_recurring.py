"""``muster submit`` of a scheduled spec and the ``muster recurring`` group, against the served app."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner

from schemas.config import ConfigItemDeleted, PriorityClassConfig, PriorityClassDefined, RecurringJobDefined
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from services.cli.jobs import recurring, submit
from services.gateway.cron import firing_job_id
from tests.gateway.builders import T0, TOKENS, Harness, feed, status_changed

NIGHTLY = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "nightly-eval.yaml"


def run(command: object, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(command, args, env=env)  # type: ignore[arg-type]
    return result.exit_code, result.output


def as_bob(gw: Harness, env: dict[str, str]) -> dict[str, str]:
    """The example's queue is team-b's and its priority class ``low``."""
    feed(gw.ctx.config, PriorityClassDefined(item=PriorityClassConfig(name="low", value=10)))
    return {**env, "MUSTER_TOKEN": TOKENS["bob"], "COLUMNS": "200"}


def test_submit_of_a_scheduled_spec_prints_the_recurring_job_and_next_firings(
    served: tuple[Harness, dict[str, str]]
) -> None:
    gw, env = served
    code, out = run(submit, [str(NIGHTLY)], as_bob(gw, env))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "recurring job team-b.nightly-eval created: schedule '0 2 * * *' (UTC)"
    assert [line.split()[1] for line in lines[1:]] == ["2026-11-02", "2026-11-03", "2026-11-04"]
    assert all("02:00:00 UTC" in line for line in lines[1:])
    code, out = run(submit, [str(NIGHTLY)], as_bob(gw, env))
    assert code == 0 and out.startswith("recurring job team-b.nightly-eval unchanged")
    assert gw.publisher.on(INTENTS_TOPIC) == []
    [defined] = gw.publisher.on(CONFIG_TOPIC)
    assert isinstance(defined, RecurringJobDefined) and defined.item.user == "bob"


def test_recurring_list_get_suspend_resume_delete(served: tuple[Harness, dict[str, str]]) -> None:
    gw, env = served
    bob = as_bob(gw, env)
    assert run(submit, [str(NIGHTLY)], bob)[0] == 0
    fired = T0 - timedelta(hours=10)  # 02:00 today
    job_id = firing_job_id("team-b.nightly-eval", "nightly-eval", fired)
    feed(gw.ctx.status, status_changed(job_id, tenant="team-b", queue="team-b", name="nightly-eval",
                                       state="running"))

    code, out = run(recurring, [], bob)
    assert code == 0 and "team-b.nightly-eval" in out and "active" in out and f"{job_id} (running)" in out
    assert run(recurring, [], env)[1].strip() == "no recurring jobs"  # alice sees none of team-b's
    code, out = run(recurring, ["-o", "json"], bob)
    assert code == 0 and [item["name"] for item in json.loads(out)] == ["team-b.nightly-eval"]
    code, out = run(recurring, ["get", "team-b.nightly-eval"], bob)
    assert code == 0 and "Schedule:       0 2 * * * (UTC)" in out and f"{job_id}  running" in out

    assert run(recurring, ["suspend", "team-b.nightly-eval"], bob)[1].strip() == \
        "recurring job team-b.nightly-eval suspended"
    assert run(recurring, ["suspend", "team-b.nightly-eval"], bob)[1].strip() == \
        "recurring job team-b.nightly-eval already suspended"
    assert "none (suspended)" in run(recurring, ["get", "team-b.nightly-eval"], bob)[1]
    assert run(recurring, ["resume", "team-b.nightly-eval"], bob)[0] == 0
    code, out = run(recurring, ["delete", "team-b.nightly-eval"], env)
    assert code == 1 and "404 not_found" in out
    assert run(recurring, ["delete", "team-b.nightly-eval"], bob)[1].strip() == \
        "recurring job team-b.nightly-eval deleted"
    kinds = [type(m) for m in gw.publisher.on(CONFIG_TOPIC)[-4:]]
    assert kinds == [RecurringJobDefined, RecurringJobDefined, RecurringJobDefined, ConfigItemDeleted]
