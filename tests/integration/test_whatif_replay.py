"""What-if replay against a real broker: a small log on Muster's topics, exported, replayed from the file and
from Kafka, with a quota what-if that must shorten the waiting queue's wait."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from schemas.topics import TOPIC_OF, TOPICS
from services.cli.main import cli
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.kafka.reader import read_to_end
from services.simulator.logfile import REPLAY_TOPICS, WINDOW_TOPICS
from tests.unit.simulator.log_builders import Log

PATCH = """\
queues:
  team-b:
    quotas: {gpu:a100: {nominal: 16}}
clusters:
  east:
    node_groups:
      a100: {count: 3}
"""


def _log(t0: datetime) -> Log:
    """team-a's 16-GPU job borrows team-b's 8 for 600 s while team-b's job waits; then team-b's runs 100 s."""
    log = Log(t0=t0).cluster(nodes=2, gpus=8, quota=8)
    log.submit("big", "team-a", 0, pods=2).admit("big", 0).start("big", 1).succeed("big", 601)
    log.submit("eval", "team-b", 10).admit("eval", 601).start("eval", 602).succeed("eval", 702)
    log.submit("late", "team-a", 650, gpus=4).admit("late", 650).start("late", 651).status("late", "running", 651)
    return log


async def _produce(settings: KafkaSettings, log: Log) -> None:
    async with EnvelopeProducer(settings) as producer:
        for envelope in log.envelopes:
            await producer.send_and_wait(TOPIC_OF[envelope.type], envelope)


def _invoke(args: list[str]) -> Any:
    # the log's scheduler never preempted: the replays take the queue manager's flags from the same variables
    result = CliRunner().invoke(cli, args, catch_exceptions=False, env={"MUSTER_SCHEDULER_PREEMPTION": "false"})
    assert result.exit_code == 0, result.output
    return result


async def test_export_and_replay_a_quota_what_if(registry_settings: KafkaSettings, tmp_path: Path) -> None:
    bootstrap = registry_settings.bootstrap
    await _produce(registry_settings, _log(datetime.now(UTC) - timedelta(seconds=800)))
    patch = tmp_path / "patch.yaml"
    patch.write_text(PATCH)
    export = tmp_path / "log.jsonl"

    await asyncio.to_thread(_invoke, ["log", "export", "--bootstrap", bootstrap, "--since", "1h", "-o", str(export)])
    lines = export.read_bytes().splitlines()
    assert json.loads(lines[0])["muster_log_export"] == 1 and len(lines) > 20

    sim = ["sim", "--config-patch", str(patch), "-o", "json"]
    from_file = json.loads((await asyncio.to_thread(_invoke, [*sim, "--from-file", str(export)])).output)
    live = json.loads((await asyncio.to_thread(_invoke, [*sim, "--from-kafka", bootstrap, "--since", "1h"])).output)
    for report in (from_file, live):
        team_b = report["per_queue"]["team-b"]
        assert team_b["actual"]["avg_wait_s"] >= 590
        assert team_b["whatif"]["avg_wait_s"] < team_b["actual"]["avg_wait_s"] / 10  # 8 more GPUs: no wait
        assert abs(team_b["baseline"]["avg_wait_s"] - team_b["actual"]["avg_wait_s"]) < 10  # close to reality
        assert report["jobs"]["running"] == 1 and report["jobs"]["succeeded"] == 2
        assert report["all"]["whatif"]["capacity_gpus"] == 24
    for metric in ("avg_wait_s", "avg_jct_s", "preemptions"):  # the window's end differs: the allocation a little
        assert from_file["per_queue"]["team-b"]["actual"][metric] == live["per_queue"]["team-b"]["actual"][metric]

    text = (await asyncio.to_thread(_invoke, ["sim", "--from-file", str(export), "--config-patch", str(patch),
                                              "--plot", str(tmp_path / "w.png")])).output
    assert "baseline replay" in text and "what-if" in text and "still running" in text
    assert (tmp_path / "w.png").stat().st_size > 0


async def test_a_window_reads_only_the_records_since_its_start(registry_settings: KafkaSettings) -> None:
    settings = registry_settings
    await _produce(settings, _log(datetime.now(UTC) - timedelta(seconds=800)))
    partitions = {t: TOPICS[t].partitions for t in REPLAY_TOPICS}
    before = await read_to_end(settings, partitions)
    future = int((datetime.now(UTC) + timedelta(hours=1)).timestamp() * 1000)
    later = await read_to_end(settings, partitions, from_ms=dict.fromkeys(WINDOW_TOPICS, future))
    assert {r.topic for r in later} <= {t for t in REPLAY_TOPICS if t not in WINDOW_TOPICS}
    assert len(later) < len(before)
