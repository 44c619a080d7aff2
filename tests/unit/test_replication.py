"""Replication chosen from the cluster's size, the refusal of unsafe settings, and a cluster node's
configuration (no broker needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.runtime.broker import KafkaCluster
from services.runtime.broker.process import BrokerError
from services.runtime.broker.properties import replication_settings, server_properties
from services.runtime.kafka.replication import Replication, ReplicationError, choose, for_cluster


@pytest.mark.parametrize(("brokers", "expected"), [(1, (1, 1)), (2, (2, 1)), (3, (3, 2)), (5, (3, 2))])
def test_the_default_follows_the_cluster_size(brokers: int, expected: tuple[int, int]) -> None:
    assert for_cluster(brokers) == Replication(*expected)
    assert choose(brokers) == Replication(*expected)


def test_three_replicas_two_in_sync_is_the_only_safe_default() -> None:
    assert for_cluster(3).safe
    assert not for_cluster(1).safe and not for_cluster(2).safe
    assert choose(3, allow_unsafe=False) == Replication(3, 2)
    assert choose(5, factor=5, min_insync=3, allow_unsafe=False) == Replication(5, 3)


@pytest.mark.parametrize(
    ("brokers", "factor", "min_insync", "message"),
    [
        (1, None, None, "refusing replication factor 1, min.insync.replicas 1 on a cluster of 1 broker"),
        (2, None, None, "a second failure while one broker is down loses acknowledged records"),
        (3, 1, None, "a broker's disk is the only copy of every record"),
        (3, None, 1, "min.insync.replicas 1 < 2"),
        (3, 3, 3, "every write fails while any one replica is down"),
    ],
)
def test_production_refuses_unsafe_settings_and_says_what_to_do(
    brokers: int, factor: int | None, min_insync: int | None, message: str
) -> None:
    with pytest.raises(ReplicationError, match="--allow-unsafe") as refused:
        choose(brokers, factor=factor, min_insync=min_insync, allow_unsafe=False)
    assert message in str(refused.value)
    # a development cluster may have it
    chosen = choose(brokers, factor=factor, min_insync=min_insync, allow_unsafe=True)
    assert not chosen.safe


@pytest.mark.parametrize(
    ("factor", "min_insync", "message"),
    [(4, None, "needs 4 brokers; the cluster has 3"), (0, None, "at least 1"), (3, 0, "at least 1"),
     (2, 3, "no write could succeed")],
)
def test_impossible_settings_are_refused_even_when_unsafe_is_allowed(
    factor: int, min_insync: int | None, message: str
) -> None:
    with pytest.raises(ReplicationError, match=message):
        choose(3, factor=factor, min_insync=min_insync, allow_unsafe=True)


def test_a_cluster_node_lists_every_voter_and_replicates_internal_topics() -> None:
    settings = server_properties(host="127.0.0.1", port=9001, controller_port=9101, data_dir=Path("/d"), node_id=2,
                                 voters={1: 9100, 2: 9101, 3: 9102})
    assert settings["node.id"] == "2"
    assert settings["process.roles"] == "broker,controller"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9100,2@127.0.0.1:9101,3@127.0.0.1:9102"
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9101"
    for key in ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor"):
        assert settings[key] == "3"
    assert settings["min.insync.replicas"] == settings["transaction.state.log.min.isr"] == "2"


def test_a_single_node_keeps_replication_one() -> None:
    settings = server_properties(host="127.0.0.1", port=9001, controller_port=9101, data_dir=Path("/d"))
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9101"
    assert settings["offsets.topic.replication.factor"] == settings["min.insync.replicas"] == "1"
    assert replication_settings(1)["default.replication.factor"] == "1"


def test_a_node_must_be_among_the_voters() -> None:
    with pytest.raises(ValueError, match="not among the voters"):
        server_properties(host="h", port=1, controller_port=2, data_dir=Path("/d"), node_id=4, voters={1: 2})


def test_a_cluster_size_out_of_range_is_refused() -> None:
    with pytest.raises(BrokerError, match="choose 1 to 9"):
        KafkaCluster(0)
    with pytest.raises(BrokerError, match="choose 1 to 9"):
        KafkaCluster(12)


def test_the_command_line_limits_agree_with_the_launcher() -> None:
    from services.cli.up import MAX_BROKERS as UP_MAX
    from services.runtime.broker.cluster import MAX_BROKERS

    assert UP_MAX == MAX_BROKERS


def test_the_broker_command_refuses_a_port_for_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    from services.runtime.broker.__main__ import main

    assert main(["run", "--brokers", "3", "--port", "9092"]) == 2
    assert "--port applies to a single broker" in capsys.readouterr().err
