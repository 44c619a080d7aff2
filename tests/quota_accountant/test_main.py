"""The composition root builds the accountant, seeded from the cluster file, and runs it in a runner."""

from __future__ import annotations

from pathlib import Path

from services.quota_accountant.main import QuotaAccountantMain
from services.runtime.kafka import KafkaSettings
from services.runtime.options import ServeOptions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"


def test_the_main_seeds_the_view_from_the_cluster_file() -> None:
    options = ServeOptions(kafka=KafkaSettings(bootstrap="127.0.0.1:1"), config_file=EXAMPLE)
    accountant = QuotaAccountantMain(options).accountant
    assert "team-a" in accountant.view.queues
    assert accountant.view.budget("team-a") == ("month", 5000)
    assert accountant.ledger.half_life_s == 7 * 86400
