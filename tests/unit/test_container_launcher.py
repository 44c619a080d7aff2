"""The container launcher of the broker (testcontainers), without Docker: the choice of launcher, what it
asks of the container object (a stand-in at the testcontainers boundary), and clear errors when
testcontainers or a Docker engine is missing."""

from __future__ import annotations

import signal
import sys
import threading
import types
from typing import Any, Self

import pytest

from services.runtime.broker import (
    BrokerError,
    ContainerBroker,
    ContainerError,
    ExternalBroker,
    container,
    resolve,
    resolve_broker,
)
from services.runtime.broker import __main__ as broker_cli
from services.runtime.broker.container import CONTAINER_IMAGE


class FakeKafkaContainer:
    """testcontainers' ``KafkaContainer`` as the launcher uses it; records what was asked of it."""

    made: list[FakeKafkaContainer] = []
    fail_start: Exception | None = None

    def __init__(self, image: str = "default", **kwargs: Any) -> None:
        self.image, self.kraft, self.started, self.stopped = image, False, False, False
        FakeKafkaContainer.made.append(self)

    def with_kraft(self) -> Self:
        self.kraft = True
        return self

    def start(self) -> Self:
        if FakeKafkaContainer.fail_start is not None:
            raise FakeKafkaContainer.fail_start
        self.started = True
        return self

    def get_bootstrap_server(self) -> str:
        return "localhost:32771"

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def fake_testcontainers(monkeypatch: pytest.MonkeyPatch) -> type[FakeKafkaContainer]:
    """A stand-in ``testcontainers.community.kafka`` module (and its parents) in ``sys.modules``."""
    FakeKafkaContainer.made, FakeKafkaContainer.fail_start = [], None
    kafka = types.ModuleType("testcontainers.community.kafka")
    kafka.KafkaContainer = FakeKafkaContainer  # type: ignore[attr-defined]
    for name, module in (("testcontainers", types.ModuleType("testcontainers")),
                         ("testcontainers.community", types.ModuleType("testcontainers.community")),
                         ("testcontainers.community.kafka", kafka)):
        monkeypatch.setitem(sys.modules, name, module)
    return FakeKafkaContainer


@pytest.fixture
def no_testcontainers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("testcontainers", "testcontainers.community", "testcontainers.community.kafka",
                 "testcontainers.kafka"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: the import raises ImportError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (resolve.BOOTSTRAP_ENV, resolve.LAUNCHER_ENV, "KAFKA_HOME"):
        monkeypatch.delenv(name, raising=False)


def docker(monkeypatch: pytest.MonkeyPatch, answers: bool) -> None:
    monkeypatch.setattr(container, "docker_answers", lambda timeout=5.0: answers)


def test_the_container_broker_asks_for_kraft_on_the_pinned_image_and_reports_its_address(
        fake_testcontainers: type[FakeKafkaContainer]) -> None:
    with ContainerBroker() as broker:
        [made] = fake_testcontainers.made
        assert (made.image, made.kraft, made.started) == (CONTAINER_IMAGE, True, True)
        assert broker.bootstrap == "localhost:32771" and broker.can_restart is False
    assert made.stopped
    with pytest.raises(RuntimeError, match="not started"):
        _ = broker.bootstrap


def test_a_docker_failure_on_start_is_a_clear_error(fake_testcontainers: type[FakeKafkaContainer]) -> None:
    fake_testcontainers.fail_start = ConnectionError("Error while fetching server API version")
    with pytest.raises(ContainerError, match="needs a running Docker engine") as caught:
        ContainerBroker("confluentinc/cp-kafka:7.9.1").start()
    assert isinstance(caught.value, BrokerError) and "server API version" in str(caught.value)


def test_without_testcontainers_the_container_broker_says_what_to_install(no_testcontainers: None) -> None:
    assert not container.testcontainers_available()
    with pytest.raises(ContainerError, match=r"muster\[containers\]"):
        ContainerBroker().start()


@pytest.mark.parametrize(("launcher", "env"), [("container", None), (None, "container"), (None, " Container ")])
def test_the_container_launcher_is_chosen_explicitly(monkeypatch: pytest.MonkeyPatch,
                                                     fake_testcontainers: type[FakeKafkaContainer],
                                                     launcher: str | None, env: str | None) -> None:
    if env is not None:
        monkeypatch.setenv(resolve.LAUNCHER_ENV, env)
    docker(monkeypatch, True)
    monkeypatch.setattr(resolve, "_local", lambda *a: pytest.fail("the local launcher was used"))
    broker = resolve_broker(launcher=launcher)
    assert isinstance(broker, ContainerBroker) and broker.bootstrap == "localhost:32771"
    broker.close()


def test_the_container_launcher_without_docker_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                                fake_testcontainers: type[FakeKafkaContainer]) -> None:
    docker(monkeypatch, False)
    with pytest.raises(BrokerError, match="container launcher cannot run: no Docker engine answers"):
        resolve_broker(launcher="container")
    assert fake_testcontainers.made == []


def test_the_container_launcher_without_the_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                                     no_testcontainers: None) -> None:
    docker(monkeypatch, True)
    with pytest.raises(BrokerError, match=r"testcontainers package is not installed: pip install 'muster\[containers"):
        resolve_broker(launcher="container")


def test_the_container_launcher_runs_one_broker_only(fake_testcontainers: type[FakeKafkaContainer]) -> None:
    with pytest.raises(BrokerError, match="starts one broker, not 3"):
        resolve_broker(launcher="container", brokers=3)


def test_an_external_address_wins_and_an_unknown_launcher_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_broker("broker:9092", launcher="container") == ExternalBroker("broker:9092")
    monkeypatch.setenv(resolve.LAUNCHER_ENV, "podman")
    with pytest.raises(BrokerError, match=r"unknown Kafka launcher 'podman'.*auto, local, container"):
        resolve_broker("broker:9092")


def test_the_local_launcher_never_falls_back_to_docker(monkeypatch: pytest.MonkeyPatch,
                                                       fake_testcontainers: type[FakeKafkaContainer]) -> None:
    docker(monkeypatch, True)
    monkeypatch.setattr(resolve, "_local_jvm_problem", lambda: "no java")
    with pytest.raises(BrokerError, match="no Kafka broker available: no java"):
        resolve_broker(launcher="local")
    assert fake_testcontainers.made == []
    broker = resolve_broker()  # auto: the container is the last fallback
    assert isinstance(broker, ContainerBroker)
    broker.close()


def test_the_broker_command_line_runs_a_container(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                  fake_testcontainers: type[FakeKafkaContainer]) -> None:
    docker(monkeypatch, True)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # the test run keeps its handlers
    monkeypatch.setattr(threading.Event, "wait", lambda self, timeout=None: True)  # Ctrl-C at once
    assert broker_cli.main(["run", "--launcher", "container"]) == 0
    assert capsys.readouterr().out.strip() == "localhost:32771"
    assert fake_testcontainers.made[0].stopped
    assert broker_cli.main(["run", "--launcher", "container", "--log-dir", "/tmp/x"]) == 2
    docker(monkeypatch, False)
    assert broker_cli.main(["run", "--launcher", "container"]) == 1
    assert "no Docker engine answers" in capsys.readouterr().err
