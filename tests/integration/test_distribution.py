"""Fetching the broker jars once (with a stand-in ``mvn``) and using a ``KAFKA_HOME`` installation."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from services.runtime.broker import KafkaBroker, ResolvedBroker, resolve_broker
from services.runtime.broker.distribution import (
    COMPLETE_MARKER,
    DistributionError,
    cached_libs_dir,
    fetch_jars,
    from_kafka_home,
    is_fetched,
)
from services.runtime.broker.probe import metadata_ready

FAKE_MVN = """#!/usr/bin/env bash
set -euo pipefail
echo call >> "{calls}"
[ -f "{fail}" ] && {{ echo "network unreachable" >&2; exit 1; }}
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
mkdir -p "$out"
touch "$out/kafka_2.13-9.9.9.jar" "$out/kafka-clients-9.9.9.jar"
"""


def fake_mvn(tmp_path: Path) -> tuple[Path, Path, Path]:
    calls, fail = tmp_path / "calls", tmp_path / "fail"
    script = tmp_path / "mvn"
    script.write_text(FAKE_MVN.format(calls=calls, fail=fail))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, calls, fail


def test_jars_are_fetched_once_and_a_failed_fetch_is_redone(tmp_path: Path) -> None:
    mvn, calls, fail = fake_mvn(tmp_path)
    root = tmp_path / "cache"
    fail.touch()
    with pytest.raises(DistributionError, match="network unreachable"):
        fetch_jars("9.9.9", root, mvn=str(mvn))
    assert not is_fetched("9.9.9", root)
    assert not (cached_libs_dir("9.9.9", root).parent / COMPLETE_MARKER).exists()

    fail.unlink()
    libs = fetch_jars("9.9.9", root, mvn=str(mvn))
    assert (libs / "kafka_2.13-9.9.9.jar").is_file() and is_fetched("9.9.9", root)
    assert fetch_jars("9.9.9", root, mvn=str(mvn)) == libs
    assert calls.read_text().count("call") == 2, "a complete fetch is not repeated"


def test_kafka_home_must_hold_kafka_jars(tmp_path: Path) -> None:
    (tmp_path / "libs").mkdir()
    with pytest.raises(DistributionError, match="KAFKA_HOME"):
        from_kafka_home(tmp_path)


@pytest.mark.integration
def test_kafka_home_installation_is_run_from_its_libs(
    kafka_broker: ResolvedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isinstance(kafka_broker, KafkaBroker) or not is_fetched():
        pytest.skip("needs the cached Kafka jars")
    home = tmp_path / "kafka"
    home.mkdir()
    (home / "libs").symlink_to(cached_libs_dir())
    monkeypatch.delenv("MUSTER_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("KAFKA_HOME", str(home))
    broker = resolve_broker()
    try:
        assert isinstance(broker, KafkaBroker)
        assert asyncio.run(metadata_ready(broker.bootstrap))
    finally:
        broker.close()
