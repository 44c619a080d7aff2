"""The composition root builds a runner around the accountant, seeded from the cluster file."""

from __future__ import annotations

from pathlib import Path

from services.quota_accountant.main import SERVICE, build
from services.runtime.kafka import KafkaSettings
from services.runtime.options import ServeOptions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"


def test_build_seeds_the_view_from_the_cluster_file() -> None:
    options = ServeOptions(kafka=KafkaSettings(bootstrap="127.0.0.1:1"), config_file=EXAMPLE)
    runner, accountant = build(options)
    assert runner.name == SERVICE and list(runner.tasks) == [accountant.run]
    assert "team-a" in accountant.view.queues
    assert accountant.view.budget("team-a") == ("month", 5000)
    assert accountant.ledger.half_life_s == 7 * 86400
