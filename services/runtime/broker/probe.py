"""Free loopback ports and the readiness probe (a metadata request that lists the broker)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on at the time of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """Whether ``port`` can be bound on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def tcp_open(bootstrap: str, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted."""
    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


async def metadata_ready(bootstrap: str, *, request_timeout_ms: int = 5000, node_id: int | None = None,
                         security: Mapping[str, Any] | None = None) -> bool:
    """One metadata request: True when the broker answers and lists at least one broker (``node_id``
    among them, when given: a node of a cluster is ready once it has registered). ``security``: the
    client's security options (``KafkaSettings.security_options``) on an authenticated listener."""
    if not await asyncio.to_thread(tcp_open, bootstrap.split(",")[0]):
        return False
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=request_timeout_ms, **(security or {}))
    try:
        await client.bootstrap()
        brokers = client.cluster.brokers()
        if node_id is not None:
            return any(broker.nodeId == node_id for broker in brokers)
        return bool(brokers)
    except (KafkaError, OSError):
        return False
    finally:
        await client.close()


async def _wait_ready(bootstrap: str, deadline: float, alive: Callable[[], bool], interval: float,
                      node_id: int | None, security: Mapping[str, Any] | None) -> None:
    while True:
        if not alive():
            raise RuntimeError("the broker process exited before it became ready")
        if await metadata_ready(bootstrap, node_id=node_id, security=security):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"broker at {bootstrap} did not answer a metadata request in time")
        await asyncio.sleep(interval)


def wait_until_ready(
    bootstrap: str,
    *,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
    interval: float = 0.25,
    node_id: int | None = None,
    security: Mapping[str, Any] | None = None,
) -> None:
    """Block until a metadata request to ``bootstrap`` succeeds (and lists ``node_id``, when given).

    Runs its own event loop, so it must be called from a thread without a running loop
    (from async code use ``asyncio.to_thread``).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("wait_until_ready blocks; call it through asyncio.to_thread from async code")
    asyncio.run(_wait_ready(bootstrap, time.monotonic() + timeout, alive, interval, node_id, security))
