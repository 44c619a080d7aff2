"""The container launcher: a Kafka broker in a Docker container through testcontainers (the optional
``containers`` extra, imported lazily). Chosen with ``MUSTER_KAFKA_LAUNCHER=container`` or
``--launcher container``, or as the last fallback of ``auto``; it needs a Docker engine."""

from __future__ import annotations

import shutil
import subprocess
from types import TracebackType
from typing import Any, Self

from services.runtime.broker.process import BrokerError

CONTAINER_IMAGE = "confluentinc/cp-kafka:7.9.1"  # Confluent Platform 7.9 ships Apache Kafka 3.9


def docker_answers(timeout: float = 5.0) -> bool:
    """Whether a Docker engine answers ``docker info`` (the client alone is not enough)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        result = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


class ContainerError(BrokerError):
    """The container path cannot run here: no testcontainers package, or no Docker engine answering."""


INSTALL_HINT = "pip install 'muster[containers]' (testcontainers with its Kafka module)"


def _kafka_container_class() -> Any:
    """testcontainers' ``KafkaContainer`` (``testcontainers.community.kafka`` from 4.14 on, where the old
    ``testcontainers.kafka`` only warns; the old module before). Raises ``ImportError`` without it."""
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:
        from testcontainers.kafka import KafkaContainer
    return KafkaContainer


def testcontainers_available() -> bool:
    """Whether the optional ``testcontainers`` package (with its Kafka module) can be imported."""
    try:
        _kafka_container_class()
    except ImportError:
        return False
    return True


def container_problem() -> str | None:
    """Why the container path cannot run here (None when it can): the package or a Docker engine missing."""
    if not testcontainers_available():
        return f"the testcontainers package is not installed: {INSTALL_HINT}"
    if not docker_answers():
        return ("no Docker engine answers (`docker info` failed or docker is not on PATH); the container "
                "launcher needs a running Docker engine")
    return None


class ContainerBroker:
    """A KRaft Kafka broker in a Docker container; its data lives and dies with the container."""

    can_restart = False

    def __init__(self, image: str = CONTAINER_IMAGE) -> None:
        self._image = image
        self._container: Any = None
        self._bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        if self._bootstrap is None:
            raise RuntimeError("the container broker is not started")
        return self._bootstrap

    def start(self) -> Self:
        """Pull if needed and start the container; returns once testcontainers reports it ready."""
        if self._container is not None:
            return self
        try:
            kafka_container = _kafka_container_class()
        except ImportError as exc:
            raise ContainerError(f"the container launcher needs testcontainers: {INSTALL_HINT}") from exc
        container = kafka_container(image=self._image).with_kraft()
        try:
            container.start()
        except Exception as exc:  # docker.errors.DockerException and friends: the engine is the problem
            raise ContainerError(f"could not start the Kafka container ({self._image}) through Docker: {exc}; "
                                 "the container launcher needs a running Docker engine") from exc
        self._container = container
        self._bootstrap = str(container.get_bootstrap_server())
        return self

    def stop(self) -> None:
        """Stop and remove the container."""
        if self._container is not None:
            self._container.stop()
            self._container = None
            self._bootstrap = None

    close = stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
