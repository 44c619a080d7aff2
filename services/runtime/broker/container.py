"""Docker fallback: a Kafka broker in a container through testcontainers (imported lazily)."""

from __future__ import annotations

import shutil
import subprocess
from types import TracebackType
from typing import Any, Self

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


def testcontainers_available() -> bool:
    """Whether the optional ``testcontainers`` package (with its Kafka module) can be imported."""
    try:
        import testcontainers.kafka  # noqa: F401
    except ImportError:
        return False
    return True


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
        from testcontainers.kafka import KafkaContainer

        container = KafkaContainer(image=self._image).with_kraft()
        container.start()
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
