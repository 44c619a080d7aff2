"""The ledger as table rows: a ledger rebuilt from its rows reports exactly what it did, the mirror writes
only what changed, and Faust gets the Kafka security of ``KafkaSettings``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import faust
import pytest
from pydantic import SecretStr

from services.quota_accountant.attempts import Admission
from services.quota_accountant.ledger import Ledger
from services.quota_accountant.ledger_rows import TableMirror, attempt_key, ledger_of, rows_of
from services.quota_accountant.stream import (
    CHANGELOG_TOPICS,
    CONSUMER_GROUP,
    AccountantStreams,
    broker_auth,
    broker_urls,
)
from services.quota_accountant.windows import WINDOW_KINDS
from services.runtime.kafka import KafkaSettings

HALF = 7 * 86400.0
T = datetime(2026, 11, 10, 12, tzinfo=UTC).timestamp()


def admission(queue: str, tenant: str = "team-a", replicas: int = 4, per_pod: float = 8) -> Admission:
    return Admission(queue=queue, tenant=tenant, gpu_type="a100", gpus_per_pod=per_pod, replicas=replicas,
                     admitted_at=T)


def busy_ledger() -> Ledger:
    ledger = Ledger(HALF)
    ledger.admit("j-1", 1, admission("team-a"))
    ledger.start("j-1", 1, T + 60)
    ledger.scale("j-1", 1, 6, T + 600)
    ledger.end("j-1", 1, T + 90_000, "succeeded")  # settled, across a day boundary
    ledger.admit("j-2", 1, admission("team-b", "team-b", per_pod=0.5))
    ledger.start("j-2", 1, T + 100)  # running
    ledger.admit("j-3", 2, admission("team-a"))  # admitted, not started
    ledger.start("j-4", 1, T + 5)  # a start whose admission has not arrived
    ledger.end("j-5", 1, T + 7, "cancelled")
    return ledger


def test_a_ledger_rebuilt_from_its_rows_reports_exactly_the_same() -> None:
    ledger = busy_ledger()
    rebuilt = ledger_of(HALF, ledger.horizon_s, rows_of(ledger))
    now = T + 200_000
    for queue in ("team-a", "team-b"):
        assert rebuilt.queue_usage(queue, now) == ledger.queue_usage(queue, now)
    for tenant in ("team-a", "team-b"):
        for kind in WINDOW_KINDS:
            assert rebuilt.window_usage(tenant, kind, now) == ledger.window_usage(tenant, kind, now)
    assert rebuilt.settled == ledger.settled
    assert rebuilt.attempts == ledger.attempts
    # and it goes on the same way: a repeated fact is ignored, a new one settles alike
    assert not rebuilt.end("j-1", 1, T + 90_000, "succeeded").changed
    assert rebuilt.end("j-2", 1, T + 150_000, "evicted").charge == ledger.end("j-2", 1, T + 150_000, "evicted").charge


def test_the_mirror_writes_only_rows_that_changed() -> None:
    ledger = Ledger(HALF)
    mirror = TableMirror()
    effect = ledger.admit("j-1", 1, admission("team-a"))
    first = mirror.after_fact(ledger, [("j-1", 1)], effect.queues, effect.tenants)
    assert {(c.table, c.key) for c in first} == {("attempts", "j-1/1"), ("allocation", "team-a")}
    assert mirror.after_fact(ledger, [("j-1", 1)], effect.queues, effect.tenants) == []  # a repeated input

    ledger.start("j-1", 1, T)
    effect = ledger.end("j-1", 1, T + 3600, "succeeded")
    changes = {(c.table, c.key): c.row for c in mirror.after_fact(ledger, [("j-1", 1)], effect.queues,
                                                                   effect.tenants)}
    assert changes[("attempts", "j-1/1")] is None  # settled: the open attempt's row is deleted
    assert changes[("allocation", "team-a")] is None
    assert {("settled", "j-1/1"), ("decayed", "team-a"), ("budgets", "team-a")} <= set(changes)
    assert mirror.rows == rows_of(ledger)


def test_pruning_deletes_the_forgotten_rows() -> None:
    ledger = busy_ledger()
    mirror = TableMirror.of(rows_of(ledger))
    ledger.prune(T + 90_000 + ledger.horizon_s + 100 * 86400)
    changes = mirror.after_prune(ledger)
    assert ("settled", attempt_key(("j-1", 1)), None) in {(c.table, c.key, c.row) for c in changes}
    assert mirror.rows == rows_of(ledger)


def test_changelog_topics_and_group_have_the_apps_prefix() -> None:
    assert CONSUMER_GROUP == "muster-quota-accountant"
    tables = ("attempts", "settled", "allocation", "decayed", "budgets", "bought", "burst")
    assert list(CHANGELOG_TOPICS) == [f"muster-quota-accountant-{t}-changelog" for t in tables]
    assert broker_urls("a:9092, b:9093") == ["kafka://a:9092", "kafka://b:9093"]


def test_faust_gets_the_kafka_settings_security() -> None:
    assert broker_auth(KafkaSettings()) == {}
    tls = broker_auth(KafkaSettings(security_protocol="SSL"))["broker_credentials"]
    assert isinstance(tls, faust.SSLCredentials) and tls.protocol.value == "SSL"
    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        settings = KafkaSettings(security_protocol=protocol, sasl_username="quota-accountant",
                                 sasl_password=SecretStr("s3cret"))
        sasl = broker_auth(settings)["broker_credentials"]
        assert isinstance(sasl, faust.SASLCredentials)
        assert (sasl.protocol.value, sasl.mechanism.value) == (protocol, "SCRAM-SHA-512")
        assert (sasl.username, sasl.password) == ("quota-accountant", "s3cret")
        assert (sasl.ssl_context is not None) == (protocol == "SASL_SSL")
    with pytest.raises(ValueError, match="sasl_username"):
        broker_auth(KafkaSettings(security_protocol="SASL_SSL"))


async def test_the_faust_app_keeps_its_data_folder_out_of_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faust creates "<app id>-data" in the working directory unless told otherwise: ``muster up`` run from
    a checkout must not leave one there."""

    async def ignore(*_: object) -> None:
        return None

    monkeypatch.chdir(tmp_path)
    streams = AccountantStreams(KafkaSettings(), ["muster.decisions.v1"], on_event=ignore, on_recovered=ignore)
    datadir = Path(streams.app.conf.datadir)
    assert await asyncio.to_thread(datadir.is_dir) and tmp_path not in datadir.parents
    await streams.stop()
    assert await asyncio.to_thread(lambda: list(tmp_path.iterdir())) == []
    assert not await asyncio.to_thread(datadir.exists)
